package sm

import "testing"

// A promotion numbers its syncs above every epoch an earlier promotion of
// the same node used, so a late message of an older sync never names a
// newer one; within a promotion the epochs count up by one.
func TestSyncEpochsGrowAcrossPromotions(t *testing.T) {
	const top = 1<<32 - 1
	for _, tc := range []struct {
		name  string
		terms []uint64 // one promotion per term, two syncs each
		want  []uint64
	}{
		{"one promotion", []uint64{1}, []uint64{1<<32 | 1, 1<<32 | 2}},
		{"promoted again", []uint64{1, 3}, []uint64{1<<32 | 1, 1<<32 | 2, 3<<32 | 1, 3<<32 | 2}},
		{"term 0 (a lone node's first)", []uint64{0, 1}, []uint64{1, 2, 1<<32 | 1, 1<<32 | 2}},
		{"past 2^32 terms share the top half", []uint64{1 << 40}, []uint64{top<<32 | 1, top<<32 | 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []uint64
			var prev uint64
			for _, term := range tc.terms {
				j := &jobState{} // a promotion's fresh job state
				for range 2 {
					e := j.newSyncEpoch(term)
					if e <= prev && term < top {
						t.Fatalf("term %d: epoch %#x not above the earlier %#x", term, e, prev)
					}
					prev = e
					got = append(got, e)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d epochs, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("epoch %d = %#x, want %#x", i, got[i], tc.want[i])
				}
			}
		})
	}
}
