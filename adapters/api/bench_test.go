package api_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// BenchmarkClaimAck is the node side of the integration benchmark's work
// phase without the node: the real transport (TLS, ALPN split, limits)
// and handler in front of a door that answers at once, 64 clients (one
// connection each) each doing Claim (16 jobs back) carrying the acks of
// the 16 before. One op is one such call, i.e. 16 jobs claimed and 16
// acked; profile it with -cpuprofile to see what the API costs per call.
// Sub-benchmark unary makes each claim a Claim call, stream a message on
// the client's Work stream (client.Worker).
//
//	go test ./adapters/api -run '^$' -bench ClaimAck -cpuprofile cpu.out
func BenchmarkClaimAck(b *testing.B) {
	b.Run("unary", func(b *testing.B) { claimAck(b, false) })
	b.Run("stream", func(b *testing.B) { claimAck(b, true) })
}

func claimAck(b *testing.B, stream bool) {
	const conns, batch = 64, 16
	c := startCluster(b, true)
	jobs := make([]queue.Job, batch)
	for i := range jobs {
		jobs[i] = queue.Job{ID: uint64(i + 1), Queue: "q000001-", Payload: []byte("job-payload-0123456789"),
			State: queue.Processing, Attempts: 1, Host: "node001", ClaimedAt: 1e18, ClaimExpiresAt: 1e18}
	}
	oks := make([]bool, batch)
	c.nodes[0].set(func(req *wire.Request) *wire.Reply {
		if req.Job == nil { // a status call (a new connection's confirmation)
			return &wire.Reply{Job: &sm.Reply{OK: true}}
		}
		return &wire.Reply{Job: &sm.Reply{OK: true, Jobs: jobs, OKs: oks[:len(req.Job.Handles)]}}
	})
	ctx := context.Background()
	clients := make([]*client.Client, conns)
	for i := range clients {
		cl, err := client.New(c.peers[:1], c.mats["admin"], client.Options{ConnectTimeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cl.Close() })
		// The first call also waits for the listener to come up.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			_, err := cl.Claim(ctx, &schema.ClaimRequest{Queue: "q000001-", Host: "node001", Max: batch})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal(err)
			}
		}
		clients[i] = cl
	}
	work := make(chan struct{})
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for _, cl := range clients {
		wg.Go(func() {
			claim := cl.Claim
			if stream {
				w := cl.Worker()
				defer w.Close()
				claim = w.Claim
			}
			var done []*schema.WalHandle // acked on the next claim
			for range work {
				rep, err := claim(ctx, &schema.ClaimRequest{Queue: "q000001-", Host: "node001", Max: batch, Ack: done})
				if err != nil {
					b.Error(err)
					return
				}
				done = done[:0]
				for _, j := range rep.GetJobs() {
					done = append(done, &schema.WalHandle{Id: j.GetId(), Attempt: j.GetClaims(), ClaimTerm: j.GetClaimTerm(), ClaimLsn: j.GetClaimLsn()})
				}
			}
		})
	}
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
}
