package sm_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// switchoverCluster is threeNodes with the admin calls enabled.
func switchoverCluster(t *testing.T) (*harness, int) {
	t.Helper()
	return threeNodesWith(t, func(o *sm.Options) { o.EnableUpgrade = true })
}

// A switchover hands the role to the standby asked for: the calls that
// arrive meanwhile are held, none is acknowledged by the old primary,
// and each is answered "not primary" naming the new one once it leads;
// every job acknowledged before is on the new primary.
func TestSwitchoverHandsOverToTheTarget(t *testing.T) {
	h, p := switchoverCluster(t)
	to := (p + 1) % 3
	pn := h.node(p)
	for i := 0; i < 5; i++ {
		h.enqueue(p, sm.ClientOp{ID: uint64(100 + i), Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte(fmt.Sprint("before", i))}})
	}
	h.run()
	h.advance(200 * time.Millisecond)
	acked := 0
	for _, r := range pn.replies {
		if r.Status == sm.StatusOK {
			acked++
		}
	}
	if acked != 5 {
		t.Fatalf("%d of 5 enqueues acknowledged before the switchover", acked)
	}
	before := len(pn.replies)
	term := pn.n.Term()
	h.enqueue(p, sm.Switchover{ID: 1, To: to, Peer: "admin"})
	h.enqueue(p, sm.ClientOp{ID: 200, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("during")}})
	h.run()
	h.advance(time.Second)
	if len(pn.sws) != 1 || pn.sws[0].Outcome != sm.SwitchoverOK || pn.sws[0].Primary != to || pn.sws[0].Term <= term {
		t.Fatalf("switchover replies %+v, want OK naming n%d in a term above %d", pn.sws, to, term)
	}
	if got := h.node(to).n.Role(); got != sm.RolePrimary {
		t.Fatalf("n%d is %s after the switchover, want primary", to, got)
	}
	if got := pn.n.Role(); got != sm.RoleStandby || pn.n.Primary() != to {
		t.Fatalf("old primary n%d is %s following n%d, want a standby of n%d", p, got, pn.n.Primary(), to)
	}
	rest := pn.replies[before:]
	if len(rest) != 1 || rest[0].ID != 200 || !rest[0].NotPrimary || rest[0].Primary != to {
		t.Fatalf("the held call's replies %+v, want one 'not primary' naming n%d", rest, to)
	}
	q, _, rec := h.node(to).n.JobState()
	if !rec {
		t.Fatalf("new primary n%d has not recovered its job state", to)
	}
	if n := len(q.List("q0")); n != 5 {
		t.Errorf("new primary holds %d jobs of q0, want the 5 acknowledged", n)
	}
}

// A switchover is refused, with a reason, when it cannot happen: asked of
// a standby, to the primary itself, to no member, to a standby that is
// not in sync, or without an admin.
func TestSwitchoverRefusals(t *testing.T) {
	h, p := switchoverCluster(t)
	sb := (p + 1) % 3
	cases := []struct {
		node int
		req  sm.Switchover
		want sm.SwitchoverOutcome
		text string
	}{
		{sb, sm.Switchover{ID: 1, To: -1}, sm.SwitchoverNotPrimary, "Not primary"},
		{p, sm.Switchover{ID: 2, To: p}, sm.SwitchoverInvalid, "already the primary"},
		{p, sm.Switchover{ID: 3, To: 7}, sm.SwitchoverInvalid, "no member with index 7"},
	}
	for _, c := range cases {
		hn := h.node(c.node)
		n := len(hn.sws)
		h.enqueue(c.node, c.req)
		h.run()
		if len(hn.sws) != n+1 || hn.sws[n].Outcome != c.want || !strings.Contains(hn.sws[n].Error, c.text) {
			t.Errorf("switchover %+v on n%d: replies %+v, want %s containing %q", c.req, c.node, hn.sws[n:], c.want, c.text)
		}
	}
	// A standby cut off for longer than the failure timeout is silent.
	h.cutLink(p, sb)
	h.advance(2 * time.Second)
	pn := h.node(p)
	n := len(pn.sws)
	h.enqueue(p, sm.Switchover{ID: 4, To: sb})
	h.run()
	if len(pn.sws) != n+1 || pn.sws[n].Outcome != sm.SwitchoverNotInSync || !strings.Contains(pn.sws[n].Error, "not in sync (silent") {
		t.Errorf("switchover to a silent standby: replies %+v, want not in sync (silent)", pn.sws[n:])
	}
	h.heal()

	h2, p2 := threeNodes(t) // no admin configured
	h2.enqueue(p2, sm.Switchover{ID: 5, To: -1})
	h2.run()
	if got := h2.node(p2).sws; len(got) != 1 || got[0].Outcome != sm.SwitchoverDisabled {
		t.Errorf("switchover without an admin: replies %+v, want disabled", got)
	}
}

// A target that never stands (its messages lost) ends the handover at
// HandoverTimeout: the primary keeps its role, runs the held calls, and
// the admin hears why.
func TestSwitchoverTimesOutAndResumes(t *testing.T) {
	h, p := switchoverCluster(t)
	to := (p + 2) % 3
	pn := h.node(p)
	h.cutLink(p, to) // the target still counts as live, but TimeoutNow never reaches it
	h.enqueue(p, sm.Switchover{ID: 1, To: to, Peer: "admin"})
	h.enqueue(p, sm.ClientOp{ID: 300, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("held")}})
	h.run()
	h.advance(sm.HandoverTimeout + time.Second)
	if len(pn.sws) != 1 || pn.sws[0].Outcome != sm.SwitchoverFailed || !strings.Contains(pn.sws[0].Error, "did not take over within 2s; this primary takes writes again") {
		t.Fatalf("replies %+v, want one failure: did not take over", pn.sws)
	}
	if pn.n.Role() != sm.RolePrimary {
		t.Fatalf("n%d is %s after the failed switchover, want still primary", p, pn.n.Role())
	}
	var got []sm.Reply
	for _, r := range pn.replies {
		if r.ID == 300 {
			got = append(got, r)
		}
	}
	if len(got) != 1 || got[0].Status != sm.StatusOK {
		t.Errorf("the held call's replies %+v, want it run and acknowledged once the primary resumed", got)
	}
}

// With one of three nodes down, the handover needs the old primary's
// vote: it grants it on its durable position before its step-down's
// rescan, so the switchover completes.
func TestSwitchoverWithOneNodeDown(t *testing.T) {
	h, p := switchoverCluster(t)
	to, down := (p+1)%3, (p+2)%3
	h.kill(down)
	pn := h.node(p)
	h.enqueue(p, sm.Switchover{ID: 1, To: to, Peer: "admin"})
	h.run()
	h.advance(time.Second)
	if len(pn.sws) != 1 || pn.sws[0].Outcome != sm.SwitchoverOK || pn.sws[0].Primary != to {
		t.Fatalf("switchover with n%d down: replies %+v, want OK naming n%d", down, pn.sws, to)
	}
	// The old primary did not stand against it afterwards.
	h.advance(3 * time.Second)
	if got := h.node(to).n.Role(); got != sm.RolePrimary {
		t.Errorf("n%d is %s 3 s after taking over, want still primary", to, got)
	}
}
