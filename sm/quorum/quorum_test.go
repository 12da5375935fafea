package quorum

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestMajority(t *testing.T) {
	for _, tc := range []struct{ n, want int }{{0, 1}, {1, 1}, {2, 2}, {3, 2}, {4, 3}, {5, 3}, {6, 4}, {7, 4}} {
		if got := Majority(tc.n); got != tc.want {
			t.Errorf("Majority(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestCommittedExamples(t *testing.T) {
	for _, tc := range []struct {
		pos  []uint64
		need int
		want uint64
	}{
		{[]uint64{5}, 1, 5},
		{[]uint64{5, 3, 9}, 2, 5},
		{[]uint64{5, 3, 9}, 3, 3},
		{[]uint64{5, 3}, 3, 0},
		{[]uint64{7, 7, 1, 1, 2}, 3, 2},
		{nil, 1, 0},
	} {
		if got := Committed(tc.pos, tc.need); got != tc.want {
			t.Errorf("Committed(%v, %d) = %d, want %d", tc.pos, tc.need, got, tc.want)
		}
	}
}

// The committed position is reached by at least need positions, and no
// higher position is.
func TestCommittedProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pos := rapid.SliceOfN(rapid.Uint64Range(0, 50), 1, 9).Draw(t, "pos")
		need := rapid.IntRange(1, len(pos)).Draw(t, "need")
		orig := slices.Clone(pos)
		c := Committed(pos, need)
		if !slices.Equal(pos, orig) {
			t.Fatalf("Committed modified its input")
		}
		atLeast := func(v uint64) int {
			k := 0
			for _, p := range pos {
				if p >= v {
					k++
				}
			}
			return k
		}
		if atLeast(c) < need {
			t.Fatalf("%d reached by %d < %d positions of %v", c, atLeast(c), need, pos)
		}
		if atLeast(c+1) >= need {
			t.Fatalf("%d is reached by %d >= %d positions of %v: %d is not the highest", c+1, atLeast(c+1), need, pos, c)
		}
	})
}
