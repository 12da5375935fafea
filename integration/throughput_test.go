package integration

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"xce/adapters/transport"
	"xce/schema"
	"xce/sm"
)

// BenchmarkQueueThroughput is the load generator of DESIGN §6's queue
// row: one durable controller on loopback, 64 producers submitting jobs
// over TLS (ENQUEUE_BATCH of 50, like River's InsertMany), then 64 workers
// claiming (batches of 16) and acking them. Each iteration inserts and
// works 20,000 jobs; the metrics are jobs/s.
//
//	go test ./integration -run '^$' -bench QueueThroughput -benchtime 3x
func BenchmarkQueueThroughput(b *testing.B) {
	const jobs, conns, batch, insertBatch = 20_000, 64, 16, 50
	c := newCluster(b, 1)
	blob := configBlob(b, "bench", 1, 0)
	install(b, c, 0, blob)
	start(b, c, 0)
	mat := admin(b, c)
	ctx := context.Background()
	dial := func() *transport.Client {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			cl, err := transport.DialClient(ctx, fmt.Sprintf("127.0.0.1:%d", c.Port(0)), mat, 5*time.Second)
			if err == nil {
				return cl
			}
			if time.Now().After(deadline) {
				b.Fatal(err)
			}
		}
	}
	queue := "q000001-"
	call := func(cl *transport.Client, j *schema.JobRequest) *schema.JobReply {
		rep, err := cl.Call(ctx, &schema.ClientRequest{Op: &schema.ClientRequest_Job{Job: j}})
		if err != nil {
			b.Fatal(err)
		}
		if rep.GetStatus() != sm.StatusOK {
			return nil
		}
		return rep.GetJobReply()
	}
	probe := dial()
	for deadline := time.Now().Add(30 * time.Second); call(probe, &schema.JobRequest{Kind: schema.JobRequest_LIST, Queue: queue}) == nil; {
		if time.Now().After(deadline) {
			b.Fatal("the node never served jobs")
		}
		time.Sleep(50 * time.Millisecond)
	}
	clients := make([]*transport.Client, conns)
	for i := range clients {
		clients[i] = dial()
	}
	var insertT, workT time.Duration
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		t0 := time.Now()
		var wg sync.WaitGroup
		for p := 0; p < conns; p++ {
			wg.Add(1)
			go func(cl *transport.Client) {
				defer wg.Done()
				per := jobs / conns
				for k := 0; k < per; k += insertBatch {
					payloads := make([][]byte, min(insertBatch, per-k))
					for i := range payloads {
						payloads[i] = []byte("job-payload-0123456789")
					}
					if call(cl, &schema.JobRequest{Kind: schema.JobRequest_ENQUEUE_BATCH, Queue: queue, Payloads: payloads}) == nil {
						b.Error("enqueue batch refused")
						return
					}
				}
			}(clients[p])
		}
		wg.Wait()
		insertT += time.Since(t0)
		t1 := time.Now()
		var worked atomic.Int64
		want := int64(jobs / conns * conns)
		for w := 0; w < conns; w++ {
			wg.Add(1)
			go func(cl *transport.Client, host string) {
				defer wg.Done()
				for worked.Load() < want {
					rep := call(cl, &schema.JobRequest{Kind: schema.JobRequest_CLAIM, Queue: queue, Host: host, Max: batch})
					if rep == nil || len(rep.GetJobs()) == 0 {
						continue
					}
					hs := make([]*schema.WalHandle, len(rep.GetJobs()))
					for i, j := range rep.GetJobs() {
						hs[i] = &schema.WalHandle{Id: j.GetId(), Attempt: j.GetClaims(), ClaimTerm: j.GetClaimTerm(), ClaimLsn: j.GetClaimLsn()}
					}
					ack := call(cl, &schema.JobRequest{Kind: schema.JobRequest_ACK_BATCH, Handles: hs})
					if ack == nil {
						b.Error("ack batch refused")
						return
					}
					worked.Add(int64(len(hs)))
				}
			}(clients[w], "node001")
		}
		wg.Wait()
		workT += time.Since(t1)
	}
	b.ReportMetric(float64(jobs/conns*conns*b.N)/insertT.Seconds(), "inserts/s")
	b.ReportMetric(float64(jobs/conns*conns*b.N)/workT.Seconds(), "worked/s")
}
