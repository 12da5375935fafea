package integration

// A worker's Work stream (client.Worker) on three real processes: claims
// carrying acks on one stream, then a kill -9 of the primary: the
// worker's stream reopens on the new primary, and no job whose ack was
// confirmed comes back.

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
)

func TestWorkStreamFailover(t *testing.T) {
	c, _, p := exampleCluster(t)
	cl, err := client.NewFromFlag(c.PeersFlag(), admin(t, c), client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	waitListing(t, cl, "batch")
	payloads := make([][]byte, 60)
	for i := range payloads {
		payloads[i] = []byte("work-stream")
	}
	sub, err := cl.SubmitBatch(ctx, &schema.SubmitBatchRequest{Queue: "batch", Payloads: payloads})
	if err != nil {
		t.Fatal(err)
	}
	w := cl.Worker()
	defer w.Close()
	acked := map[uint64]bool{}   // ack confirmed (ok)
	unknown := map[uint64]bool{} // carried on a claim whose outcome is unknown
	var done []*schema.WalHandle // claimed, acked on the next claim
	claim := func() error {
		rep, err := w.Claim(ctx, &schema.ClaimRequest{Queue: "batch", Host: "node001", Max: 5, Ack: done})
		if err != nil {
			if errors.Is(err, client.ErrOutcomeUnknown) {
				for _, h := range done {
					unknown[h.GetId()] = true
				}
				done = nil
			}
			return err
		}
		if len(rep.GetOks()) != len(done) {
			t.Fatalf("%d ack results for %d acks", len(rep.GetOks()), len(done))
		}
		for i, ok := range rep.GetOks() {
			if !ok {
				t.Fatalf("ack of job %d refused", done[i].GetId())
			}
			acked[done[i].GetId()] = true
		}
		done = handlesOf(rep.GetJobs())
		return nil
	}
	for k := range 4 {
		if err := claim(); err != nil {
			t.Fatalf("claim %d before the failover: %v", k, err)
		}
	}
	if len(acked) != 15 || len(done) != 5 {
		t.Fatalf("before the failover: %d acked, %d held; want 15 and 5", len(acked), len(done))
	}
	if code := stop(t, c, p, syscall.SIGKILL); code != -1 {
		t.Fatalf("%s exit code %d after SIGKILL, want -1", c.Names[p], code)
	}
	var last error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if last = claim(); last == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no claim on a new primary within 20 s: %v", last)
		}
	}
	np, ok := cl.Primary()
	if !ok || np == p {
		t.Fatalf("the worker's claims went to %d (known %v) after the kill of %s", np, ok, c.Names[p])
	}
	for k := range 4 {
		if err := claim(); err != nil {
			t.Fatalf("claim %d after the failover: %v", k, err)
		}
	}
	if n := len(acked); n < 30 {
		t.Fatalf("%d jobs acked in all, want at least 30", n)
	}
	// Every confirmed ack holds on the new primary (the job is gone);
	// every other job is still there.
	if len(sub.GetIds()) != len(payloads) {
		t.Fatalf("the batch submit named %d jobs for %d payloads", len(sub.GetIds()), len(payloads))
	}
	for _, id := range sub.GetIds() {
		_, err := cl.Get(ctx, &schema.GetRequest{Id: id})
		switch {
		case unknown[id]:
		case acked[id] && connect.CodeOf(err) != connect.CodeNotFound:
			t.Errorf("job %d, acked before or after the failover, on the new primary: %v", id, err)
		case !acked[id] && err != nil:
			t.Errorf("job %d, never acked: %v", id, err)
		}
	}
	t.Logf("%d acked, %d of unknown outcome (carried on a claim the kill cut), new primary %s", len(acked), len(unknown), c.Names[np])
}
