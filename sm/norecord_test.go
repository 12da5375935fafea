package sm_test

import (
	"testing"
	"time"

	"xce/sm"
	"xce/sm/queue"
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
