package sim

import (
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
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		sc := generate(seed, rapidDrawer{rt})
		if _, f := NewWorld(sc, nil).Run(); f != nil {
			rt.Fatalf("%s\nscenario: %s", f.Property+": "+f.Detail, sc)
		}
	})
}
