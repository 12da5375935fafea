package sim

import (
	"fmt"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// pause stops node i's process for d (SIGSTOP): nothing it would receive
// — messages, timer fires, I/O completions, client requests — reaches it
// until SIGCONT, then everything arrives in one burst, and its monotonic
// clock has jumped by d. Its peers see a silent node; it sees a world
// that moved on while it held its role.
//
// The burst's order is the runner's: each connection's reader wakes when
// the process does and its loop selects among ready channels at random,
// so each source (a client's connection, a peer's, the timers, the I/O
// worker) keeps its order but the sources interleave in any way. Half the
// pauses (every targeted one: shuffled) deliver the burst source by
// source in a random order of sources, half of those with the clients'
// connections first; the others in the original order. A paused primary
// is probed with reads (probeReads). A shuffled burst lets a deposed
// primary answer a client that asked it during the pause before its first
// timer tells it that it lost its majority and before the new primary's
// heartbeat deposes it: the stale read a read-index round must prevent
// (judged by S4 on answers).
func (w *World) pause(i int, d time.Duration, shuffled bool) {
	nd := w.nodes[i]
	if !nd.up || w.liveness {
		return
	}
	until := w.now + d
	if until <= nd.pausedUntil {
		return
	}
	nd.pausedUntil = until
	order := "in the original order"
	nd.burst = nil
	if shuffled || w.rng.IntN(2) == 0 {
		nd.burst = &burstOrder{rank: map[burstSource]uint64{}}
		order = "source by source, the sources in a random order"
		if w.rng.IntN(2) == 0 {
			nd.burst.clientsFirst = true
			order = "source by source, the clients' connections first"
		}
	}
	w.tr.line(w.now, i, fmt.Sprintf("SIGSTOP for %v (held inputs delivered %s)", d, order))
	w.push(event{at: until, kind: evResume, node: i, inc: nd.inc})
	if nd.node.Role() == sm.RolePrimary {
		w.probeReads(i, d) // held with it: judged when its burst answers them
	}
}

// burstOrder ranks a pause's sources: the first event held from a source
// draws its rank, which goes in the top bits of the sequence number of
// every event held from it (events at one time run in sequence order).
// With clientsFirst (half the shuffled pauses) the clients' connections
// draw ranks below every other source's: the burst the read index guards
// against, made likely.
type burstOrder struct {
	rank         map[burstSource]uint64
	clientsFirst bool
}

// burstSource is where a held event comes from: a client's connection, a
// peer's, the timers or the I/O worker.
type burstSource struct {
	kind evKind
	from int // the client or the peer
}

func sourceOf(w *World, e event) burstSource {
	switch e.kind {
	case evClientReq:
		return burstSource{kind: evClientReq, from: w.wl.calls[e.call-1].client}
	case evIO:
		return burstSource{kind: evIO}
	}
	if r, ok := e.in.(sm.Recv); ok {
		return burstSource{kind: evInput, from: r.From}
	}
	return burstSource{kind: evInput, from: -1} // timer fires
}

// rankShift leaves the low bits of a sequence number to the world's
// counter; ranks are below 2^23 (two sources that draw the same rank
// interleave in their original order: still a legal burst).
const rankShift = 40

// hold re-queues an event for a paused node at its SIGCONT time; it
// reports whether it did. Re-queued events of one source keep their
// relative order (they are popped in order and pushed with rising
// sequence numbers); in a shuffled burst the sources go by rank.
func (w *World) hold(e event) bool {
	nd := w.nodes[e.node]
	if w.now >= nd.pausedUntil {
		return false
	}
	e.at = nd.pausedUntil
	w.seq++
	e.seq = w.seq
	if b := nd.burst; b != nil {
		src := sourceOf(w, e)
		r, ok := b.rank[src]
		if !ok {
			r = uint64(1 + w.rng.IntN(1<<22))
			if b.clientsFirst && src.kind != evClientReq {
				r += 1 << 22
			}
			r <<= rankShift
			b.rank[src] = r
		}
		e.seq |= r
	}
	w.q.push(e)
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
