package sm_test

import (
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// No log record without a state change (issue 9): an idle worker's empty
// claims and a refused handle are answered from the current state, in
// quorum mode after a read-index round, and append nothing.
func TestNoRecordWithoutStateChange(t *testing.T) {
	h, p := threeNodes(t)
	pn := h.node(p)
	appends := func() int {
		k := 0
		for _, op := range pn.ops {
			if op.Op == sm.OpAppend {
				k++
			}
		}
		return k
	}
	term, lsn := pn.n.LogPosition()
	before, replies := appends(), len(pn.replies)
	for k := 0; k < 10; k++ {
		h.enqueue(p, sm.ClientOp{ID: 800 + uint64(k), Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 5}})
	}
	h.enqueue(p, sm.ClientOp{ID: 820, Req: sm.JobRequest{Kind: sm.JobAck, Handle: queue.Handle{ID: 99, Attempt: 1, Claim: queue.ClaimStamp{Term: 1, LSN: 2}}}})
	h.run()
	h.advance(time.Second)
	got := pn.replies[replies:]
	if len(got) != 11 {
		t.Fatalf("%d replies, want 11: %+v", len(got), got)
	}
	for _, r := range got {
		if r.Status != sm.StatusOK || r.OK || len(r.Jobs) != 0 {
			t.Errorf("reply %+v, want an answered empty claim / refused ack", r)
		}
	}
	if a := appends() - before; a != 0 {
		t.Errorf("%d WAL appends for operations that changed nothing", a)
	}
	if t2, l2 := pn.n.LogPosition(); t2 != term || l2 != lsn {
		t.Errorf("log moved from (%d, %d) to (%d, %d)", term, lsn, t2, l2)
	}
	// A claim that hands out a job is logged as before.
	enqueueN(t, h, p, 1, 830)
	before = appends()
	h.enqueue(p, sm.ClientOp{ID: 840, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 5}})
	h.run()
	h.advance(time.Second)
	if appends() == before {
		t.Error("a claim that handed out a job was not logged")
	}
}

// An empty claim that dead-letters a job whose lapsed claim used its last
// attempt changed the state: it is logged like any change (else a standby,
// and a restart, would not see the job die). Maintenance is off so that
// no sweep does it first.
func TestEmptyClaimThatDeadLettersIsLogged(t *testing.T) {
	blob := testConfig(t, "Q", 1) // q0: max_attempts 5, visibility 30 s
	h := newHarness(t, 3)
	for i := 0; i < 3; i++ {
		install(t, h.add(i, nil, func(o *sm.Options) { o.MaintenanceInterval = 0 }).disk, blob, epoch)
	}
	h.boot(0, 1, 2)
	if !h.advanceUntil(20*time.Second, func() bool { return len(primaries(h)) == 1 }) {
		t.Fatal("no primary")
	}
	h.advance(time.Second)
	p := primaries(h)[0]
	pn := h.node(p)
	enqueueN(t, h, p, 1, 900)
	claim := func(id uint64) sm.Reply {
		t.Helper()
		before := len(pn.replies)
		h.enqueue(p, sm.ClientOp{ID: id, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 1}})
		h.run()
		h.advance(100 * time.Millisecond)
		if got := pn.replies[before:]; len(got) != 1 || got[0].Status != sm.StatusOK {
			t.Fatalf("claim %d: %+v", id, got)
		}
		return pn.replies[before]
	}
	for k := 0; k < 5; k++ { // every attempt claimed, every claim left to lapse
		if r := claim(910 + uint64(k)); len(r.Jobs) != 1 {
			t.Fatalf("attempt %d handed out %d jobs", k+1, len(r.Jobs))
		}
		h.advance(31 * time.Second)
	}
	_, lsn := pn.n.LogPosition()
	if r := claim(920); len(r.Jobs) != 0 {
		t.Fatalf("a job with no attempts left was handed out: %+v", r.Jobs)
	}
	if _, after := pn.n.LogPosition(); after <= lsn {
		t.Fatalf("the claim that dead-lettered the exhausted job was not logged (log at lsn %d before and after)", lsn)
	}
}
