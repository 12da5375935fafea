package daemon_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
)

// BenchmarkDaemonClaimAck is the work phase of
// integration.BenchmarkQueueThroughput with the node in this process, so
// that -cpuprofile sees the node's side: one durable seed-mode node
// (daemon.Run: transport, API, door, runner, WAL), 64 clients (one
// connection each) claiming batches of 16, each claim carrying the acks
// of the batch before (a last AckBatch if the loop stops early). One op is one
// job worked; the jobs are submitted before the timer starts. cpu-µs/job
// is this process's CPU time (node and clients) per job worked, steadier
// than the rate on a shared machine. Sub-benchmark unary makes each claim
// a Claim call, stream a message on the client's Work stream
// (client.Worker), as the integration benchmark's two.
//
//	go test ./cmd/xcecontroller/daemon -run '^$' -bench DaemonClaimAck -benchtime 20000x -cpuprofile cpu.out
func BenchmarkDaemonClaimAck(b *testing.B) {
	b.Run("unary", func(b *testing.B) { daemonClaimAck(b, false) })
	b.Run("stream", func(b *testing.B) { daemonClaimAck(b, true) })
}

func daemonClaimAck(b *testing.B, stream bool) {
	const conns, batch, insertBatch = 64, 16, 50
	peer, mat := startOneNode(b, "q000001-")
	peers := []client.Peer{peer}
	ctx := context.Background()
	clients := make([]*client.Client, conns)
	for i := range clients {
		// A loaded machine may take longer than the default for 64 TLS
		// handshakes; each connection is made before the load starts.
		cl, err := client.New(peers, mat, client.Options{ConnectTimeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cl.Close() })
		clients[i] = cl
	}
	queue := "q000001-"
	for _, cl := range clients {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := cl.List(ctx, &schema.ListRequest{Queue: queue}); err == nil {
				break
			} else if time.Now().After(deadline) {
				b.Fatalf("the node never served jobs: %v", err)
			}
		}
	}
	want := int64(b.N)
	var wg sync.WaitGroup
	var next atomic.Int64
	for _, cl := range clients {
		wg.Go(func() {
			for {
				k := next.Add(insertBatch) - insertBatch
				if k >= want {
					return
				}
				payloads := make([][]byte, min(insertBatch, want-k))
				for i := range payloads {
					payloads[i] = []byte("job-payload-0123456789")
				}
				if _, err := cl.SubmitBatch(ctx, &schema.SubmitBatchRequest{Queue: queue, Payloads: payloads}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	cpu0 := cpuTime(b)
	t0 := time.Now()
	b.ResetTimer()
	var worked atomic.Int64
	var failed atomic.Bool
	for _, cl := range clients {
		wg.Go(func() {
			claim := cl.Claim
			if stream {
				w := cl.Worker()
				defer w.Close()
				claim = w.Claim
			}
			var done []*schema.WalHandle // worked, acked on the next claim
			for worked.Load() < want && !failed.Load() {
				rep, err := claim(ctx, &schema.ClaimRequest{Queue: queue, Host: "node001", Max: batch, Ack: done})
				if err == nil && len(rep.GetOks()) != len(done) {
					err = fmt.Errorf("%d ack results for %d acks", len(rep.GetOks()), len(done))
				}
				if err != nil {
					b.Error(err)
					failed.Store(true)
					return
				}
				worked.Add(int64(len(done)))
				done = done[:0]
				for _, j := range rep.GetJobs() {
					done = append(done, &schema.WalHandle{Id: j.GetId(), Attempt: j.GetClaims(), ClaimTerm: j.GetClaimTerm(), ClaimLsn: j.GetClaimLsn()})
				}
			}
			if len(done) > 0 { // the last batch, when the loop stops early
				if _, err := cl.AckBatch(ctx, &schema.AckBatchRequest{Handles: done}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(worked.Load())/time.Since(t0).Seconds(), "worked/s")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(worked.Load()), "cpu-µs/job")
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
