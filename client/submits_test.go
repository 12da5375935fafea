package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/schemaconnect"
)

func submit(ctx context.Context, cl *client.Client) (*schema.JobResponse, error) {
	return cl.Submit(ctx, &schema.SubmitRequest{Queue: "q", Payload: []byte("x")})
}

// Submits travel on SubmitStream streams and follow the search as calls
// do: a redirect to the primary, then the primary alone; an unknown
// outcome ends the submit, which is never sent again.
func TestSubmitOnStreams(t *testing.T) {
	f := startFake(t, true, true)
	f.c.Nodes[0].Set(notPrimary(1))
	f.c.Nodes[1].Set(okReply)
	cl := newClient(t, f.peers(), f.mat, client.Options{Timeout: 5 * time.Second})
	ctx := context.Background()
	if _, err := submit(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if got := f.sentTo(); got != "n0 n1" {
		t.Errorf("first submit sent to %q, want the redirect followed: n0 n1", got)
	}
	for _, n := range f.c.Nodes {
		n.Set(map[bool]door{true: okReply, false: notPrimary(1)}[n.Name == "n1"])
	}
	for range 3 {
		if _, err := submit(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.sentTo(); got != "n1 n1 n1" {
		t.Errorf("next submits sent to %q, want the primary only", got)
	}
	if calls, streams := f.c.Nodes[1].Posts(schemaconnect.XceSubmitProcedure), f.c.Nodes[1].Posts(schemaconnect.XceSubmitStreamProcedure); calls != 0 || streams != 1 {
		t.Errorf("n1 got %d Submit calls and %d SubmitStream streams for 4 submits, want 0 and 1", calls, streams)
	}
	f.c.Nodes[1].Set(unknownReply)
	if _, err := submit(ctx, cl); !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Errorf("submit answered unknown: %v, want ErrOutcomeUnknown", err)
	}
	if got := f.sentTo(); got != "n1" {
		t.Errorf("the unknown submit went to %q, want n1 once", got)
	}
}

// Concurrent submits of one client each have a stream: none waits for
// another's answer. The door holds every submit until all have arrived,
// which submits queued behind one stream never would.
func TestConcurrentSubmitsDoNotWaitForEachOther(t *testing.T) {
	const n = 8
	f := startFake(t, true)
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	f.c.Nodes[0].Set(func(req *wire.Request) *wire.Reply {
		if req.Job == nil {
			return okReply(req)
		}
		arrived.Done()
		select {
		case <-all:
		case <-time.After(5 * time.Second):
		}
		return okReply(req)
	})
	cl := newClient(t, f.peers(), f.mat, client.Options{Timeout: 10 * time.Second})
	ctx := context.Background()
	start := time.Now()
	var g sync.WaitGroup
	for range n {
		g.Go(func() {
			if _, err := submit(ctx, cl); err != nil {
				t.Error(err)
			}
		})
	}
	g.Wait()
	select {
	case <-all:
	default:
		t.Fatalf("the %d submits never were at the node together", n)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("the submits took %v: they waited for one another", d)
	}
}

// A node of a version without SubmitStream does not announce it
// (StreamsHeader): submits to it go as calls. (A stream it does not
// serve would be answered only once it gave up on the body.)
func TestSubmitWithoutSubmitStreamGoesAsACall(t *testing.T) {
	f := startFakeWithout(t, []string{"SubmitStream"}, true)
	f.c.Nodes[0].Set(okReply)
	cl := newClient(t, f.peers(), f.mat, client.Options{Timeout: 5 * time.Second})
	for range 2 {
		if _, err := submit(context.Background(), cl); err != nil {
			t.Fatalf("submit to a node without SubmitStream: %v", err)
		}
	}
	if got := f.sentTo(); got != "n0 n0" {
		t.Errorf("submits reached the door as %q, want n0 n0", got)
	}
	if calls := f.c.Nodes[0].Posts(schemaconnect.XceSubmitProcedure); calls != 2 {
		t.Errorf("n0 got %d Submit calls, want 2", calls)
	}
}
