package integration

// Long-poll claims through the API on three real processes: a claim
// waiting on an empty queue gets the job submitted a moment later, through
// a standby (forwarded, the wait included), and a claim whose client gave
// up leaves no claim behind (sm.ClientGone through the request context).

import (
	"context"
	"testing"
	"time"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/schema"
)

func TestLongPollClaimOverTheAPI(t *testing.T) {
	c, _, p := exampleCluster(t)
	s := (p + 1) % 3
	mat := admin(t, c)
	// The standby alone: its answers are forwarded from the primary.
	viaStandby, err := client.NewFromFlag(peersOf(c, s), mat, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer viaStandby.Close()
	cl, err := client.NewFromFlag(c.PeersFlag(), mat, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	waitListing(t, cl, "batch")

	// A claim that waits longer than the client's own timeout (5 s) gets
	// the job submitted 6 s later.
	got := make(chan *schema.JobResponse, 1)
	errs := make(chan error, 1)
	go func() {
		r, err := viaStandby.Claim(ctx, &schema.ClaimRequest{Queue: "batch", Host: "node001", Max: 1, WaitMs: 15000})
		if err != nil {
			errs <- err
			return
		}
		got <- r
	}()
	time.Sleep(6 * time.Second)
	sub, err := cl.Submit(ctx, &schema.SubmitRequest{Queue: "batch", Payload: []byte("long-polled")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if len(r.GetJobs()) != 1 || r.GetJobs()[0].GetId() != sub.GetJobs()[0].GetId() {
			t.Fatalf("long-poll claim got %v, want job %d", r.GetJobs(), sub.GetJobs()[0].GetId())
		}
	case err := <-errs:
		t.Fatalf("long-poll claim: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting claim was not answered after the submit")
	}

	// A client that gives up takes its waiting claim with it.
	gctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = cl.Claim(gctx, &schema.ClaimRequest{Queue: "batch", Host: "node001", Max: 1, WaitMs: 20000})
	cancel()
	if err == nil {
		t.Fatal("a claim on an empty queue answered within a second")
	}
	time.Sleep(500 * time.Millisecond) // the node learns the client is gone
	sub, err = cl.Submit(ctx, &schema.SubmitRequest{Queue: "batch", Payload: []byte("for the next worker")})
	if err != nil {
		t.Fatal(err)
	}
	r, err := cl.Claim(ctx, &schema.ClaimRequest{Queue: "batch", Host: "node001", Max: 1, WaitMs: 3000})
	if err != nil || len(r.GetJobs()) != 1 || r.GetJobs()[0].GetId() != sub.GetJobs()[0].GetId() {
		t.Fatalf("the next claim got %v, %v; want job %d, which the gone client's claim must not have taken", r.GetJobs(), err, sub.GetJobs()[0].GetId())
	}
}

// exampleCluster starts three nodes with examples/cluster.yaml (installed
// on n0) and waits for them to converge: the rows and the primary.
func exampleCluster(t *testing.T) (*clitool.Cluster, []clitool.PeerStatus, int) {
	t.Helper()
	c := newCluster(t, 3)
	blob, err := configtool.EncodeFile("../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	install(t, c, 0, blob)
	start(t, c, 0, 1, 2)
	rows, p := converge(t, c, -1, 20*time.Second)
	return c, rows, p
}

// waitListing waits until the primary answers a list of queue (it may be
// recovering right after its election).
func waitListing(t *testing.T, cl *client.Client, queue string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err = cl.List(context.Background(), &schema.ListRequest{Queue: queue}); err == nil {
			return
		}
	}
	t.Fatalf("no primary serving %s: %v", queue, err)
}
