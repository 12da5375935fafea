package sim

import (
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// checkSweepDue: S6 sweep schedule (issue 21 item 7d) — when a primary's
// maintenance tick has run, nothing a sweep would change is left in its
// live state: no processing job whose claim lapsed with its attempts
// exhausted, no pending or processing job past its ExpiresAt, no dead job
// past its retention. The sweep record is applied in the step that logs
// it, so after the tick's step the state must show none of them.
// Computed from the jobs' fields, independently of queue.SweepDue (whose
// answer decides whether the sweep runs): nothing else compares when a
// sweep is due with what it would change. The node's clock for the sweep
// is its wall clock or the last record's time, whichever is later; the
// check uses the wall clock, never later than that, so every job it finds
// was due for the node too.
func (w *World) checkSweepDue(nd *simNode, in sm.Input) {
	if tf, ok := in.(sm.TimerFired); !ok || tf.Kind != sm.TimerMaintenance || !nd.up || nd.node.Role() != sm.RolePrimary || nd.node.HandingOver() {
		return // a primary handing over writes nothing: its sweeps wait for the end
	}
	q, _, recovered := nd.node.JobState()
	if q == nil || !recovered {
		return
	}
	now := w.wall(nd.id) / 1e9
	for j := range q.Jobs() { // List's order, no copy of each job
		var why string
		switch {
		case j.State == queue.Processing && j.Attempts >= j.Stamps.MaxAttempts && j.ClaimExpiresAt <= now:
			why = "its claim lapsed with its attempts exhausted"
		case j.State != queue.Dead && j.ExpiresAt != 0 && j.ExpiresAt <= now:
			why = "it expired"
		case j.State == queue.Dead && j.Stamps.DeadLetterRetentionS != 0 && j.DiedAt+int64(j.Stamps.DeadLetterRetentionS) <= now:
			why = "it is dead past its retention"
		default:
			continue
		}
		w.violate("S6", "n%d ran its maintenance at %d without sweeping job %d (queue %s, %s): %s, so a sweep was due", nd.id, now, j.ID, j.Queue, j.State, why)
		return
	}
}
