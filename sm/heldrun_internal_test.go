package sm

import (
	"bytes"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/wal"
	"pgregory.net/rapid"
)

// heldRun packs the batches written during a snapshot's encode into
// messages that hold, in order, exactly the frames held, each message a
// whole run of frames no larger than the frame limit unless one frame is,
// within the bound; past the bound it holds nothing and says so.
func TestHeldRunPacksFramesInOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 8<<20).Draw(t, "limit")
		var h heldRun
		var all []byte
		lsn := uint64(0)
		over := false
		for range rapid.IntRange(0, 40).Draw(t, "batches") {
			var batch []byte
			for range rapid.IntRange(1, 4).Draw(t, "frames") {
				lsn++
				size := rapid.SampledFrom([]int{10, 1000, 300 << 10, 700 << 10, MaxConfigSize + 5}).Draw(t, "payload")
				var err error
				batch, err = wal.AppendFrame(batch, &schema.WalRecord{Lsn: lsn, Term: 1, Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "q", Payload: make([]byte, size)}}})
				if err != nil {
					t.Fatal(err)
				}
			}
			if len(all)+len(batch) > limit {
				over = true
			}
			if !over {
				all = append(all, batch...)
			}
			h.hold(batch, limit)
		}
		if h.overflow != over {
			t.Fatalf("overflow %v, want %v", h.overflow, over)
		}
		if over {
			if len(h.messages()) != 0 {
				t.Fatalf("overflowed, yet %d messages held", len(h.messages()))
			}
			return
		}
		var got []byte
		for i, m := range h.messages() {
			n := 0
			valid, err := wal.WalkPositions(m, func(int, uint64, uint64) error { n++; return nil })
			if err != nil || valid != len(m) || n == 0 {
				t.Fatalf("message %d (%d bytes): %d frames, %d valid, %v", i, len(m), n, valid, err)
			}
			if len(m) > MaxConfigSize && n > 1 {
				t.Fatalf("message %d: %d bytes in %d frames, over the limit %d", i, len(m), n, MaxConfigSize)
			}
			got = append(got, m...)
		}
		if !bytes.Equal(got, all) {
			t.Fatalf("messages hold %d bytes, %d were held", len(got), len(all))
		}
	})
}
