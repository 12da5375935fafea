package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// A long-poll claim on a Work stream that has answered before ends when
// its context does, not when the node answers: net/http's HTTP/2 client
// does not watch the context of a stream whose request body is still
// open, so the worker closes that body first. (The claim was written:
// its outcome is unknown.)
func TestWorkClaimEndsWithItsContext(t *testing.T) {
	const wait = 10 * time.Second
	f := startFake(t, true)
	f.c.Nodes[0].Set(func(req *wire.Request) *wire.Reply {
		if req.Job != nil && req.Job.Wait > 0 {
			time.Sleep(req.Job.Wait) // a long poll that finds nothing
		}
		return &wire.Reply{Job: &sm.Reply{OK: true}}
	})
	cl := newClient(t, f.peers(), f.mat, client.Options{})
	w := cl.Worker()
	defer w.Close()
	// The first claim opens the stream and gets its answer.
	if _, err := w.Claim(context.Background(), &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := w.Claim(ctx, &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1, WaitMs: uint32(wait / time.Millisecond)})
	if el := time.Since(t0); el > wait/2 {
		t.Fatalf("the claim returned %v after it began, its context ended after 200 ms", el)
	}
	if !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("err %v, want an unknown outcome (the claim was written)", err)
	}
}
