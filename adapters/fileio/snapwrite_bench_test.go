package fileio

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// BenchmarkFsyncDuringSnapshotWrite is a checkpoint's effect on the
// node's WAL on one disk: while one goroutine appends a 300-byte record
// and fsyncs it, in a loop, as the WAL does under load, each iteration
// streams a snapshot file of snapMB MiB (WriteStream, as the checkpoint's
// encoder writes it), fsyncs it and removes the one before, as a
// checkpoint does. It reports the WAL fsyncs' p50, p99, longest and how
// many took over 50 ms per checkpoint (the stalls a request waiting on the
// WAL sees), and the snapshot's write time. Cases: the write paced or
// not (Executor.WriteRate), the old file unlinked at once or through the
// trash (trash.go).
//
//	go test ./adapters/fileio -run '^$' -bench FsyncDuringSnapshotWrite -benchtime 4x
func BenchmarkFsyncDuringSnapshotWrite(b *testing.B) {
	for _, c := range []struct {
		name  string
		rate  int64
		trash bool
	}{
		{"unpaced/unlink", 0, false},
		{"unpaced/trash", 0, true},
		{"paced-128MiB/unlink", 128 << 20, false},
		{"paced-128MiB/trash", 128 << 20, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			if !c.trash {
				defer func(m int64) { trashMin = m }(trashMin)
				trashMin = math.MaxInt64
			}
			snapshotWrites(b, c.rate)
		})
	}
}

func snapshotWrites(b *testing.B, rate int64) {
	const snapMB = 240
	e := &Executor{Base: b.TempDir(), WriteRate: rate}
	defer e.Close()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	exec := func(op sm.FileOp) {
		if d := e.Exec(op); d.Err != sm.IOOK {
			b.Errorf("%s %s: %s %s", op.Op, op.Path, d.Err, d.Detail)
		}
	}
	fs := osFS{e.Base, &e.kept, e}
	write := func(name string) {
		err := fs.WriteStream(name, func(w io.Writer) ([]byte, error) {
			for range snapMB {
				if _, err := w.Write(chunk); err != nil {
					return nil, err
				}
			}
			return []byte("head"), nil
		})
		if err == nil {
			err = fs.Sync(name)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	write("snap-0") // the first checkpoint's predecessor
	rec := make([]byte, 300)
	var stop atomic.Bool
	var lat []time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			t := time.Now()
			exec(sm.FileOp{Op: sm.OpAppend, Path: "wal", Data: rec})
			exec(sm.FileOp{Op: sm.OpFsync, Path: "wal"})
			lat = append(lat, time.Since(t))
		}
	})
	time.Sleep(20 * time.Millisecond)
	var snapT time.Duration
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		t0 := time.Now()
		write(fmt.Sprint("snap-", i))
		snapT += time.Since(t0)
		exec(sm.FileOp{Op: sm.OpRemove, Path: fmt.Sprint("snap-", i-1)})
		exec(sm.FileOp{Op: sm.OpFsyncDir, Path: ""})
		time.Sleep(time.Second) // the next checkpoint comes later; a trashed file is deleted meanwhile
	}
	b.StopTimer()
	stop.Store(true)
	wg.Wait()
	slices.Sort(lat)
	over := 0
	for _, l := range lat {
		if l > 50*time.Millisecond {
			over++
		}
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "wal-fsync-p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "wal-fsync-p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "wal-fsync-max-µs")
	b.ReportMetric(float64(over)/float64(b.N), "fsyncs-over-50ms/op")
	b.ReportMetric(snapT.Seconds()/float64(b.N), "snapshot-s")
}
