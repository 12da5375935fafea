package sim

import (
	"testing"
	"time"
)

// BenchmarkSchedule runs generated schedules on one core and reports
// schedules/s and the simulated-to-real time ratio (DESIGN §6 target:
// >= 10,000x per core).
func BenchmarkSchedule(b *testing.B) {
	var sim time.Duration
	events := 0
	start := time.Now()
	for i := 0; i < b.N; i++ {
		rep, f := NewWorld(Generate(uint64(i)+1), nil).Run()
		if f != nil {
			b.Fatal(f.Error())
		}
		sim += rep.SimTime
		events += rep.Events
	}
	real := time.Since(start)
	b.ReportMetric(float64(b.N)/real.Seconds(), "schedules/s")
	b.ReportMetric(float64(sim)/float64(real), "sim/real")
	b.ReportMetric(float64(events)/float64(b.N), "events/schedule")
}

// TestColdBootDemo measures cold boot to "all standbys configured" on the
// clean demo schedule (3 nodes within the jitter window, config on n0
// only): DESIGN §6 wants it within the election deadline + 100 ms. P0's
// deadline is election_timeout + jitter (< 200 ms) after its start.
func TestColdBootDemo(t *testing.T) {
	var over []time.Duration
	for seed := uint64(1); seed <= 200; seed++ {
		sc := Demo(seed)
		rep, f := NewWorld(sc, nil).Run()
		if f != nil {
			t.Fatal(f.Error())
		}
		if rep.FirstConverged < 0 {
			t.Fatalf("seed %d: never converged", seed)
		}
		// Time past the latest possible P0 deadline (start + 2000 + 199 ms).
		o := rep.FirstConverged - sc.Start[0] - 2199*time.Millisecond
		over = append(over, o)
		if o > 100*time.Millisecond {
			t.Errorf("seed %d: converged %v after P0's latest deadline (> 100 ms)", seed, o)
		}
	}
	t.Logf("cold boot, time past P0's latest election deadline: %s", quantiles(over))
}
