package sim

import (
	"flag"
	"testing"
)

var (
	jobSeedFlag      = flag.Uint64("jobseed", 0, "replay only this job-world schedule, printing its trace with -v")
	jobSchedulesFlag = flag.Int("jobschedules", 150, "job-world schedules TestJobs runs")
)

// TestJobs runs the durable-job-state simulation: one controller under a
// random client workload with crashes at every effect boundary, power
// loss and disk faults; S5 (prefix durability, at every recovery), S6
// (queue contract, every step), S7, and porcupine linearizability of the
// client history.
func TestJobs(t *testing.T) {
	if *jobSeedFlag != 0 {
		sc := GenerateJobs(*jobSeedFlag)
		t.Logf("job scenario: %+v", sc)
		w := NewJobWorld(sc, func(s string) { t.Log(s) })
		if f := w.Run(); f != nil {
			t.Fatal(f.Error())
		}
		return
	}
	fails, ops, events, routed := 0, 0, 0, 0
	for seed := uint64(1); seed <= uint64(*jobSchedulesFlag); seed++ {
		w := NewJobWorld(GenerateJobs(seed), nil)
		if f := w.Run(); f != nil {
			fails++
			if fails <= 5 {
				t.Error(f.Error())
			}
		}
		ops += len(w.calls)
		events += w.Events
		routed += w.Routed
	}
	t.Logf("%d job schedules, %d failed; %d client operations, %d events, %d jobs routed to lost_and_found", *jobSchedulesFlag, fails, ops, events, routed)
}
