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
