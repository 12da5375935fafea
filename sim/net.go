package sim

import (
	"math/rand/v2"
	"time"
)

// link is one direction between two nodes.
type link struct {
	minDelay, maxDelay time.Duration
	loss, dup          float64
	blockedUntil       time.Duration // partition: dropped until then
	clogUntil          time.Duration // clog: held until then, then delivered
	faulty             bool          // loss or dup configured (not "clean")
	rate               float64       // bytes per second, 0 = unlimited (link.go)
	tx                 txQueue       // the sender's queue (link.go)
	lastAt             time.Duration // latest delivery scheduled with the faults off
}

// network is the simulated network: per-link delay (so messages reorder
// across links and, while faults are on, within one), loss, duplication,
// partitions, clogging.
type network struct {
	n     int
	links []link // n*n, index from*n+to
	rng   *rand.Rand
	// faultsOn gates loss/dup/partitions/clogs: off in the liveness phase.
	faultsOn bool
	// resets: the schedule resets connections, so every link is a queue
	// and deliveries carry their connection generation (link.go).
	resets bool
	rated  bool // some link has a rate
}

func newNetwork(n int, rng *rand.Rand) *network {
	return &network{n: n, links: make([]link, n*n), rng: rng, faultsOn: true}
}

func (nw *network) l(from, to int) *link { return &nw.links[from*nw.n+to] }

// deliveries returns the sim times at which a message sent now arrives,
// the first n of at (none if lost or blocked, two if duplicated): an
// array, not a slice, so that no message allocates for it.
func (nw *network) deliveries(now time.Duration, from, to int) (at [2]time.Duration, n int) {
	l := nw.l(from, to)
	if nw.faultsOn {
		if now < l.blockedUntil {
			return at, 0
		}
		if l.loss > 0 && nw.rng.Float64() < l.loss {
			return at, 0
		}
	}
	at[0], n = nw.delivery(now, l)
	if n == 2 {
		at[1] = at[0] + l.maxDelay + time.Millisecond
	}
	return at, n
}

// delivery is deliveries past loss and partitions: when the message
// arrives, and 2 if it is duplicated.
func (nw *network) delivery(now time.Duration, l *link) (time.Duration, int) {
	at := now + l.minDelay
	if span := l.maxDelay - l.minDelay; span > 0 {
		at += time.Duration(nw.rng.Int64N(int64(span)))
	}
	if nw.faultsOn && at < l.clogUntil {
		at = l.clogUntil + l.minDelay
	}
	if nw.faultsOn && l.dup > 0 && nw.rng.Float64() < l.dup {
		return at, 2
	}
	if !nw.faultsOn {
		// Healed, a link is what TCP gives: in order (L4 relies on it).
		at = max(at, l.lastAt)
		l.lastAt = at
	}
	return at, 1
}

// clean reports whether a and b can talk reliably both ways right now:
// no partition, clog, loss or duplication on either direction, and
// neither sender's queue backlogged or redialling (link.go: a message
// sent now leaves within maxCleanBusy).
func (nw *network) clean(now time.Duration, a, b int) bool {
	la, lb := nw.l(a, b), nw.l(b, a)
	if !la.tx.idle(now) || !lb.tx.idle(now) {
		return false
	}
	if !nw.faultsOn {
		return true
	}
	for _, l := range [2]*link{la, lb} {
		if now < l.blockedUntil || now < l.clogUntil || l.faulty {
			return false
		}
	}
	return true
}

// maxDelay is the largest configured one-way delay.
func (nw *network) maxDelay() time.Duration {
	var m time.Duration
	for i := range nw.links {
		m = max(m, nw.links[i].maxDelay)
	}
	return m
}

func (nw *network) block(from, to int, until time.Duration) {
	l := nw.l(from, to)
	l.blockedUntil = max(l.blockedUntil, until)
}

func (nw *network) clog(from, to int, until time.Duration) {
	l := nw.l(from, to)
	l.clogUntil = max(l.clogUntil, until)
}

// heal ends every partition and clog and stops loss and duplication.
func (nw *network) heal() { nw.faultsOn = false }
