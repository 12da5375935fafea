package integration

// Idempotent submits on three real processes: a key's repeat answers the
// first job through a standby, after the primary is killed with -9 (the
// client repeats the submit itself through the failover), and after every
// node is killed and restarted; another payload under the key is refused.

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
)

func TestIdempotentSubmitAcrossFailoverAndRestart(t *testing.T) {
	c, _, p := exampleCluster(t)
	mat := admin(t, c)
	newClient := func(peers string) *client.Client {
		t.Helper()
		cl, err := client.NewFromFlag(peers, mat, client.Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	cl := newClient(c.PeersFlag())
	waitListing(t, cl, "batch")
	ctx := context.Background()
	sub := &schema.SubmitRequest{Queue: "batch", Payload: []byte("render frame 7"), IdempotencyKey: "order-7"}
	batch := &schema.SubmitBatchRequest{Queue: "batch", Payloads: [][]byte{[]byte("b1"), []byte("b2")}, IdempotencyKeys: []string{"bk-1", "bk-2"}}

	first, err := cl.Submit(ctx, sub)
	if err != nil || len(first.GetIds()) != 1 || len(first.GetDeduplicated()) != 0 {
		t.Fatalf("first submit: %v, %v", first, err)
	}
	id := first.GetIds()[0]
	firstBatch, err := cl.SubmitBatch(ctx, batch)
	if err != nil || len(firstBatch.GetIds()) != 2 {
		t.Fatalf("first batch: %v, %v", firstBatch, err)
	}
	same := func(where string, cl *client.Client) {
		t.Helper()
		rep, err := cl.Submit(ctx, sub)
		if err != nil || !slices.Equal(rep.GetIds(), []uint64{id}) || !slices.Equal(rep.GetDeduplicated(), []bool{true}) {
			t.Fatalf("%s: repeat answered %v, %v; want job %d, deduplicated", where, rep, err, id)
		}
		rep, err = cl.SubmitBatch(ctx, batch)
		if err != nil || !slices.Equal(rep.GetIds(), firstBatch.GetIds()) || !slices.Equal(rep.GetDeduplicated(), []bool{true, true}) {
			t.Fatalf("%s: batch repeat answered %v, %v; want jobs %v, deduplicated", where, rep, err, firstBatch.GetIds())
		}
		got, err := cl.Get(ctx, &schema.GetRequest{Id: id})
		if err != nil || len(got.GetJobs()) != 1 || string(got.GetJobs()[0].GetPayload()) != "render frame 7" {
			t.Fatalf("%s: job %d reads %v, %v", where, id, got, err)
		}
		list, err := cl.List(ctx, &schema.ListRequest{Queue: "batch"})
		if err != nil || len(list.GetJobs()) != 3 {
			t.Fatalf("%s: queue batch holds %d jobs (%v), want 3: a repeat enqueued a job", where, len(list.GetJobs()), err)
		}
	}

	s := (p + 1) % 3
	same("through the standby "+c.Names[s], newClient(peersOf(c, s, p)))

	other := &schema.SubmitRequest{Queue: "batch", Payload: []byte("another payload"), IdempotencyKey: "order-7"}
	if _, err := cl.Submit(ctx, other); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("the key with another payload: %v, want already_exists", err)
	}

	// The primary killed: the client repeats the keyed submit through the
	// election until a new primary answers it.
	stop(t, c, p, syscall.SIGKILL)
	same("after the primary was killed", cl)
	start(t, c, p)

	// Every node killed and started again.
	for i := range c.Names {
		stop(t, c, i, syscall.SIGKILL)
	}
	start(t, c, 0, 1, 2)
	converge(t, c, -1, 30*time.Second)
	cl2 := newClient(c.PeersFlag())
	waitListing(t, cl2, "batch")
	same("after every node restarted", cl2)

	if _, err := cl2.Submit(ctx, &schema.SubmitRequest{Queue: "batch", IdempotencyKey: string(make([]byte, 129))}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a 129-byte key: %v, want invalid_argument", err)
	}
	var ne *client.NodeError
	if _, err := cl2.SubmitBatch(ctx, &schema.SubmitBatchRequest{Queue: "batch", Payloads: [][]byte{[]byte("x"), []byte("y")}, IdempotencyKeys: []string{"z", "z"}}); !errors.As(err, &ne) || connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a batch repeating a key: %v, want invalid_argument", err)
	}
}
