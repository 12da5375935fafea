package api_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/transport"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/schemaconnect"
	"github.com/xce-hpc/xce/sm"
)

// Claims on a Worker are one Work stream, each served as a Claim (a
// claim job request carrying its acks, the same reply), in order.
func TestWorkClaimsOnOneStream(t *testing.T) {
	c := startCluster(t, true)
	var s seen
	c.nodes[0].set(claimAnswer(&s, 2, 0))
	cl := newClient(t, c, client.Options{})
	w := cl.Worker()
	defer w.Close()
	for k := range 5 {
		rep, err := w.Claim(context.Background(), &schema.ClaimRequest{Queue: "q", Host: "h", Max: uint32(k + 1), Ack: acks(1, 2)})
		if err != nil {
			t.Fatalf("claim %d: %v", k, err)
		}
		if oks := rep.GetOks(); len(oks) != 2 || !oks[0] || oks[1] || len(rep.GetJobs()) != 1 || rep.GetJobs()[0].GetId() != 9 {
			t.Fatalf("claim %d: reply %v, want oks [true false] and job 9", k, rep)
		}
	}
	reqs := s.all()
	if len(reqs) != 5 {
		t.Fatalf("the node was given %d requests, want 5", len(reqs))
	}
	for k, r := range reqs {
		if r.Kind != sm.JobClaim || r.Max != k+1 || len(r.Handles) != 2 {
			t.Fatalf("request %d: %v, want claim %d with two acks", k, r, k+1)
		}
	}
	if n := c.nodes[0].served(schemaconnect.XceWorkProcedure); n != 1 {
		t.Fatalf("%d Work streams for 5 claims, want 1", n)
	}
	if n := c.nodes[0].served(schemaconnect.XceClaimProcedure); n != 0 {
		t.Fatalf("%d unary claims, want none", n)
	}
}

// A refusal ends the stream with its code, the worker's next claim opens
// a new one; bad input is refused before the node is asked, as Claim's.
func TestWorkRefusalEndsTheStream(t *testing.T) {
	c := startCluster(t, true)
	var s seen
	c.nodes[0].set(claimAnswer(&s, 0, 0))
	cl := newClient(t, c, client.Options{})
	w := cl.Worker()
	defer w.Close()
	ctx := context.Background()
	if _, err := w.Claim(ctx, &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := w.Claim(ctx, &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1, WaitMs: 20001})
	var ne *client.NodeError
	if !errors.As(err, &ne) || connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a claim waiting 20001 ms: %v, want the node's invalid_argument", err)
	}
	if _, err := w.Claim(ctx, &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	if n := len(s.all()); n != 2 {
		t.Fatalf("the node was given %d requests, want the 2 valid ones", n)
	}
	if n := c.nodes[0].served(schemaconnect.XceWorkProcedure); n != 2 {
		t.Fatalf("%d Work streams, want 2 (the refusal ended the first)", n)
	}
}

// A standby forwards a stream's claim to the primary and ends the
// stream; the worker learns the primary and opens its next stream there.
func TestWorkStandbyForwardsThenPrimary(t *testing.T) {
	c := startCluster(t, true, true)
	c.nodes[0].set(notPrimary(1))
	var s seen
	c.nodes[1].set(claimAnswer(&s, 0, 0))
	cl := newClient(t, c, client.Options{})
	w := cl.Worker()
	defer w.Close()
	for k := range 3 {
		rep, err := w.Claim(context.Background(), &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1, Ack: acks(5)})
		if err != nil || len(rep.GetOks()) != 1 || len(rep.GetJobs()) != 1 {
			t.Fatalf("claim %d: %v, %v", k, rep, err)
		}
	}
	if p, ok := cl.Primary(); !ok || p != 1 {
		t.Fatalf("known primary %d, %v; want n1", p, ok)
	}
	if n := len(s.all()); n != 3 {
		t.Fatalf("the primary was given %d claims, want 3", n)
	}
	st, fwd, direct := c.nodes[0].served(schemaconnect.XceWorkProcedure), c.nodes[1].served(schemaconnect.XceClaimProcedure), c.nodes[1].served(schemaconnect.XceWorkProcedure)
	if st != 1 || fwd != 1 || direct != 1 {
		t.Fatalf("streams on the standby %d, claims it forwarded %d, streams on the primary %d; want 1, 1, 1", st, fwd, direct)
	}
}

// A long poll waiting on a stream that the node releases (a step-down:
// not primary, no primary known) is unavailable, applied nowhere: the
// worker sends it again on a stream to the node that serves it.
func TestWorkLongPollReleasedOnStepDown(t *testing.T) {
	c := startCluster(t, true, true)
	var before, after seen
	c.nodes[0].set(claimAnswer(&before, 0, 0))
	c.nodes[1].set(notPrimary(-1))
	cl := newClient(t, c, client.Options{})
	w := cl.Worker()
	defer w.Close()
	ctx := context.Background()
	if _, err := w.Claim(ctx, &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	var released atomic.Bool
	c.nodes[0].set(func(r *wire.Request) *wire.Reply {
		before.add(r)
		if !released.Swap(true) {
			time.Sleep(300 * time.Millisecond)        // waiting, then released
			c.nodes[1].set(claimAnswer(&after, 0, 0)) // n1 took over
		}
		return notPrimary(-1)(r)
	})
	rep, err := w.Claim(ctx, &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1, WaitMs: 5000, Ack: acks(3)})
	if err != nil || len(rep.GetJobs()) != 1 || len(rep.GetOks()) != 1 {
		t.Fatalf("the released claim: %v, %v; want the new primary's answer", rep, err)
	}
	// The old primary was asked again first (the known primary), then
	// the new one.
	if b, a := len(before.all()), len(after.all()); b != 3 || a != 1 {
		t.Fatalf("claims given to the old primary %d, to the new %d; want 3 and 1", b, a)
	}
	if n := c.nodes[1].served(schemaconnect.XceWorkProcedure); n != 1 {
		t.Fatalf("%d Work streams on the new primary, want 1", n)
	}
}

// A claim written on the stream and not answered is outcome unknown and
// never sent again, as a unary Claim's; so is the node's code unknown.
func TestWorkLostReplyIsOutcomeUnknown(t *testing.T) {
	c := startCluster(t, true)
	var s seen
	var hang atomic.Bool
	c.nodes[0].set(func(r *wire.Request) *wire.Reply {
		s.add(r)
		if hang.Load() {
			time.Sleep(time.Second)
		}
		return claimAnswer(&seen{}, 0, 0)(r)
	})
	cl := newClient(t, c, client.Options{Timeout: 300 * time.Millisecond})
	w := cl.Worker()
	defer w.Close()
	ctx := context.Background()
	if _, err := w.Claim(ctx, &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	hang.Store(true)
	_, err := w.Claim(ctx, &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1, Ack: acks(1)})
	if !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("a claim answered after the timeout: %v, want outcome unknown", err)
	}
	if n := len(s.all()); n != 2 {
		t.Fatalf("the node was given %d claims, want 2 (the lost one once)", n)
	}
	hang.Store(false)
	c.nodes[0].set(func(r *wire.Request) *wire.Reply {
		s.add(r)
		return &wire.Reply{Status: sm.StatusOutcomeUnknown, Error: "lost"}
	})
	if _, err := w.Claim(ctx, &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1}); !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("code unknown: %v, want outcome unknown", err)
	}
	if n := len(s.all()); n != 3 {
		t.Fatalf("the node was given %d claims, want 3", n)
	}
}

// A stream that keeps sending outlives the BodyTimeout of a request
// body; one idle past the transport's IdleTimeout is closed by the node;
// the worker's next claim goes on a new stream, applied once.
func TestWorkIdleStreamReopens(t *testing.T) {
	c := startClusterWith(t, func(cfg *transport.Config) {
		cfg.IdleTimeout, cfg.BodyTimeout = 400*time.Millisecond, 300*time.Millisecond
	}, true)
	var s seen
	c.nodes[0].set(claimAnswer(&s, 0, 0))
	cl := newClient(t, c, client.Options{})
	w := cl.Worker()
	defer w.Close()
	ctx := context.Background()
	for range 3 { // a stream that keeps sending outlives the bound
		for range 3 {
			if _, err := w.Claim(ctx, &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(150 * time.Millisecond)
	}
	if n := c.nodes[0].served(schemaconnect.XceWorkProcedure); n != 1 {
		t.Fatalf("%d Work streams while claiming, want 1", n)
	}
	// Another worker keeps the connection busy (an idle one would be
	// closed too) while this one's stream sits idle past the bound.
	other := cl.Worker()
	defer other.Close()
	for range 8 {
		if _, err := other.Claim(ctx, &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := w.Claim(ctx, &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1, Ack: acks(4)}); err != nil {
		t.Fatalf("the claim after the idle close: %v", err)
	}
	if n := c.nodes[0].served(schemaconnect.XceWorkProcedure); n != 3 {
		t.Fatalf("%d Work streams, want 3 (the other's, and the idle one was closed)", n)
	}
	if n := len(s.all()); n != 18 {
		t.Fatalf("the node was given %d claims, want 18 (each once)", n)
	}
}

// A kept connection the node closed as idle (a GOAWAY) is not used for
// the next call: it goes on a new connection, not nowhere.
func TestCallAfterIdleConnectionClosed(t *testing.T) {
	c := startClusterWith(t, func(cfg *transport.Config) { cfg.IdleTimeout = 300 * time.Millisecond }, true)
	var s seen
	c.nodes[0].set(claimAnswer(&s, 0, 0))
	cl := newClient(t, c, client.Options{})
	for k := range 2 {
		if _, err := cl.Claim(context.Background(), &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1}); err != nil {
			t.Fatalf("claim %d: %v", k, err)
		}
		time.Sleep(900 * time.Millisecond) // past the idle timeout
	}
}
