package sm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// replyTo is node i's reply to request id, if it has one.
func replyTo(h *harness, i int, id uint64) (sm.Reply, bool) {
	for _, r := range h.node(i).replies {
		if r.ID == id {
			return r, true
		}
	}
	return sm.Reply{}, false
}

func appends(hn *hnode) int { return len(hn.opsOf(sm.OpAppend)) }

func claimWaiting(id uint64, wait time.Duration) sm.ClientOp {
	return sm.ClientOp{ID: id, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 1, Wait: wait}}
}

// A long-poll claim on an empty queue waits, logging nothing, and gets
// the job an enqueue brings.
func TestLongPollClaimGetsTheNextJob(t *testing.T) {
	h, p := threeNodes(t)
	pn := h.node(p)
	before := appends(pn)
	h.enqueue(p, claimWaiting(1, 10*time.Second))
	h.run()
	h.advance(3 * time.Second)
	if r, ok := replyTo(h, p, 1); ok {
		t.Fatalf("the claim was answered with nothing ready: %+v", r)
	}
	if n := appends(pn) - before; n != 0 {
		t.Fatalf("a waiting claim logged %d appends", n)
	}
	h.enqueue(p, sm.ClientOp{ID: 2, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("work")}})
	h.run()
	h.advance(100 * time.Millisecond)
	r, ok := replyTo(h, p, 1)
	if !ok || r.Status != sm.StatusOK || len(r.Jobs) != 1 || string(r.Jobs[0].Payload) != "work" || r.LSN == 0 {
		t.Fatalf("claim reply %+v (answered %v), want the enqueued job, logged", r, ok)
	}
}

// With nothing coming, it is answered empty at its deadline, not before.
func TestLongPollClaimAnswersEmptyAtItsDeadline(t *testing.T) {
	h, p := threeNodes(t)
	h.enqueue(p, claimWaiting(1, 2*time.Second))
	h.run()
	h.advance(1900 * time.Millisecond)
	if _, ok := replyTo(h, p, 1); ok {
		t.Fatal("answered before its wait was over")
	}
	h.advance(200 * time.Millisecond)
	r, ok := replyTo(h, p, 1)
	if !ok || r.Status != sm.StatusOK || len(r.Jobs) != 0 {
		t.Fatalf("claim reply %+v (answered %v), want an empty claim", r, ok)
	}
}

// A delayed job becomes ready with time: a waiting claim gets it within
// a maintenance tick of its run time.
func TestLongPollClaimGetsADelayedJob(t *testing.T) {
	h, p := threeNodes(t)
	h.enqueue(p, sm.ClientOp{ID: 2, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("later"), Delay: 2}})
	h.enqueue(p, claimWaiting(1, 10*time.Second))
	h.run()
	h.advance(time.Second)
	if _, ok := replyTo(h, p, 1); ok {
		t.Fatal("claimed a job that is not due yet")
	}
	h.advance(3 * time.Second)
	if r, ok := replyTo(h, p, 1); !ok || len(r.Jobs) != 1 || string(r.Jobs[0].Payload) != "later" {
		t.Fatalf("claim reply %+v (answered %v), want the delayed job once due", r, ok)
	}
}

// Waiting claims are released "unavailable" when the primary steps down.
func TestLongPollClaimReleasedOnStepDown(t *testing.T) {
	h, p := threeNodes(t)
	h.enqueue(p, claimWaiting(1, 15*time.Second))
	h.run()
	for i := 0; i < 3; i++ {
		if i != p {
			h.cutLink(p, i)
		}
	}
	h.advance(5 * time.Second)
	if h.node(p).n.Role() == sm.RolePrimary {
		t.Fatalf("n%d still primary, cut off", p)
	}
	r, ok := replyTo(h, p, 1)
	if !ok || r.Status != sm.StatusEAGAIN {
		t.Fatalf("claim reply %+v (answered %v), want EAGAIN on the step-down", r, ok)
	}
}

func TestLongPollWaitIsBounded(t *testing.T) {
	h, p := threeNodes(t)
	h.enqueue(p, claimWaiting(1, sm.MaxClaimWait+time.Second))
	h.enqueue(p, sm.ClientOp{ID: 2, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("x"), Wait: time.Second}})
	h.run()
	for _, id := range []uint64{1, 2} {
		if r, ok := replyTo(h, p, id); !ok || r.Status != sm.StatusEINVAL || !strings.Contains(r.Error, "wait") {
			t.Errorf("request %d: %+v (answered %v), want EINVAL naming the wait", id, r, ok)
		}
	}
}

// A client that goes away leaves no claim behind: the job stays pending
// for the next worker.
func TestLongPollClaimDroppedWhenItsClientIsGone(t *testing.T) {
	h, p := threeNodes(t)
	h.enqueue(p, claimWaiting(1, 10*time.Second))
	h.run()
	h.enqueue(p, sm.ClientGone{ID: 1})
	h.enqueue(p, sm.ClientOp{ID: 2, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("work")}})
	h.run()
	h.advance(time.Second)
	if r, ok := replyTo(h, p, 1); ok {
		t.Fatalf("the gone client's claim was answered: %+v", r)
	}
	h.enqueue(p, claimWaiting(3, time.Second))
	h.run()
	h.advance(100 * time.Millisecond)
	if r, ok := replyTo(h, p, 3); !ok || len(r.Jobs) != 1 {
		t.Fatalf("the next claim got %+v (answered %v), want the job nobody took", r, ok)
	}
}
