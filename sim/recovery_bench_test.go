package sim

import (
	"fmt"
	"testing"

	"xce/schema"
	"xce/sim/simdisk"
	"xce/sm"
	"xce/sm/wal"
)

// walWorkload frames n records of a realistic mix (enqueue, claim, ack).
func walWorkload(b *testing.B, n int) []byte {
	st := &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 3, BackoffBaseS: 2}
	var data []byte
	for i := 1; i <= n; i++ {
		rec := &schema.WalRecord{Lsn: uint64(i), Now: 1000 + int64(i/100)}
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

// BenchmarkRecovery runs the node's real recovery (read the segment,
// verify every frame, replay every record into the queues) of 10,000 and
// 1,000,000 records from an in-memory disk (seed §13.3; DESIGN §6 targets
// <= 20 ms and <= 2 s).
func BenchmarkRecovery(b *testing.B) {
	for _, n0 := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("records=%d", n0), func(b *testing.B) {
			data := walWorkload(b, n0)
			cfg := &schema.ClusterConfig{ConfigGeneration: 1, Port: 7000,
				Queues: []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 30, MaxAttempts: 3}}, Hosts: []*schema.Host{{Name: "h0"}}}
			blob, err := schema.Encode(cfg)
			if err != nil {
				b.Fatal(err)
			}
			d := simdisk.New()
			mustProvision(b, d, blob, epoch)
			for _, op := range []sm.FileOp{{Op: sm.OpMkdir, Path: sm.DataDir}, {Op: sm.OpMkdir, Path: wal.WALDir},
				{Op: sm.OpWrite, Path: wal.SegmentPath(1), Data: data}, {Op: sm.OpFsync, Path: wal.SegmentPath(1)}} {
				d.Exec(op, epoch)
			}
			opt := sm.DefaultOptions(0, []string{"n0"})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				n, _ := sm.NewNode(opt)
				drv := &ioDriver{node: n, disk: d}
				drv.feed(sm.Boot{Seed: 1})
				if _, lsn, ok := n.JobState(); !ok || lsn != uint64(n0) {
					b.Fatalf("recovery reached lsn %d of %d: %v", lsn, n0, drv.logs)
				}
			}
			b.ReportMetric(float64(n0)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
