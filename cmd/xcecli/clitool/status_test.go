package clitool

import "testing"

// The REPLICATION column names each standby once (issue 20 finding 10: a
// node started with another --peers list was listed as ignored and again
// as "not joined").
func TestReplText(t *testing.T) {
	for _, c := range []struct {
		name string
		r    PeerStatus
		want string
	}{
		{"none", PeerStatus{}, "-"},
		{"in sync and lagging", PeerStatus{Standbys: []StandbyState{{Name: "n1", State: "in sync"}, {Name: "n2", State: "lagging", Behind: 7}}}, "n1: in sync, n2: lagging by 7"},
		{"other --peers", PeerStatus{PeersMismatch: []string{"n2"}, Standbys: []StandbyState{{Name: "n1", State: "in sync"}, {Name: "n2", State: "not joined"}}}, "n2: other --peers, ignored, n1: in sync"},
		{"degraded", PeerStatus{Degraded: true, AckedWithoutStandby: 3, Standbys: []StandbyState{{Name: "n1", State: "silent"}}}, "degraded (3 acked without a standby), n1: silent"},
	} {
		if got := c.r.replText(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
