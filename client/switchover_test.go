package client_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/sm"
)

// A switchover asked of a standby is not forwarded: its "not primary"
// answer is followed to the primary, whose answer names the new primary,
// which the client then prefers. The target travels as its index.
func TestSwitchoverFollowsRedirectAndPrefersNewPrimary(t *testing.T) {
	f := startFake(t, true, true, true)
	f.c.Nodes[0].Set(func(*wire.Request) *wire.Reply {
		return &wire.Reply{Status: sm.StatusEAGAIN, Error: "Not primary — redirect to primary", NotPrimary: true,
			Switchover: &sm.SwitchoverReply{Outcome: sm.SwitchoverNotPrimary, Primary: 1}}
	})
	f.c.Nodes[1].Set(func(r *wire.Request) *wire.Reply {
		if r.Switchover == nil {
			return &wire.Reply{Status: sm.StatusEINVAL, Error: "not a switchover"}
		}
		return &wire.Reply{Switchover: &sm.SwitchoverReply{Outcome: sm.SwitchoverOK, Primary: r.Switchover.To, Term: 5}}
	})
	cl := newClient(t, f.peers(), f.mat, client.Options{})
	rep, err := cl.Switchover(context.Background(), "n2")
	if err != nil || rep.GetPrimary() != "n2" || rep.GetTerm() != 5 {
		t.Fatalf("switchover: %v, %v", rep, err)
	}
	if got := f.sentTo(); got != "n0 n1" {
		t.Fatalf("sent to %q, want n0 n1", got)
	}
	if p, ok := cl.Primary(); !ok || p != 2 {
		t.Fatalf("known primary %d, %v; want n2 (2)", p, ok)
	}
	// "": the primary's pick, as -1.
	f.c.Nodes[2].Set(func(r *wire.Request) *wire.Reply {
		if r.Switchover == nil || r.Switchover.To != -1 {
			return &wire.Reply{Status: sm.StatusEINVAL, Error: "want the primary's pick"}
		}
		return &wire.Reply{Switchover: &sm.SwitchoverReply{Outcome: sm.SwitchoverOK, Primary: 0, Term: 6}}
	})
	if rep, err := cl.Switchover(context.Background(), ""); err != nil || rep.GetPrimary() != "n0" || rep.GetTerm() != 6 {
		t.Fatalf("switchover without a target: %v, %v", rep, err)
	}
}

// The refusals: an unknown name is the API's own invalid_argument naming
// the members (the node never sees it); the node's outcomes keep their
// codes and texts.
func TestSwitchoverRefusals(t *testing.T) {
	f := startFake(t, true, true)
	cl := newClient(t, f.peers(), f.mat, client.Options{})
	_, err := cl.Switchover(context.Background(), "n9")
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), `switchover to "n9": no such member (the members are n0, n1)`) {
		t.Fatalf("unknown target: %v", err)
	}
	if got := f.sentTo(); got != "" {
		t.Fatalf("the door saw the unknown target (sent to %q)", got)
	}
	for _, tc := range []struct {
		o      sm.SwitchoverOutcome
		status int32
		msg    string
		want   connect.Code
	}{
		{sm.SwitchoverNotInSync, wire.StatusNotInSync, "n1 is not in sync (syncing, 12 records behind)", connect.CodeFailedPrecondition},
		{sm.SwitchoverBusy, wire.StatusBusy, "a config upgrade is in progress", connect.CodeAborted},
		{sm.SwitchoverFailed, wire.StatusBusy, "n1 did not catch up within 2s (3 records behind); this primary takes writes again", connect.CodeAborted},
		{sm.SwitchoverInvalid, sm.StatusEINVAL, "n0 is already the primary", connect.CodeInvalidArgument},
	} {
		f.c.Nodes[0].Set(func(*wire.Request) *wire.Reply {
			return &wire.Reply{Status: tc.status, Error: tc.msg, Switchover: &sm.SwitchoverReply{Outcome: tc.o, Error: tc.msg, Primary: 0}}
		})
		_, err := cl.Switchover(context.Background(), "n1")
		if connect.CodeOf(err) != tc.want || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: %v, want %v with %q", tc.o, err, tc.want, tc.msg)
		}
		if got := f.sentTo(); got != "n0" {
			t.Errorf("%v: sent to %q, want n0 alone (a refusal is not retried elsewhere)", tc.o, got)
		}
	}
}
