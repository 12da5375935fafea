package sm_test

import (
	"slices"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// The harness models the lanes of loop.Host: an op it parks (hold) keeps
// the later ops of its lane behind it, unexecuted, while the other lane
// goes on; released, each lane's ops run and complete in issue order.
func TestHarnessHoldParksItsLane(t *testing.T) {
	cfg, err := schema.DecodeClusterConfig(testConfig(t, "lanes", 1))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, 1)
	hn := h.add(0, nil, nil)
	hn.up = true
	h.hold = func(_ int, e sm.Effect) bool { op, ok := e.(sm.FileOp); return ok && op.Path == "a" }
	x := harnessHost{h, hn}
	x.File(sm.FileOp{ID: 1, Op: sm.OpWrite, Path: "a", Data: []byte("1")})
	x.File(sm.FileOp{ID: 2, Op: sm.OpWrite, Path: "b", Data: []byte("2")})
	// An import: the compute lane, not behind the parked write.
	x.Compute(sm.Compute{ID: 3, Kind: sm.ComputeImport, Path: "s", Load: sm.NewSnapshotLoad(cfg)})
	x.File(sm.FileOp{ID: 4, Op: sm.OpAppend, Path: "a", Data: []byte("3")})
	completed := func() []uint64 {
		var ids []uint64
		for _, q := range h.queue {
			switch d := q.in.(type) {
			case sm.IODone:
				ids = append(ids, d.ID)
			case sm.Computed:
				ids = append(ids, d.ID)
			}
		}
		return ids
	}
	if got := completed(); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("completed %v with op 1 parked, want [3]: the ops behind it on its lane ran first", got)
	}
	if r := hn.disk.Exec(sm.FileOp{Op: sm.OpRead, Path: "b"}, h.wall()); r.Err != sm.IONotExist {
		t.Fatalf("b was written (%v) while the write before it on its lane was parked", r.Err)
	}
	h.hold = nil
	h.releaseHeld()
	if got := completed(); !slices.Equal(got, []uint64{3, 1, 2, 4}) {
		t.Fatalf("completed %v, want [3 1 2 4]", got)
	}
	if r := hn.disk.Exec(sm.FileOp{Op: sm.OpRead, Path: "a"}, h.wall()); string(r.Data) != "13" {
		t.Fatalf("a holds %q, want %q: its lane ran out of issue order", r.Data, "13")
	}
}
