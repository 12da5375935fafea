package runner

import (
	"reflect"
	"testing"

	"github.com/xce-hpc/xce/host/loop"
	"github.com/xce-hpc/xce/sm"
)

// The runner's host queues each effect on its lane's worker (loop.LaneOf):
// file operations on the I/O worker in issue order, Computes on the
// compute worker, so a long encode or import never holds a WAL fsync.
func TestHostQueuesByLane(t *testing.T) {
	r := &Runner{}
	for i := range r.lanes {
		r.lanes[i] = &ioWorker{wake: make(chan struct{}, 1)}
	}
	h := host{r}
	h.File(sm.FileOp{ID: 1, Op: sm.OpAppend, Path: "data/wal/1"})
	h.Compute(sm.Compute{ID: 2, Kind: sm.ComputeEncode})
	h.File(sm.FileOp{ID: 3, Op: sm.OpFsync, Path: "data/wal/1"})
	want := map[loop.Lane][]sm.Effect{
		loop.LaneIO:      {sm.FileOp{ID: 1, Op: sm.OpAppend, Path: "data/wal/1"}, sm.FileOp{ID: 3, Op: sm.OpFsync, Path: "data/wal/1"}},
		loop.LaneCompute: {sm.Compute{ID: 2, Kind: sm.ComputeEncode}},
	}
	for lane, w := range want {
		if got := r.lanes[lane].q; !reflect.DeepEqual(got, w) {
			t.Errorf("lane %v holds %v, want %v", lane, got, w)
		}
	}
}
