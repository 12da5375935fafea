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
