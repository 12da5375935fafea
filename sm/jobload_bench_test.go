package sm

import (
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// BenchmarkSnapshotImport is the executor's part of a recovery from a
// snapshot of 1,000,000 pending 200-byte jobs (SnapshotLoad.Import: CRC,
// decode, checks, the state built), without the node or any file.
func BenchmarkSnapshotImport(b *testing.B) {
	const jobs = 1_000_000
	cfg := &schema.ClusterConfig{Queues: []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 300, MaxAttempts: 3}}}
	q := queue.New()
	payload := make([]byte, 200)
	for i := 0; i < jobs; i++ {
		payload[0], payload[1], payload[2] = byte(i), byte(i>>8), byte(i>>16)
		if _, err := q.Enqueue(1000, "q0", payload, queue.Stamps{VisibilityTimeoutS: 300, MaxAttempts: 3}, queue.EnqueueOpts{}); err != nil {
			b.Fatal(err)
		}
	}
	data, err := wal.EncodeSnapshot(SnapshotOf(q, jobs, 1))
	if err != nil {
		b.Fatal(err)
	}
	q = nil
	l := newSnapshotLoad(newRouter(cfg), nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ld := l.Import(data)
		if ld.err != nil {
			b.Fatalf("import: %v", ld.err)
		}
		if p, _, _ := ld.q.Counts("q0"); p != jobs {
			b.Fatalf("imported %d pending jobs, want %d", p, jobs)
		}
	}
	b.ReportMetric(float64(jobs)*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
