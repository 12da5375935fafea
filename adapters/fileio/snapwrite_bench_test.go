package fileio

import (
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"xce/sm"
)

// BenchmarkFsyncDuringSnapshotWrite is a checkpoint's effect on the
// node's WAL on one disk: one goroutine streams a snapshot file of
// snapMB MiB (WriteStream, as the checkpoint's encoder writes it, then
// its fsync) while another appends a 300-byte record and fsyncs it, in a
// loop, as the WAL does under load. It reports the WAL fsyncs' p50, p99
// and longest during the snapshot's write and fsync (the stall a
// request waiting on the WAL sees) and the snapshot's time.
//
//	go test ./adapters/fileio -run '^$' -bench FsyncDuringSnapshotWrite -benchtime 3x
func BenchmarkFsyncDuringSnapshotWrite(b *testing.B) {
	const snapMB = 240
	base := b.TempDir()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	rec := make([]byte, 300)
	var lat []time.Duration
	var snapT time.Duration
	for range b.N {
		e := &Executor{Base: base}
		var stop atomic.Bool
		var wg sync.WaitGroup
		var mine []time.Duration
		wg.Go(func() {
			for !stop.Load() {
				t := time.Now()
				for _, op := range []sm.FileOp{{Op: sm.OpAppend, Path: "wal", Data: rec}, {Op: sm.OpFsync, Path: "wal"}} {
					if d := e.Exec(op); d.Err != sm.IOOK {
						b.Errorf("%s: %s %s", op.Op, d.Err, d.Detail)
						return
					}
				}
				mine = append(mine, time.Since(t))
			}
		})
		time.Sleep(20 * time.Millisecond)
		t0 := time.Now()
		fs := osFS{base, &kept{}}
		err := fs.WriteStream("snap", func(w io.Writer) ([]byte, error) {
			for range snapMB {
				if _, err := w.Write(chunk); err != nil {
					return nil, err
				}
			}
			return []byte("head"), nil
		})
		if err == nil {
			err = fs.Sync("snap")
		}
		snapT += time.Since(t0)
		stop.Store(true)
		wg.Wait()
		e.Close()
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, mine...)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "wal-fsync-p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "wal-fsync-p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "wal-fsync-max-µs")
	b.ReportMetric(snapT.Seconds()/float64(b.N), "snapshot-s")
}
