package sim

import "testing"

// Schedules of the long run (-schedules 15000) that once failed, beyond
// the seeds TestSimulate runs by default: each replays in milliseconds.
var regressionSeeds = []struct {
	seed uint64
	why  string
}{
	{6460, "L3: a standby's config save failed (no space) and its next fetch attempt went out at once, so it gave up 0.8 s before the retry window"},
}

func TestRegressionSeeds(t *testing.T) {
	for _, r := range regressionSeeds {
		_, fails := runSeeds(r.seed, 1, nil)
		for _, f := range fails {
			if f != nil {
				t.Errorf("seed %d (%s): %v", r.seed, r.why, f)
			}
		}
	}
}
