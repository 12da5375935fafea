// Package quorum is the majority arithmetic of quorum mode (DESIGN §4.4),
// kept apart from the node the way etcd-raft keeps quorum/: pure functions
// of the positions and grants a primary or candidate has collected.
package quorum

import "slices"

// Majority is how many of n voters make a majority (n/2 + 1; 1 for n <= 1).
func Majority(n int) int {
	if n <= 1 {
		return 1
	}
	return n/2 + 1
}

// Committed returns the highest position that at least need of the
// positions have reached (0 when fewer than need positions are given):
// with each voter's durable LSN, the LSN durable on a majority.
func Committed(positions []uint64, need int) uint64 {
	if need < 1 || len(positions) < need {
		return 0
	}
	var buf [9]uint64 // a copy, on the stack for a cluster of up to 9
	s := append(buf[:0], positions...)
	slices.SortFunc(s, func(a, b uint64) int {
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	return s[need-1]
}

// Won reports whether grants (the candidate's own vote included) reach a
// majority of n voters.
func Won(grants, n int) bool { return grants >= Majority(n) }
