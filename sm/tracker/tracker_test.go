package tracker

import (
	"testing"

	"pgregory.net/rapid"
)

const sec = int64(1e9)

func TestState(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       Progress
		now     int64
		durable uint64
		want    string
		behind  uint64
	}{
		{"in sync", Progress{Synced: true, Acked: 10, LastSeen: 5 * sec}, 6 * sec, 10, "in sync", 0},
		{"lagging", Progress{Synced: true, Acked: 7, LastSeen: 5 * sec}, 6 * sec, 10, "lagging", 3},
		{"syncing", Progress{LastSeen: 5 * sec}, 6 * sec, 10, "syncing", 10},
		{"failing", Progress{Failure: "ENOSPC", LastSeen: 5 * sec}, 6 * sec, 10, "failing: ENOSPC", 10},
		{"silent beats failing", Progress{Failure: "ENOSPC", LastSeen: 1 * sec}, 6 * sec, 10, "silent", 10},
		{"a failure once synced is lagging", Progress{Synced: true, Acked: 9, Failure: "EIO", LastSeen: 5 * sec}, 6 * sec, 10, "lagging", 1},
		{"ahead of the durable LSN", Progress{Synced: true, Acked: 12, LastSeen: 5 * sec}, 6 * sec, 10, "in sync", 0},
		{"heard exactly a timeout ago", Progress{Synced: true, Acked: 10, LastSeen: 4 * sec}, 6 * sec, 10, "in sync", 0},
	} {
		got, behind := tc.p.State(tc.now, 2*sec, tc.durable)
		if got != tc.want || behind != tc.behind {
			t.Errorf("%s: State = %q, %d; want %q, %d", tc.name, got, behind, tc.want, tc.behind)
		}
	}
}

func TestAckKeepsTheHighest(t *testing.T) {
	p := New(3, 5, 0)
	if p.Holds(5) {
		t.Fatal("a standby that never acknowledged holds nothing")
	}
	p.Ack(9, sec)
	p.Ack(7, 2*sec) // a late ack
	if p.Acked != 9 || !p.Synced || p.LastSeen != 2*sec || !p.Holds(9) || p.Holds(10) {
		t.Fatalf("after acks 9, 7: %+v", p)
	}
}

// peerGen draws a set of standbys' progress.
func setGen() *rapid.Generator[Set] {
	return rapid.Custom(func(t *rapid.T) Set {
		s := Set{}
		for p, n := 1, rapid.IntRange(0, 6).Draw(t, "peers"); p <= n; p++ {
			s[p] = &Progress{
				Acked:    rapid.Uint64Range(0, 20).Draw(t, "acked"),
				Synced:   rapid.Bool().Draw(t, "synced"),
				LastSeen: rapid.Int64Range(0, 10).Draw(t, "seen") * sec,
			}
		}
		return s
	})
}

// The commit point against its definition: the highest LSN that need of
// the primary and its synced standbys hold.
func TestCommittedIsTheHighestLSNNeedHold(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := setGen().Draw(t, "set")
		own := rapid.Uint64Range(0, 20).Draw(t, "own")
		need := rapid.IntRange(1, 7).Draw(t, "need")
		var want uint64
		for v := uint64(1); v <= 20; v++ {
			holders := 0
			if own >= v {
				holders++
			}
			for _, pr := range s {
				if pr.Synced && pr.Acked >= v {
					holders++
				}
			}
			if holders >= need {
				want = v
			}
		}
		if got := s.Committed(own, need); got != want {
			t.Fatalf("Committed(%d, %d) = %d, want %d", own, need, got, want)
		}
	})
}

// Seed mode's rule against its definition, and HeldByAny with it.
func TestReplicatedCountsLiveStandbys(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := setGen().Draw(t, "set")
		lsn := rapid.Uint64Range(1, 20).Draw(t, "lsn")
		need := rapid.IntRange(0, 3).Draw(t, "need")
		now, timeout := 10*sec, rapid.Int64Range(0, 10).Draw(t, "timeout")*sec
		have, live, any := 0, 0, false
		for _, pr := range s {
			holds := pr.Synced && pr.Acked >= lsn
			any = any || holds
			if now-pr.LastSeen <= timeout {
				live++
				if holds {
					have++
				}
			}
		}
		want := have >= need || have == live
		if got := s.Replicated(lsn, need, now, timeout); got != want {
			t.Fatalf("Replicated(%d, need %d) = %v, want %v (have %d of %d live)", lsn, need, got, want, have, live)
		}
		if got := s.HeldByAny(lsn); got != any {
			t.Fatalf("HeldByAny(%d) = %v, want %v", lsn, got, any)
		}
	})
}

func TestPeersInIndexOrder(t *testing.T) {
	s := Set{4: {}, 1: {}, 3: {}}
	if got := s.Peers(); len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != 4 {
		t.Fatalf("Peers() = %v", got)
	}
}

func TestSlowest(t *testing.T) {
	s := Set{1: {Acked: 9, StartLSN: 3}, 2: {Acked: 2, StartLSN: 6}, 3: {Acked: 6}}
	if at, who := s.Slowest(10); at != 6 || who != 2 {
		t.Errorf("Slowest(10) = %d, n%d; want 6, n2 (the lowest index of the two at 6)", at, who)
	}
	if at, who := s.Slowest(5); at != 5 || who != -1 {
		t.Errorf("Slowest(5) = %d, n%d; want 5, none", at, who)
	}
}
