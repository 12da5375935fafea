package sim

import (
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// A refusal that is §10.12's redirect says so as a code (Reply.NotPrimary)
// that the API redirects on, not by its text: a standby's refusal and a
// parked claim released when its primary steps down carry it; a recovered
// primary's answers and refusals of input do not.
func TestNotPrimaryReplies(t *testing.T) {
	d, _ := upgradePrimary(t, false)
	d.feed(sm.ClientOp{ID: 1, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "nosuchqueue", Payload: []byte("x")}})
	d.feed(sm.ClientOp{ID: 2, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 1, Wait: time.Second}})
	if len(d.replies) != 1 || d.replies[0].Status != sm.StatusEINVAL || d.replies[0].NotPrimary {
		t.Fatalf("a primary's refusal of input: %+v", d.replies)
	}
	d.feed(sm.Recv{From: 1, Msg: sm.Msg{Type: sm.MsgHeartbeat, Role: sm.RolePrimary, Term: d.node.Term() + 1, Priority: 1}})
	if len(d.replies) != 2 || d.replies[1].ID != 2 || d.replies[1].Status != sm.StatusEAGAIN || !d.replies[1].NotPrimary {
		t.Fatalf("the parked claim released on stepping down: %+v", d.replies)
	}
	d.feed(sm.ClientOp{ID: 3, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("x")}})
	if r := d.replies[len(d.replies)-1]; r.ID != 3 || r.Status != sm.StatusEAGAIN || !r.NotPrimary || r.Primary != 1 {
		t.Fatalf("a standby's refusal: %+v", r)
	}
}
