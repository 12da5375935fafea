package sm

import "testing"

// Freshness is the term of the last record first, then the LSN (Raft
// §5.4.1): a longer log of an older term is less fresh.
func TestLogFreshnessOrder(t *testing.T) {
	for _, tc := range []struct {
		a, b logPos
		want bool
	}{
		{logPos{2, 5}, logPos{1, 9}, true},
		{logPos{1, 9}, logPos{2, 5}, false},
		{logPos{2, 6}, logPos{2, 5}, true},
		{logPos{2, 5}, logPos{2, 5}, false},
		{logPos{0, 0}, logPos{0, 0}, false},
		{logPos{1, 0}, logPos{0, 100}, true},
	} {
		if got := tc.a.after(tc.b); got != tc.want {
			t.Errorf("%+v.after(%+v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
