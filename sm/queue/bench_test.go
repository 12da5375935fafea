package queue

import (
	"fmt"
	"testing"
)

var benchStamps = Stamps{VisibilityTimeoutS: 30, MaxAttempts: 5, BackoffBaseS: 1, DeadLetterRetentionS: 3600}

// fill enqueues n jobs with mixed priorities (a fixed LCG, no math/rand).
func fill(q *Queues, now int64, n int, x *uint64) {
	payload := []byte("0123456789abcdef0123456789abcdef")
	for range n {
		*x = *x*6364136223846793005 + 1442695040888963407
		if _, err := q.Enqueue(now, "q", payload, benchStamps, EnqueueOpts{Priority: int32(*x >> 61)}); err != nil {
			panic(err)
		}
	}
}

// BenchmarkClaimAck: N jobs queued, then claim 1 + ack per op (the queue
// is refilled, off the clock, when it runs dry).
func BenchmarkClaimAck(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			q, now, x := New(), int64(1_700_000_000), uint64(1)
			fill(q, now, n, &x)
			b.ReportAllocs()
			b.ResetTimer()
			left := n
			for b.Loop() {
				if left == 0 {
					b.StopTimer()
					fill(q, now, n, &x)
					left = n
					b.StartTimer()
				}
				got := q.ClaimBatch(now, "q", "h1", 1, stampAt(now))
				if len(got) != 1 || !q.Ack(now, got[0].Handle()) {
					b.Fatal("claim/ack failed")
				}
				left--
			}
		})
	}
}

// BenchmarkClaimBatchAck: claim 16 + ack them per op; ns/op / 16 is the
// cost per job.
func BenchmarkClaimBatchAck(b *testing.B) {
	const n, batch = 100_000, 16
	q, now, x := New(), int64(1_700_000_000), uint64(1)
	fill(q, now, n, &x)
	b.ReportAllocs()
	b.ResetTimer()
	left := n
	hs := make([]Handle, 0, batch)
	for b.Loop() {
		if left < batch {
			b.StopTimer()
			fill(q, now, n, &x)
			left += n
			b.StartTimer()
		}
		hs = hs[:0]
		for _, j := range q.ClaimBatch(now, "q", "h1", batch, stampAt(now)) {
			hs = append(hs, j.Handle())
		}
		for _, ok := range q.AckBatch(now, hs) {
			if !ok {
				b.Fatal("ack failed")
			}
		}
		left -= batch
	}
}

// BenchmarkEnqueue: one enqueue per op into a queue that grows.
func BenchmarkEnqueue(b *testing.B) {
	q, now := New(), int64(1_700_000_000)
	payload := []byte("0123456789abcdef0123456789abcdef")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := q.Enqueue(now, "q", payload, benchStamps, EnqueueOpts{Priority: int32(i & 3)}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkCheckpointStall is what a checkpoint costs the node's Step at
// 100,000 queued jobs: Export (a full copy, sorted; what the checkpoint
// did first) against View (a frozen copy of the job table's page map; the
// copy of the jobs and the encoding run on the executor's checkpoint
// lane), in the same run.
func BenchmarkCheckpointStall(b *testing.B) {
	q, now, x := New(), int64(1_700_000_000), uint64(1)
	fill(q, now, 100_000, &x)
	b.Run("Export", func(b *testing.B) {
		for b.Loop() {
			_ = q.Export()
		}
	})
	b.Run("View", func(b *testing.B) {
		for b.Loop() {
			_ = q.View()
		}
	})
}
