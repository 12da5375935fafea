package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"xce/client"
	"xce/schema"
)

// BenchmarkQueueThroughput is the load generator of DESIGN §6's queue
// row, through the client API (package client): one durable controller
// on loopback, 64 clients (one connection each) submitting jobs
// (SubmitBatch of 50, like River's InsertMany), then 64 workers claiming
// (batches of 16) and acking them (AckBatch). Each iteration inserts and
// works 20,000 jobs, then times 500 single Submits one after another on
// one client (the submit latency: one request, one durable write). The
// metrics are jobs/s and the latency's median and 99th percentile.
//
//	go test ./integration -run '^$' -bench QueueThroughput -benchtime 3x
func BenchmarkQueueThroughput(b *testing.B) {
	const jobs, conns, batch, insertBatch, singles = 20_000, 64, 16, 50, 500
	c := newCluster(b, 1)
	blob := configBlob(b, "bench", 1, 0)
	install(b, c, 0, blob)
	start(b, c, 0)
	mat := admin(b, c)
	ctx := context.Background()
	queue := "q000001-"
	newClient := func() *client.Client {
		cl, err := client.New([]client.Peer{{Name: c.Names[0], Addr: fmt.Sprintf("127.0.0.1:%d", c.Port(0))}}, mat, client.Options{Timeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cl.Close() })
		return cl
	}
	probe := newClient()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := probe.List(ctx, &schema.ListRequest{Queue: queue}); err == nil {
			break
		} else if time.Now().After(deadline) {
			b.Fatalf("the node never served jobs: %v", err)
		}
	}
	// conns connections in all, the probe's included: one certificate
	// may hold at most 64 (transport.DefaultMaxConnsPerClient).
	clients := []*client.Client{probe}
	for len(clients) < conns {
		clients = append(clients, newClient())
	}
	var failed atomic.Bool // a client failed: every loop stops
	fail := func(format string, args ...any) {
		b.Errorf(format, args...)
		failed.Store(true)
	}
	var insertT, workT time.Duration
	var lat []time.Duration
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		t0 := time.Now()
		var wg sync.WaitGroup
		for p := 0; p < conns; p++ {
			wg.Go(func() {
				per := jobs / conns
				for k := 0; k < per; k += insertBatch {
					payloads := make([][]byte, min(insertBatch, per-k))
					for i := range payloads {
						payloads[i] = []byte("job-payload-0123456789")
					}
					if _, err := clients[p].SubmitBatch(ctx, &schema.SubmitBatchRequest{Queue: queue, Payloads: payloads}); err != nil {
						fail("submit batch: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		if failed.Load() {
			b.FailNow()
		}
		insertT += time.Since(t0)
		t1 := time.Now()
		var worked atomic.Int64
		want := int64(jobs / conns * conns)
		for w := 0; w < conns; w++ {
			wg.Go(func() {
				cl := clients[w]
				for worked.Load() < want && !failed.Load() {
					rep, err := cl.Claim(ctx, &schema.ClaimRequest{Queue: queue, Host: "node001", Max: batch})
					if err != nil {
						fail("claim: %v", err)
						return
					}
					if len(rep.GetJobs()) == 0 {
						continue
					}
					hs := make([]*schema.WalHandle, len(rep.GetJobs()))
					for i, j := range rep.GetJobs() {
						hs[i] = &schema.WalHandle{Id: j.GetId(), Attempt: j.GetClaims(), ClaimTerm: j.GetClaimTerm(), ClaimLsn: j.GetClaimLsn()}
					}
					if _, err := cl.AckBatch(ctx, &schema.AckBatchRequest{Handles: hs}); err != nil {
						fail("ack batch: %v", err)
						return
					}
					worked.Add(int64(len(hs)))
				}
			})
		}
		wg.Wait()
		if failed.Load() {
			b.FailNow()
		}
		workT += time.Since(t1)
		for range singles {
			t := time.Now()
			if _, err := probe.Submit(ctx, &schema.SubmitRequest{Queue: queue, Payload: []byte("job-payload-0123456789")}); err != nil {
				b.Fatalf("submit: %v", err)
			}
			lat = append(lat, time.Since(t))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(jobs/conns*conns*b.N)/insertT.Seconds(), "inserts/s")
	b.ReportMetric(float64(jobs/conns*conns*b.N)/workT.Seconds(), "worked/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "submit-p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "submit-p99-µs")
}
