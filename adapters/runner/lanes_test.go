package runner

import (
	"reflect"
	"testing"
	"time"

	"github.com/xce-hpc/xce/host/loop"
	"github.com/xce-hpc/xce/sm"
)

// The runner's host queues each effect on its lane's worker (loop.LaneOf):
// file operations on the I/O worker in issue order, Computes on the
// compute worker, bulk reads on theirs, so a long encode or import or a
// standby checkpoint's read of a segment never holds a WAL fsync.
func TestHostQueuesByLane(t *testing.T) {
	r := &Runner{}
	for i := range r.lanes {
		r.lanes[i] = &ioWorker{wake: make(chan struct{}, 1)}
	}
	h := host{r}
	h.File(sm.FileOp{ID: 1, Op: sm.OpAppend, Path: "data/wal/1"})
	h.Compute(sm.Compute{ID: 2, Kind: sm.ComputeEncode})
	h.File(sm.FileOp{ID: 3, Op: sm.OpRead, Path: "data/wal/0", Bulk: true})
	h.File(sm.FileOp{ID: 4, Op: sm.OpFsync, Path: "data/wal/1"})
	want := map[loop.Lane][]sm.Effect{
		loop.LaneIO:      {sm.FileOp{ID: 1, Op: sm.OpAppend, Path: "data/wal/1"}, sm.FileOp{ID: 4, Op: sm.OpFsync, Path: "data/wal/1"}},
		loop.LaneCompute: {sm.Compute{ID: 2, Kind: sm.ComputeEncode}},
		loop.LaneBulk:    {sm.FileOp{ID: 3, Op: sm.OpRead, Path: "data/wal/0", Bulk: true}},
	}
	for lane, w := range want {
		if got := r.lanes[lane].q; !reflect.DeepEqual(got, w) {
			t.Errorf("lane %v holds %v, want %v", lane, got, w)
		}
	}
}

// A file operation over SlowStep is logged with what it moved and how
// many waited behind it on which lane; a fast one and an fsync (the
// daemon's observer logs those) are not.
func TestSlowFileOp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     sm.FileOp
		d      sm.IODone
		took   time.Duration
		queued int
		want   string
	}{
		{"fast read", sm.FileOp{Op: sm.OpRead, Path: "data/wal/1"}, sm.IODone{Data: make([]byte, 10)}, SlowStep, 0, ""},
		{"slow fsync", sm.FileOp{Op: sm.OpFsync, Path: "data/wal/1"}, sm.IODone{}, time.Second, 3, ""},
		{"slow dir fsync", sm.FileOp{Op: sm.OpFsyncDir, Path: "data/wal"}, sm.IODone{}, time.Second, 0, ""},
		{"slow bulk read", sm.FileOp{Op: sm.OpRead, Path: "data/wal/1", Bulk: true}, sm.IODone{Data: make([]byte, 1000)}, 834 * time.Millisecond, 0,
			"slow file operation: read data/wal/1 took 834ms (0 bytes written, 1000 read; 0 operations queued behind it on the bulk lane)"},
		{"slow append", sm.FileOp{Op: sm.OpAppend, Path: "data/wal/2", Data: make([]byte, 70)}, sm.IODone{}, 68400 * time.Microsecond, 2,
			"slow file operation: append data/wal/2 took 68ms (70 bytes written, 0 read; 2 operations queued behind it on the io lane)"},
	} {
		if got := slowFileOp(tc.op, tc.d, tc.took, tc.queued); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
