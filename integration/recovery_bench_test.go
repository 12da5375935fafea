package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// Recovery of a million queued jobs by a real process (issue 9 target:
// exec to serving <= 2 s on one node). One node whose data/ holds a
// snapshot of 1,000,000 pending 200-byte jobs, written as a checkpoint
// leaves it (fsync'd, its directory too: else the boot scan's fsync of it
// is the write-back of the test's 270 MB); from exec to its log's "job
// state recovered", split at "Promoted to primary" into the boot (boot
// scan, election) and recovery proper. XCE_BENCH_LOG=1 prints each run's
// log.
//
//	go test ./integration -run '^$' -bench RecoveryExec -benchtime 3x
func BenchmarkRecoveryExec(b *testing.B) {
	const jobs = 1_000_000
	blob := configBlob(b, "bench", 1, 8)
	snap := millionJobs(b, jobs)
	var total, boot, recovery []time.Duration
	for r := 0; r < b.N; r++ {
		c := newCluster(b, 1)
		install(b, c, 0, blob)
		path := filepath.Join(c.NodeDir(0), wal.SnapshotPath(jobs))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			b.Fatal(err)
		}
		writeSynced(b, path, snap)
		t0 := time.Now()
		start(b, c, 0)
		line := waitLog(b, c, 0, 0, "job state recovered", 60*time.Second)
		text := logSince(c, 0, 0)
		if want := fmt.Sprintf("next lsn %d", jobs+1); findLine(line, want) == "" {
			b.Fatalf("recovered %q, want %s", line, want)
		}
		if os.Getenv("XCE_BENCH_LOG") != "" {
			b.Log(text)
		}
		done, promoted := logTime(b, text, "job state recovered"), logTime(b, text, "Promoted to primary")
		total = append(total, done.Sub(t0))
		boot = append(boot, promoted.Sub(t0))
		recovery = append(recovery, done.Sub(promoted))
		c.Stop()
	}
	report(b, "recovery of 1M queued jobs: exec to job state recovered", total, "<= 2 s")
	report(b, "recovery of 1M queued jobs: exec to promoted (boot scan, election)", boot, "-")
	report(b, "recovery of 1M queued jobs: promoted to job state recovered", recovery, "-")
}

// millionJobs is a snapshot file at lsn jobs (term 1) of jobs pending
// 200-byte jobs in configBlob's first queue.
func millionJobs(b *testing.B, jobs int) []byte {
	q := queue.New()
	payload := make([]byte, 200)
	for i := 0; i < jobs; i++ {
		payload[0], payload[1], payload[2] = byte(i), byte(i>>8), byte(i>>16)
		if _, err := q.Enqueue(1_700_000_000, "q000001-xxxxxxxx", payload, queue.Stamps{VisibilityTimeoutS: 300, MaxAttempts: 3, BackoffBaseS: 10, DeadLetterRetentionS: 604800}, queue.EnqueueOpts{}); err != nil {
			b.Fatal(err)
		}
	}
	data, err := wal.EncodeSnapshot(sm.SnapshotOf(q, uint64(jobs), 1))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// writeSynced writes data to path and fsyncs the file and its directory.
func writeSynced(b *testing.B, path string, data []byte) {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	for _, p := range []string{path, filepath.Dir(path)} {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
