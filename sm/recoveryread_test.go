package sm_test

import (
	"testing"
	"time"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// Boot and recovery read each file of the job log once: the boot scan's
// reads (fsync'd) are what recovery replays, torn tail and all.
func TestRecoveryReadsEachFileOnce(t *testing.T) {
	d := simdisk.New()
	install(t, d, testConfig(t, "once", 1), epoch)
	q := queue.New()
	for i := 0; i < 2; i++ {
		if _, err := q.Enqueue(100, "q0", []byte("job"), queue.Stamps{VisibilityTimeoutS: 30, MaxAttempts: 5}, queue.EnqueueOpts{}); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := wal.EncodeSnapshot(sm.SnapshotOf(q, 2, 1))
	if err != nil {
		t.Fatal(err)
	}
	var seg []byte
	for lsn := uint64(3); lsn <= 4; lsn++ {
		rec := &schema.WalRecord{Lsn: lsn, Term: 1, Now: 100, Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "q0", QueueId: 1, Payload: []byte("job"),
			Stamps: &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 5}}}}
		if seg, err = wal.AppendFrame(seg, rec); err != nil {
			t.Fatal(err)
		}
	}
	valid := len(seg)
	seg = append(seg, 0x17, 0, 0) // a torn frame
	segPath, snapPath := wal.SegmentPath(3), wal.SnapshotPath(2)
	for path, data := range map[string][]byte{segPath: seg, snapPath: snap} {
		if err := d.PutDurable(path, data, epoch); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, 1)
	hn := h.add(0, d, nil)
	h.boot(0)
	h.advanceUntil(10*time.Second, func() bool { _, _, ok := hn.n.JobState(); return ok })
	if got, _, ok := hn.n.JobState(); !ok || hn.n.RecoveredLSN() != 4 || len(got.List("")) != 4 {
		t.Fatalf("recovered to lsn %d (ok %v):\n%s", hn.n.RecoveredLSN(), ok, hn.logDump())
	}
	reads := map[string]int{}
	for _, op := range hn.opsOf(sm.OpRead) {
		reads[op.Path]++
	}
	if reads[segPath] != 1 || reads[snapPath] != 1 {
		t.Fatalf("reads %v: want the segment and the snapshot read once each", reads)
	}
	if data, _ := d.DurableFile(segPath); len(data) != valid || !hn.hasLog("wal.torn-tail", sm.Warn) {
		t.Fatalf("torn tail not truncated durably (%d bytes, %d valid):\n%s", len(data), valid, hn.logDump())
	}
}
