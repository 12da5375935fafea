package sim

import (
	"flag"
	"strings"
	"testing"

	"xce/adapters/transport"
)

var faultSeedsFlag = flag.Int("fault-seeds", 300, "schedules TestNewFaultsFire runs")

// TestSendQueueLenMatchesTransport: the simulated send queue has the
// daemon's bound.
func TestSendQueueLenMatchesTransport(t *testing.T) {
	if sendQueueLen != transport.DefaultQueueLen {
		t.Fatalf("sim send queue %d, transport.DefaultQueueLen %d", sendQueueLen, transport.DefaultQueueLen)
	}
}

// TestNewFaultsFire: over the first schedules of the default run, each
// fault of issue 7 B3 actually happens (and shows in the trace), and
// every schedule still passes.
func TestNewFaultsFire(t *testing.T) {
	marks := map[string]string{
		"fsyncgate":         "unsynced data was dropped",
		"short write":       "after a short write of",
		"garbage tail":      "garbage=",
		"hole":              "hole=",
		"data/ rot":         "bit rot in data/",
		"rot-lost node":     "lost: FATAL",
		"queue drop-oldest": "dropped",
		"connection reset":  "connection reset n",
		"torn tail cut":     "wal.torn-tail",
		"torn":              "torn=",
		"zeroed":            "zeroed=",
	}
	seen := map[string]int{}
	for seed := uint64(1); seed <= uint64(*faultSeedsFlag); seed++ {
		sc := Generate(seed)
		found := map[string]bool{}
		_, f := NewWorld(sc, func(line string) {
			for k, m := range marks {
				if !found[k] && strings.Contains(line, m) && (k != "queue drop-oldest" || strings.Contains(line, "send queue to")) {
					found[k] = true
				}
			}
		}).Run()
		if f != nil {
			t.Fatal(f)
		}
		for k := range found {
			seen[k]++
		}
	}
	for k := range marks {
		if seen[k] == 0 {
			t.Errorf("no schedule of %d shows %s (%q)", *faultSeedsFlag, k, marks[k])
		}
	}
	t.Logf("schedules showing each fault: %v", seen)
}
