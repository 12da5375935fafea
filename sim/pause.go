package sim

import (
	"fmt"
	"time"
)

// pause stops node i's process for d (SIGSTOP): nothing it would receive
// — messages, timer fires, I/O completions, client requests — reaches it
// until SIGCONT, then everything arrives in one burst in the original
// order, and its monotonic clock has jumped by d. Its peers see a silent
// node; it sees a world that moved on while it held its role.
func (w *World) pause(i int, d time.Duration) {
	nd := w.nodes[i]
	if !nd.up || w.liveness {
		return
	}
	until := w.now + d
	if until <= nd.pausedUntil {
		return
	}
	nd.pausedUntil = until
	w.tr.line(w.now, i, fmt.Sprintf("SIGSTOP for %v", d))
	w.push(event{at: until, kind: evResume, node: i, inc: nd.inc})
}

// hold re-queues an event for a paused node at its SIGCONT time; it
// reports whether it did. Re-queued events keep their relative order
// (they are popped in order and pushed with rising sequence numbers).
func (w *World) hold(e event) bool {
	nd := w.nodes[e.node]
	if w.now >= nd.pausedUntil {
		return false
	}
	e.at = nd.pausedUntil
	w.push(e)
	return true
}

// paused reports whether node i is stopped right now (it can neither send
// nor receive: S4 treats it as partitioned).
func (w *World) paused(i int) bool { return w.now < w.nodes[i].pausedUntil }

// powerLossAll cuts the power of every machine at once: each live process
// dies and every disk, live or not, keeps only an allowed crash state.
func (w *World) powerLossAll() {
	if w.liveness {
		return
	}
	w.tr.line(w.now, -1, "power loss of every node")
	for _, nd := range w.nodes {
		if nd.up {
			w.kill(nd.id, "power loss of every node", true)
			continue
		}
		nd.disk.Crash(w.rng)
		w.durableChanged(nd)
	}
}
