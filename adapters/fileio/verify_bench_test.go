package fileio

import (
	"fmt"
	"runtime/debug"
	"syscall"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// BenchmarkVerifyReceived is a standby's check of a snapshot it received,
// the file in the page cache as it is after the transfer: read back a
// window at a time through the check (ComputeVerify on this executor, as
// the install does), against the way it was done before, the file read
// whole into a fresh buffer (OpRead) and the buffer checked. Before each
// check the heap's free memory goes back to the system, as a standby's
// has when a transfer ends (its heap does not hold hundreds of MB spare),
// so that the check's memory is fresh pages; it reports their minor page
// faults besides time and allocation: on a virtual machine each fresh
// page costs microseconds.
//
//	go test ./adapters/fileio -run '^$' -bench VerifyReceived -benchtime 5x
func BenchmarkVerifyReceived(b *testing.B) {
	const jobs = 400_000 // about 60 MB
	s := &schema.Snapshot{Lsn: 9, Term: 2, NextId: jobs + 1, NextSeq: jobs}
	payload := make([]byte, 100)
	for i := range jobs {
		s.Jobs = append(s.Jobs, &schema.SnapshotJob{Id: uint64(i + 1), Queue: "q", QueueId: 1, Payload: payload, Seq: uint64(i), Stamps: &schema.WalStamps{}})
	}
	data, err := wal.EncodeSnapshot(s)
	if err != nil {
		b.Fatal(err)
	}
	e := &Executor{Base: b.TempDir()}
	defer e.Close()
	for _, op := range []sm.FileOp{{Op: sm.OpMkdir, Path: "data"}, {Op: sm.OpWrite, Path: "data/s.tmp", Data: data}} {
		if d := e.Exec(op); d.Err != sm.IOOK {
			b.Fatalf("%s: %s", op.Op, d.Detail)
		}
	}
	check := &sm.SnapshotCheck{LSN: 9, Term: 2}
	for _, c := range []struct {
		name   string
		verify func() error
	}{
		{"streamed", func() error {
			if d := e.Compute(sm.Compute{Kind: sm.ComputeVerify, Path: "data/s.tmp", MaxSize: 1 << 31, Check: check}); d.Err != sm.IOOK {
				return fmt.Errorf("%s %s", d.Err, d.Detail)
			}
			return nil
		}},
		{"whole", func() error {
			d := e.Exec(sm.FileOp{Op: sm.OpRead, Path: "data/s.tmp", MaxSize: 1 << 31})
			if d.Err != sm.IOOK {
				return fmt.Errorf("%s %s", d.Err, d.Detail)
			}
			return check.Verify(d.Data)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var faults int64
			for range b.N {
				b.StopTimer()
				debug.FreeOSMemory()
				var before, after syscall.Rusage
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
				b.StartTimer()
				if err := c.verify(); err != nil {
					b.Fatal(err)
				}
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
				faults += after.Minflt - before.Minflt
			}
			b.ReportMetric(float64(faults)/float64(b.N), "faults/op")
		})
	}
}
