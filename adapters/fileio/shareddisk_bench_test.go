package fileio

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// BenchmarkSharedDiskFsync is the floor of a replicated write when the
// nodes share one disk, as the benchmarks' local clusters on this machine
// do: writers goroutines, one per node, each appending a 300-byte record
// to its own file and fsyncing it through the Executor, all at once. In
// quorum mode a write is acknowledged once the primary and one standby
// have fsynced it, while the third node writes the same record, so the
// p50 with 3 writers is the least a 3-node submit can take here, before
// any network or API cost. One op is one append+fsync of every writer.
//
//	go test ./adapters/fileio -run '^$' -bench SharedDiskFsync -benchtime 1000x
func BenchmarkSharedDiskFsync(b *testing.B) {
	for _, writers := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			base := b.TempDir()
			rec := make([]byte, 300)
			lat := make([][]time.Duration, writers)
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range writers {
				path := fmt.Sprintf("w%d.wal", w)
				wg.Go(func() {
					e := &Executor{Base: base} // one per node
					defer e.Close()
					for range b.N {
						t := time.Now()
						for _, op := range []sm.FileOp{{Op: sm.OpAppend, Path: path, Data: rec}, {Op: sm.OpFsync, Path: path}} {
							if d := e.Exec(op); d.Err != sm.IOOK {
								b.Errorf("%s %s: %s %s", op.Op, path, d.Err, d.Detail)
								return
							}
						}
						lat[w] = append(lat[w], time.Since(t))
					}
				})
			}
			wg.Wait()
			all := slices.Concat(lat...)
			if len(all) == 0 {
				return
			}
			slices.Sort(all)
			b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(all[len(all)*9/10].Microseconds()), "p90-µs")
		})
	}
}
