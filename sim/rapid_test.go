package sim

import (
	"flag"
	"testing"

	"pgregory.net/rapid"
)

// rapidDrawer draws scenario choices from rapid, so a failing schedule
// shrinks to a small one (fewer nodes, faults, shorter phases).
type rapidDrawer struct{ t *rapid.T }

func (d rapidDrawer) intn(n int, label string) int {
	return rapid.IntRange(0, n-1).Draw(d.t, label)
}

func (d rapidDrawer) float(m float64, label string) float64 {
	return rapid.Float64Range(0, m).Draw(d.t, label)
}

func (d rapidDrawer) coin(p float64, label string) bool {
	return rapid.Float64Range(0, 1).Draw(d.t, label) < p
}

// TestRapidSchedules generates schedules through rapid instead of a seed:
// the same properties, and on failure rapid shrinks the schedule and
// prints the minimal one.
func TestRapidSchedules(t *testing.T) {
	rapid.Check(t, rapidSchedule)
}

// TestReceivedSnapshotBesideOwnCheckpoint replays the schedule
// TestRapidSchedules found (testdata/received-snapshot-beside-checkpoint.fail):
// a standby's own checkpoint at lsn 73 was still writing its temporary
// file when its new primary's snapshot at the same lsn arrived, both wrote
// data/snap/0000000000000049.snap.tmp, and the file renamed into place was
// the two mixed, which the next boot found corrupt (S7 fatal.wal-corrupt).
// A received snapshot now has a temporary name of its own.
func TestReceivedSnapshotBesideOwnCheckpoint(t *testing.T) {
	replayFailfile(t, "testdata/received-snapshot-beside-checkpoint.fail")
}

// TestL6SnapshotSyncsLeaveNoMajority replays the schedule
// TestRapidSchedules found in CI (testdata/l6-snapshot-syncs-leave-no-majority.fail):
// four nodes in quorum mode, two of the primary's three standbys
// installing snapshots in chunks of 65 bytes after the faults, so no
// write could commit for seconds, and L6 failed a request whose client
// gave up meanwhile. L6 now counts such a request (shortOfMajority), as
// it counts seed mode's.
func TestL6SnapshotSyncsLeaveNoMajority(t *testing.T) {
	replayFailfile(t, "testdata/l6-snapshot-syncs-leave-no-majority.fail")
}

// replayFailfile runs TestRapidSchedules' property once on the schedule
// rapid saved in path.
func replayFailfile(t *testing.T, path string) {
	for name, v := range map[string]string{"rapid.failfile": path, "rapid.checks": "1"} {
		prev := flag.Lookup(name).Value.String()
		if err := flag.Set(name, v); err != nil {
			t.Fatal(err)
		}
		defer flag.Set(name, prev) //nolint:errcheck // restoring the value read above
	}
	rapid.Check(t, rapidSchedule)
}

// rapidSchedule runs one schedule drawn through rapid and fails on any
// property's violation.
func rapidSchedule(rt *rapid.T) {
	seed := rapid.Uint64().Draw(rt, "seed")
	sc := generate(seed, rapidDrawer{rt})
	if _, f := NewWorld(sc, nil).Run(); f != nil {
		rt.Fatalf("%s\nscenario: %s", f.Property+": "+f.Detail, sc)
	}
}
