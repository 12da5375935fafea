package sm_test

import (
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// claimOne claims one job of q0 for h0 as request id and returns it.
func claimOne(t *testing.T, h *harness, p int, id uint64) queue.Job {
	t.Helper()
	h.enqueue(p, sm.ClientOp{ID: id, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 1}})
	h.run()
	r, ok := replyTo(h, p, id)
	if !ok || len(r.Jobs) != 1 {
		t.Fatalf("claim %d: %+v (answered %v), want one job", id, r, ok)
	}
	return r.Jobs[0]
}

var staleHandle = queue.Handle{ID: 99, Attempt: 1, Claim: queue.ClaimStamp{Term: 1, LSN: 2}}

// A claim carrying acks applies them and claims in one request, and both
// records go out in one write (one append, one fsync): the reply has the
// per-handle results (a stale handle refused) and the new jobs.
func TestClaimCarriesAcksInOneWrite(t *testing.T) {
	h, p := threeNodes(t)
	for i, pl := range []string{"a", "b"} {
		h.enqueue(p, sm.ClientOp{ID: uint64(10 + i), Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte(pl)}})
	}
	h.run()
	a := claimOne(t, h, p, 20)
	pn := h.node(p)
	before := appends(pn)
	h.enqueue(p, sm.ClientOp{ID: 21, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 5, Handles: []queue.Handle{a.Handle(), staleHandle}}})
	h.advance(time.Millisecond) // its write waits for the group of the last (groupcommit.go)
	r, ok := replyTo(h, p, 21)
	if !ok || r.Status != sm.StatusOK || len(r.OKs) != 2 || !r.OKs[0] || r.OKs[1] || len(r.Jobs) != 1 || string(r.Jobs[0].Payload) != "b" {
		t.Fatalf("claim with acks: %+v (answered %v), want oks [true false] and job b", r, ok)
	}
	if n := appends(pn) - before; n != 1 {
		t.Fatalf("the acks and the claim took %d appends, want one write for both", n)
	}
	// The ack took: the job is gone, not back in the queue.
	h.enqueue(p, sm.ClientOp{ID: 22, Req: sm.JobRequest{Kind: sm.JobGet, ID: a.ID}})
	h.run()
	if g, ok := replyTo(h, p, 22); !ok || g.OK {
		t.Fatalf("get of the acked job: %+v (answered %v), want it gone", g, ok)
	}
}

// More than 1000 acks on a claim are refused as a whole: nothing acked.
func TestClaimAcksBounded(t *testing.T) {
	h, p := threeNodes(t)
	h.enqueue(p, sm.ClientOp{ID: 1, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("a")}})
	h.run()
	a := claimOne(t, h, p, 2)
	hs := make([]queue.Handle, 1001)
	for i := range hs {
		hs[i] = a.Handle()
	}
	h.enqueue(p, sm.ClientOp{ID: 3, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 1, Handles: hs}})
	h.run()
	if r, ok := replyTo(h, p, 3); !ok || r.Status != sm.StatusEINVAL {
		t.Fatalf("claim with 1001 acks: %+v (answered %v), want EINVAL", r, ok)
	}
	h.enqueue(p, sm.ClientOp{ID: 4, Req: sm.JobRequest{Kind: sm.JobGet, ID: a.ID}})
	h.run()
	if g, ok := replyTo(h, p, 4); !ok || !g.OK || g.Jobs[0].State != queue.Processing {
		t.Fatalf("get after the refused claim: %+v (answered %v), want the job still claimed", g, ok)
	}
}

// A long-poll claim carrying acks applies them first; its reply, when a
// job comes, carries their results. Released by a step-down, it says the
// outcome is unknown (the acks were applied), not "nothing applied".
func TestLongPollClaimWithAcks(t *testing.T) {
	h, p := threeNodes(t)
	h.enqueue(p, sm.ClientOp{ID: 1, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("a")}})
	h.run()
	a := claimOne(t, h, p, 2)
	h.enqueue(p, sm.ClientOp{ID: 3, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 1, Wait: 10 * time.Second, Handles: []queue.Handle{a.Handle()}}})
	h.run()
	h.advance(time.Second)
	if r, ok := replyTo(h, p, 3); ok {
		t.Fatalf("answered with nothing ready: %+v", r)
	}
	h.enqueue(p, sm.ClientOp{ID: 4, Req: sm.JobRequest{Kind: sm.JobGet, ID: a.ID}})
	h.run()
	if g, ok := replyTo(h, p, 4); !ok || g.OK {
		t.Fatalf("get of the acked job while the claim waits: %+v (answered %v), want it acked", g, ok)
	}
	h.enqueue(p, sm.ClientOp{ID: 5, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("b")}})
	h.run()
	h.advance(100 * time.Millisecond)
	r, ok := replyTo(h, p, 3)
	if !ok || r.Status != sm.StatusOK || len(r.OKs) != 1 || !r.OKs[0] || len(r.Jobs) != 1 || string(r.Jobs[0].Payload) != "b" {
		t.Fatalf("long-poll claim with acks: %+v (answered %v), want oks [true] and job b", r, ok)
	}

	b := r.Jobs[0]
	h.enqueue(p, sm.ClientOp{ID: 6, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 1, Wait: 15 * time.Second, Handles: []queue.Handle{b.Handle()}}})
	h.enqueue(p, sm.ClientOp{ID: 7, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 1, Wait: 15 * time.Second, Handles: []queue.Handle{staleHandle}}})
	h.run()
	h.advance(time.Second)
	for i := 0; i < 3; i++ {
		if i != p {
			h.cutLink(p, i)
		}
	}
	h.advance(5 * time.Second)
	if h.node(p).n.Role() == sm.RolePrimary {
		t.Fatalf("n%d still primary, cut off", p)
	}
	if r, ok := replyTo(h, p, 6); !ok || r.Status != sm.StatusOutcomeUnknown {
		t.Fatalf("released claim whose acks were applied: %+v (answered %v), want outcome unknown", r, ok)
	}
	if r, ok := replyTo(h, p, 7); !ok || r.Status != sm.StatusEAGAIN {
		t.Fatalf("released claim whose acks were all refused: %+v (answered %v), want EAGAIN (nothing applied)", r, ok)
	}
}

// A claim carrying acks that finds nothing to claim is still a write: its
// acks were logged, so its reply waits for their durability like any
// write, and a step-down meanwhile answers "outcome unknown", never the
// "nothing applied, retry" of a read (found by the simulator, seed 254:
// the acks had taken and the client was told they had not). The same for
// a long-poll claim whose wait ends with nothing claimed.
func TestClaimWithAcksAndNothingToClaimIsAWrite(t *testing.T) {
	for _, wait := range []time.Duration{0, 300 * time.Millisecond} {
		h, p := threeNodes(t)
		h.enqueue(p, sm.ClientOp{ID: 1, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("a")}})
		h.run()
		a := claimOne(t, h, p, 2)
		for i := 0; i < 3; i++ {
			if i != p {
				h.cutLink(p, i)
			}
		}
		h.enqueue(p, sm.ClientOp{ID: 3, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 1, Wait: wait, Handles: []queue.Handle{a.Handle()}}})
		h.run()
		h.advance(2 * wait) // a long poll's wait ends; the acks are not committed
		if r, ok := replyTo(h, p, 3); ok {
			t.Fatalf("wait %v: answered before its acks could commit: %+v", wait, r)
		}
		h.advance(5 * time.Second)
		if h.node(p).n.Role() == sm.RolePrimary {
			t.Fatalf("wait %v: n%d still primary, cut off", wait, p)
		}
		if r, ok := replyTo(h, p, 3); !ok || r.Status != sm.StatusOutcomeUnknown {
			t.Fatalf("wait %v: claim whose acks were logged, released by a step-down: %+v (answered %v), want outcome unknown", wait, r, ok)
		}
	}
}
