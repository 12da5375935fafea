package queue

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestPropHeapAcrossChunks: a heap pushed to and removed from across the
// small slice, its move into chunks and many chunks yields its jobs in key
// order, records every job's true position, and keeps at most one spare
// chunk; checked against a sorted list of the jobs it should hold.
func TestPropHeapAcrossChunks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := &jobHeap{kind: hWaiting}
		var in []*job // the reference: what h holds
		nextID := uint64(1)
		rounds := rapid.IntRange(1, 6).Draw(t, "rounds")
		for range rounds {
			// Ready times from one draw a round (a draw per job made the
			// test slow): many equal keys, broken by Seq.
			mul := rapid.Int64Range(1, 97).Draw(t, "mul")
			for range rapid.IntRange(0, 3*chunkLen).Draw(t, "pushes") {
				e := &job{ID: nextID, Seq: nextID, RunAt: int64(nextID) * mul % 50, slot: -1, gslot: -1}
				nextID++
				h.push(e)
				in = append(in, e)
			}
			for range rapid.IntRange(0, len(in)).Draw(t, "removals") {
				k := rapid.IntRange(0, len(in)-1).Draw(t, "which")
				h.remove(in[k])
				if in[k].slot != -1 || in[k].lh != noHeap {
					t.Fatalf("removed job %d still records slot %d, heap %d", in[k].ID, in[k].slot, in[k].lh)
				}
				in = slices.Delete(in, k, k+1)
			}
			if h.len() != len(in) {
				t.Fatalf("heap holds %d, want %d", h.len(), len(in))
			}
			for i := range h.len() {
				n := h.at(i)
				if int(n.e.slot) != i {
					t.Fatalf("job %d at %d records %d", n.e.ID, i, n.e.slot)
				}
				if i > 0 && n.less(h.at((i-1)/4)) {
					t.Fatalf("job %d at %d sorts before its parent", n.e.ID, i)
				}
			}
			// The first chunk stays, and one spare past the last in use.
			if need := max(1, (h.len()+chunkLen-1)/chunkLen); h.chunks != nil && len(h.chunks) > need+1 {
				t.Fatalf("%d chunks for %d nodes", len(h.chunks), h.len())
			}
		}
		want := slices.Clone(in)
		slices.SortFunc(want, func(a, b *job) int {
			switch {
			case less(hWaiting, a, b):
				return -1
			case less(hWaiting, b, a):
				return 1
			}
			return 0
		})
		for k, w := range want {
			if got := h.pop(); got != w {
				t.Fatalf("pop %d: job %d, want %d", k, got.ID, w.ID)
			}
		}
		if h.len() != 0 || h.top() != nil {
			t.Fatalf("heap not empty after popping all: %d", h.len())
		}
	})
}
