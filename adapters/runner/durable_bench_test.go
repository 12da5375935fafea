package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/fileio"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// BenchmarkDurableEnqueue measures durable client operations per second
// through the real runner on this machine's disk: every reply waits for
// the fsync of the WAL batch holding its record (group commit). Compare
// with BenchmarkRawAppendFsync in the same run (DESIGN §6).
func BenchmarkDurableEnqueue(b *testing.B) {
	for _, clients := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			base := b.TempDir()
			provision(b, base, sampleConfig(b))
			o := sm.DefaultOptions(0, []string{"n0"})
			o.MaxWALRecords = 1_000_000 // measure appends, not checkpoints
			r := New(Config{Node: newNode(b, o), Files: &fileio.Executor{Base: base}})
			ctx, cancel := context.WithCancel(context.Background())
			errc := start(ctx, r)
			defer func() { cancel(); <-errc }()
			req := sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("payload-0123456789")}
			deadline := time.Now().Add(10 * time.Second)
			for { // wait for recovery to finish
				rep, err := r.Do(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if rep.Status == sm.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("never ready: %+v", rep)
				}
				time.Sleep(10 * time.Millisecond)
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			per := (b.N + clients - 1) / clients
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						if rep, err := r.Do(ctx, req); err != nil || rep.Status != sm.StatusOK {
							b.Errorf("enqueue: %+v %v", rep, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(per*clients)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkRawAppendFsync is the disk's limit for the same records: append
// a batch of frames and fsync, in a loop (no state machine, no runner).
func BenchmarkRawAppendFsync(b *testing.B) {
	for _, batch := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			f, err := os.OpenFile(filepath.Join(b.TempDir(), "seg.wal"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var data []byte
			st := &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 5}
			for i := 0; i < batch; i++ {
				data, err = wal.AppendFrame(data, &schema.WalRecord{Lsn: uint64(i + 1), Now: 1000,
					Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "q0", QueueId: 1, Payload: []byte("payload-0123456789"), Stamps: st}}})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := f.Write(data); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
