package sm

import "testing"

// TestFirstSegLimitSetsStandbysApart: each node's first segment after it
// joins is due for compaction at its own share of max_wal_records, so no
// two nodes (and no standby and the primary, at the interval) compact at
// the same records.
func TestFirstSegLimitSetsStandbysApart(t *testing.T) {
	for _, c := range []struct {
		self, peers, max, want int
	}{
		{0, 3, 10000, 2500}, {1, 3, 10000, 5000}, {2, 3, 10000, 7500},
		{0, 1, 10000, 5000},
		{6, 7, 100, 87}, {0, 7, 100, 12},
	} {
		n := newNode(Options{Self: c.self, Peers: make([]string, c.peers), MaxWALRecords: c.max})
		if got := n.sb.firstSegLimit(); got != c.want {
			t.Errorf("self %d of %d, max_wal_records %d: first segment limit %d, want %d", c.self, c.peers, c.max, got, c.want)
		}
	}
}

// TestSegmentsUpTo: a standby checkpoint up to lsn reads the segments that
// may hold records at or below it, never the one appended to since.
func TestSegmentsUpTo(t *testing.T) {
	segs := []string{"0000000000000001.wal", "0000000000000010.wal", "0000000000000057.wal"}
	for _, c := range []struct {
		lsn  uint64
		want int
	}{
		{0x56, 2},  // the checkpoint ends just before the last segment
		{0x57, 3},  // the last segment holds its last record
		{0x0f, 1},  // the snapshot's segment only
		{0x100, 3}, // all of them
		{0, 0},     // none starts at or below 0
	} {
		if got := segmentsUpTo(segs, c.lsn); len(got) != c.want || c.want > 0 && got[len(got)-1] != segs[c.want-1] {
			t.Errorf("up to lsn %#x: %v, want the first %d", c.lsn, got, c.want)
		}
	}
}
