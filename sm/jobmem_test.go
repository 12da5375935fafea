package sm

import (
	"runtime"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
)

// BenchmarkApplyHeapPerJob is the live heap, after a GC, per pending
// 200-byte job that 100,000 jobs add to a primary's job state, enqueued as
// the primary does: ENQUEUE_BATCH requests of 100 (each payload a buffer
// of its own, as the transport decodes it), built into a record and
// applied (buildRecord, applyRecord); requests, records and replies are
// dropped, as they are once the reply is sent. B/job is what
// docs/performance.md ("Memory per job") reports.
func BenchmarkApplyHeapPerJob(b *testing.B) {
	const n, batch, size = 100_000, 100, 200
	cfg := &schema.ClusterConfig{Queues: []*schema.Queue{{Id: 1, Name: "jobs", VisibilityTimeoutS: 30, MaxAttempts: 3}}}
	var per float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		q, r := queue.New(), newRouter(cfg)
		for i := 0; i < n; i += batch {
			ps := make([][]byte, batch)
			for k := range ps {
				ps[k] = make([]byte, size)
			}
			rec, err := buildRecord(r, 1_700_000_000, JobRequest{Kind: JobEnqueueBatch, Queue: "jobs", Payloads: ps})
			if err != nil {
				b.Fatal(err)
			}
			rec.Lsn, rec.Term = uint64(i/batch+1), 1
			if rep, err := applyRecord(q, r, rec); err != nil || len(rep.Jobs) != batch {
				b.Fatalf("apply: %v, %d jobs", err, len(rep.Jobs))
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(q)
		per = float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	b.ReportMetric(per, "B/job")
}
