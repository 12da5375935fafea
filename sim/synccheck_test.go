package sim

import (
	"fmt"
	"slices"
	"testing"

	"github.com/xce-hpc/xce/sm"
)

// TestSyncSourceIsThePrimary: a standby must take records only from the
// primary it follows. The random schedules never deliver records from
// another node to a standby in a sync (0 in 1,000 schedules, seed mode's
// split brains included: the deposed primary learns of the new one before
// it writes again), so the schedule is constructed: a seed-mode cluster
// of three, and once it has converged, one batch its primary streams to a
// standby arrives first from the other standby, with the epoch and LSNs
// the standby expects (what a second primary of seed mode in the same
// term, which numbers its syncs alike, could send). The standby must drop it; one that
// accepts records from any peer whose epoch matches appends it, and the
// sync-source check (synccheck.go) fails the run.
func TestSyncSourceIsThePrimary(t *testing.T) {
	sc := Demo(7)
	sc.SeedMode = true
	w := NewWorld(sc, nil)
	spoofed := 0
	w.bf.spoof = func(from, to int, m sm.Msg) {
		if spoofed > 0 || m.Type != sm.MsgReplRecords || m.CatchUp || len(m.Bytes) == 0 || w.primaryOf(-1) != from {
			return
		}
		other := 3 - from - to
		o := w.nodes[other].node
		c := m
		c.Bytes = slices.Clone(m.Bytes) // its own bytes: the checker names batches by them
		c.Role, c.Term, c.Priority = o.Role(), o.Term(), other
		w.tr.line(w.now, -1, fmt.Sprintf("test: n%d -> n%d's records also arrive from n%d", from, to, other))
		w.push(event{at: w.now, kind: evInput, node: to, inc: w.nodes[to].inc, in: sm.Recv{From: other, Msg: c}})
		spoofed++
	}
	if _, f := w.Run(); f != nil {
		t.Fatal(f)
	}
	if spoofed == 0 {
		t.Fatal("the primary streamed no records to spoof")
	}
}
