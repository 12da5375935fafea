package idset

import (
	"testing"

	"pgregory.net/rapid"
)

// The set agrees with a map on any sequence of adds, dense or sparse.
func TestSetIsAMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s, m := New(rapid.IntRange(0, 200).Draw(rt, "hint")), map[uint64]bool{}
		for _, x := range rapid.SliceOf(rapid.OneOf(rapid.Uint64Range(0, 300), rapid.Uint64())).Draw(rt, "xs") {
			if got, want := s.Add(x), !m[x]; got != want {
				rt.Fatalf("Add(%d) = %v, want %v", x, got, want)
			}
			m[x] = true
			if !s.Has(x) || s.Has(x^1) != m[x^1] {
				rt.Fatalf("Has disagrees after Add(%d)", x)
			}
		}
		if s.Len() != len(m) {
			rt.Fatalf("Len %d, want %d", s.Len(), len(m))
		}
	})
}
