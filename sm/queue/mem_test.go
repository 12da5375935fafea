package queue

import (
	"runtime"
	"testing"
)

// heapPerJob is the live heap, after a GC, that n pending jobs of
// payload bytes add to a state, enqueued the way the primary applies an
// ENQUEUE_BATCH record: batches of 100 jobs sharing one queue name and
// options, each payload in a buffer of its own that the caller drops (the
// decoded request), every reply (the returned Job) dropped too.
func heapPerJob(tb testing.TB, n, payload int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	q, now := New(), int64(1_700_000_000)
	for i := 0; i < n; i += 100 {
		name := string([]byte("jobs")) // a queue name decoded per record
		for range min(100, n-i) {
			p := make([]byte, payload)
			if _, err := q.Enqueue(now, name, p, benchStamps, EnqueueOpts{Priority: int32(i & 3)}); err != nil {
				tb.Fatalf("enqueue %d: %v", i, err)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(q)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// BenchmarkHeapPerJob reports the live heap per queued 200-byte job
// (B/job) at 100,000 jobs: the payload's 200 bytes plus what the state
// spends to hold it (docs/performance.md, "Memory per job").
func BenchmarkHeapPerJob(b *testing.B) {
	var per float64
	for b.Loop() {
		per = heapPerJob(b, 100_000, 200)
	}
	b.ReportMetric(per, "B/job")
}
