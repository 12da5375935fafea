package sim

import (
	"fmt"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// walWorkload frames n records from LSN first on of a realistic mix
// (enqueue, claim, ack).
func walWorkload(b *testing.B, first uint64, n int) []byte {
	st := &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 3, BackoffBaseS: 2}
	var data []byte
	for i := 1; i <= n; i++ {
		rec := &schema.WalRecord{Lsn: first + uint64(i) - 1, Term: 1, Now: 1000 + int64(i/100)}
		switch i % 4 {
		case 0, 1:
			rec.Op = &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "q0", QueueId: 1, Payload: []byte("payload-0123456789"), Stamps: st}}
		case 2:
			rec.Op = &schema.WalRecord_ClaimBatch{ClaimBatch: &schema.WalClaimBatch{Queue: "q0", QueueId: 1, Host: "h0", Max: 1}}
		case 3:
			rec.Op = &schema.WalRecord_Ack{Ack: &schema.WalAck{Handle: &schema.WalHandle{Id: uint64(i/2 - 1), Attempt: 1}}}
		}
		var err error
		if data, err = wal.AppendFrame(data, rec); err != nil {
			b.Fatal(err)
		}
	}
	return data
}

// snapshotOf encodes a snapshot at lsn (term 1) of jobs pending jobs with
// 200-byte payloads, the shape of issue 9's million queued jobs.
func snapshotOf(b *testing.B, jobs int, lsn uint64) []byte {
	q := queue.New()
	payload := make([]byte, 200)
	for i := 0; i < jobs; i++ {
		payload[0], payload[1], payload[2] = byte(i), byte(i>>8), byte(i>>16)
		if _, err := q.Enqueue(1000, "q0", payload, queue.Stamps{VisibilityTimeoutS: 30, MaxAttempts: 3}, queue.EnqueueOpts{}); err != nil {
			b.Fatal(err)
		}
	}
	data, err := wal.EncodeSnapshot(sm.SnapshotOf(q, lsn, 1))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkRecovery runs a node's real boot and recovery (the boot scan of
// the log's position, then read the files, verify every frame, replay every
// record into the queues) from an in-memory disk: 10,000 and 1,000,000
// records, and a snapshot of 1,000,000 queued jobs followed by 10,000
// records (seed §13.3; issue 9 targets replay of 10k <= 10 ms, 1M <= 1 s).
// Each iteration starts from a copy of the same disk.
func BenchmarkRecovery(b *testing.B) {
	for _, c := range []struct{ jobs, records int }{{0, 10_000}, {0, 1_000_000}, {1_000_000, 10_000}} {
		name := fmt.Sprintf("records=%d", c.records)
		if c.jobs > 0 {
			name = fmt.Sprintf("snapshot-jobs=%d/records=%d", c.jobs, c.records)
		}
		b.Run(name, func(b *testing.B) {
			snapLSN := uint64(0)
			if c.jobs > 0 {
				snapLSN = uint64(c.jobs) // one record per job before the snapshot
			}
			cfg := &schema.ClusterConfig{ConfigGeneration: 1, Port: 7000,
				Queues: []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 30, MaxAttempts: 3}}, Hosts: []*schema.Host{{Name: "h0"}}}
			blob, err := schema.Encode(cfg)
			if err != nil {
				b.Fatal(err)
			}
			d := simdisk.New()
			mustProvision(b, d, blob, epoch)
			ops := []sm.FileOp{{Op: sm.OpMkdir, Path: sm.DataDir}, {Op: sm.OpMkdir, Path: wal.WALDir}, {Op: sm.OpMkdir, Path: wal.SnapDir},
				{Op: sm.OpWrite, Path: wal.SegmentPath(snapLSN + 1), Data: walWorkload(b, snapLSN+1, c.records)}, {Op: sm.OpFsync, Path: wal.SegmentPath(snapLSN + 1)}}
			if c.jobs > 0 {
				ops = append(ops, sm.FileOp{Op: sm.OpWrite, Path: wal.SnapshotPath(snapLSN), Data: snapshotOf(b, c.jobs, snapLSN)}, sm.FileOp{Op: sm.OpFsync, Path: wal.SnapshotPath(snapLSN)})
			}
			for _, op := range ops {
				if res := d.Exec(op, epoch); res.Err != sm.IOOK {
					b.Fatalf("%v %s: %s", op.Op, op.Path, res.Err)
				}
			}
			opt := sm.DefaultOptions(0, []string{"n0"})
			want := snapLSN + uint64(c.records)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				disk := d.Clone() // recovery appends the term's no-op
				n, _ := sm.NewNode(opt)
				drv := &ioDriver{node: n, disk: disk}
				b.StartTimer()
				drv.feed(sm.Boot{Seed: 1})
				if _, _, ok := n.JobState(); !ok || n.RecoveredLSN() != want {
					b.Fatalf("recovery reached lsn %d of %d: %v", n.RecoveredLSN(), want, drv.logs)
				}
			}
			b.ReportMetric(float64(c.records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
