// Package idset is a set of uint64s for checking a snapshot's ids and
// seqs for duplicates (sm/wal's ReadSnapshot, sm/queue's Importer). The
// numbers a snapshot holds are dense (ids and seqs are handed out in
// order), so the set keeps one 64-bit word per 64 consecutive numbers: a
// million jobs take ~16k map entries instead of a million, which is most
// of what checking them costs. Sparse numbers cost one entry each, as a
// plain map would.
package idset

// Set is a set of uint64s; the zero value is not usable (New).
type Set struct {
	words map[uint64]uint64
	n     int
}

// New is an empty set sized for about n dense numbers (up to a bound:
// n may come from a file not yet checked).
func New(n int) *Set { return &Set{words: make(map[uint64]uint64, min(max(n, 0)/64+1, maxHint))} }

// maxHint bounds the entries New reserves: 64M dense numbers.
const maxHint = 1 << 20

// Add adds x and reports whether it was new.
func (s *Set) Add(x uint64) bool {
	k, bit := x>>6, uint64(1)<<(x&63)
	w := s.words[k]
	if w&bit != 0 {
		return false
	}
	s.words[k] = w | bit
	s.n++
	return true
}

// Has reports whether x is in the set.
func (s *Set) Has(x uint64) bool { return s.words[x>>6]&(uint64(1)<<(x&63)) != 0 }

// Len is the number of members.
func (s *Set) Len() int { return s.n }
