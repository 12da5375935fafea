package sm

import (
	"errors"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// A snapshot carries each job's claim stamp, and import refuses a stamp
// the snapshot's own position does not cover (a claim by a record after
// it, or of a later term).
func TestSnapshotClaimStamp(t *testing.T) {
	cfg := &schema.ClusterConfig{Queues: []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 30, MaxAttempts: 3}}}
	q := queue.New()
	q.AdvanceNextID(TermIDFloor(3))
	if _, err := q.Enqueue(100, "q0", []byte("a"), queue.Stamps{VisibilityTimeoutS: 30, MaxAttempts: 3}, queue.EnqueueOpts{}); err != nil {
		t.Fatal(err)
	}
	if got := q.ClaimBatch(101, "q0", "h0", 1, queue.ClaimStamp{Term: 3, LSN: 9}); len(got) != 1 {
		t.Fatalf("claim: %+v", got)
	}
	for _, c := range []struct {
		lsn, term uint64
		ok        bool
	}{{9, 3, true}, {12, 4, true}, {8, 3, false}, {9, 2, false}} {
		data, err := wal.EncodeSnapshot(SnapshotOf(q, c.lsn, c.term))
		if err != nil {
			t.Fatal(err)
		}
		back, _, _, err := importSnapshot(data, newRouter(cfg))
		if !c.ok {
			if !errors.Is(err, queue.ErrBadSnapshot) {
				t.Errorf("snapshot at (term %d, lsn %d) with a claim at (3, 9): err %v, want ErrBadSnapshot", c.term, c.lsn, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("import at (term %d, lsn %d): %v", c.term, c.lsn, err)
		}
		j := back.List("")[0]
		if j.Claim != (queue.ClaimStamp{Term: 3, LSN: 9}) || j.ID != 3<<40|1 || back.Export().NextID != 3<<40|2 {
			t.Fatalf("imported %+v, next id %d", j, back.Export().NextID)
		}
	}
}

// The state imported from a snapshot file holds no part of the file: the
// file's buffer is dropped after recovery, and a payload aliasing it would
// keep all of it alive (the state keeps the decoded payloads themselves).
func TestSnapshotImportKeepsNoFileBytes(t *testing.T) {
	cfg := &schema.ClusterConfig{Queues: []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 30, MaxAttempts: 3}}}
	q := queue.New()
	for i := range 3 {
		if _, err := q.Enqueue(100, "q0", []byte{'p', byte('0' + i)}, queue.Stamps{VisibilityTimeoutS: 30, MaxAttempts: 3}, queue.EnqueueOpts{}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := wal.EncodeSnapshot(SnapshotOf(q, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	back, _, _, err := importSnapshot(data, newRouter(cfg))
	if err != nil {
		t.Fatal(err)
	}
	clear(data)
	for i, j := range back.List("") {
		if string(j.Payload) != string([]byte{'p', byte('0' + i)}) {
			t.Fatalf("job %d: payload %q after the file's buffer was cleared", j.ID, j.Payload)
		}
	}
}
