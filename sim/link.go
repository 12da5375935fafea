package sim

import (
	"fmt"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// The daemon's transport (adapters/transport), modelled per directed link:
//
//   - One writer goroutine per peer sends queued messages one at a time, so
//     a message leaves only when the one before it has been written: at a
//     link's rate (bytes per second, drawn per link) a 1 MiB snapshot holds
//     the heartbeats queued behind it, and latency grows with size.
//   - The queue is bounded (transport.DefaultQueueLen, 64); when it is full
//     the OLDEST queued message is dropped (transport.Send).
//   - A connection reset loses what was on that connection — the message
//     being written and everything written but not yet received — while the
//     queue survives; the writer redials (a TCP and TLS handshake, a few
//     round trips) before it sends the next one. A dial that fails (the
//     peer partitioned: DialTimeout; its process down: refused) loses the
//     message the writer took for it, and the next message dials again.
//   - A process that dies takes its queues with it.
//
// Links without a rate and without resets keep the plain model (net.go):
// each message leaves at once with its own delay.

// sendQueueLen is transport.DefaultQueueLen (TestSendQueueLenMatchesTransport).
const sendQueueLen = 64

// msgOverhead approximates a message's encoded size without its variable
// fields (envelope, header, integers).
const msgOverhead = 96

func msgSize(m sm.Msg) int {
	return msgOverhead + len(m.Error) + len(m.SHA256) + len(m.Bytes)
}

// LinkReset is a connection reset on the link From -> To at time At.
type LinkReset struct {
	At       time.Duration
	From, To int
}

// txQueue is the sender's side of one link.
type txQueue struct {
	busyUntil time.Duration // the writer finishes the current message then
	downUntil time.Duration // redialling after a reset until then
	waiting   []sm.Msg      // queued behind the writer, oldest first
	woken     bool          // an evLinkFree is queued
	gen       uint32        // connection generation: a reset bumps it
	redial    bool          // the next message first dials a new connection
	dropped   int           // messages dropped by the full queue
}

// maxCleanBusy is how long a message may still be on the wire ahead of a
// new one on a link S4 counts as clean (checkGlobal adds it to its bound
// when links have rates): a heartbeat is never held behind more.
const maxCleanBusy = 10 * time.Millisecond

// idle reports whether a message queued now leaves within maxCleanBusy.
func (q *txQueue) idle(now time.Duration) bool {
	return len(q.waiting) == 0 && q.downUntil <= now && q.busyUntil <= now+maxCleanBusy
}

// shaped reports whether link from->to is modelled as a queue.
func (nw *network) shaped(from, to int) bool {
	return nw.l(from, to).rate > 0 || nw.resets
}

// sendMsg hands m from node from to the network towards node to.
func (w *World) sendMsg(from, to int, m sm.Msg) {
	w.noteRound(from, to, m)
	m = w.inFlight(from, to, m) // corruption, live conf/ rot (corrupt.go)
	nw := w.net
	if !nw.shaped(from, to) {
		at, n := nw.deliveries(w.now, from, to)
		for _, at := range at[:n] {
			w.push(event{at: at, kind: evInput, node: to, inc: w.nodes[to].inc, in: sm.Recv{From: from, Msg: m}})
		}
		return
	}
	q := &nw.l(from, to).tx
	if len(q.waiting) == 0 && q.busyUntil <= w.now && q.downUntil <= w.now && !q.redial {
		w.transmit(from, to, m)
		return
	}
	limit := sendQueueLen
	if w.sc.SendQueue > 0 && nw.faultsOn {
		limit = w.sc.SendQueue // BUGGIFY, while the faults are on
	}
	if len(q.waiting) >= limit {
		q.waiting = q.waiting[1:]
		q.dropped++
		if q.dropped&(q.dropped-1) == 0 { // the daemon logs at 1, 2, 4, 8, ...
			w.tr.line(w.now, from, fmt.Sprintf("send queue to n%d full: dropped %d messages so far (oldest first)", to, q.dropped))
		}
	}
	q.waiting = append(q.waiting, m)
	w.wakeLink(from, to)
}

// transmit writes m on the link now: it arrives after its transmission
// time at the link's rate plus the link's delay, on the current connection.
func (w *World) transmit(from, to int, m sm.Msg) {
	l := w.net.l(from, to)
	done := w.now
	if l.rate > 0 {
		done += time.Duration(float64(msgSize(m)) / l.rate * float64(time.Second))
	}
	l.tx.busyUntil = done
	at, n := w.net.deliveries(done, from, to)
	for _, at := range at[:n] {
		w.push(event{at: at, kind: evInput, node: to, inc: w.nodes[to].inc, lgen: l.tx.gen, in: sm.Recv{From: from, Msg: m}})
	}
}

// wakeLink queues the writer's next turn if messages wait and none is queued.
func (w *World) wakeLink(from, to int) {
	q := &w.net.l(from, to).tx
	if q.woken || len(q.waiting) == 0 {
		return
	}
	q.woken = true
	w.push(event{at: max(w.now, q.busyUntil, q.downUntil), kind: evLinkFree, node: from, call: uint64(to)})
}

// linkFree: the writer of from->to is free; it sends the oldest waiting.
func (w *World) linkFree(from, to int) {
	q := &w.net.l(from, to).tx
	q.woken = false
	if len(q.waiting) == 0 {
		return
	}
	if t := max(q.busyUntil, q.downUntil); t > w.now {
		w.wakeLink(from, to)
		return
	}
	m := q.waiting[0]
	q.waiting[0] = sm.Msg{}
	q.waiting = q.waiting[1:]
	if q.redial {
		l := w.net.l(from, to)
		switch {
		case w.net.faultsOn && w.now < l.blockedUntil:
			// Partitioned: the connect times out (DialTimeout) and the
			// message the writer took for it is lost.
			q.downUntil = w.now + dialTimeout
			w.wakeLink(from, to)
			return
		case !w.nodes[to].up:
			// Refused: lost too, and the next message dials again.
			q.downUntil = w.now + 2*l.maxDelay + time.Millisecond
			w.wakeLink(from, to)
			return
		}
		q.redial = false
	}
	w.transmit(from, to, m)
	w.wakeLink(from, to)
}

// dialTimeout is transport.DefaultDialTimeout.
const dialTimeout = 500 * time.Millisecond

// resetLink is a connection reset of from->to: what is on the wire is
// lost, the writer redials, the queue waits.
func (w *World) resetLink(r LinkReset) {
	if w.liveness || r.From == r.To || r.From < 0 || r.To < 0 || r.From >= w.sc.Nodes || r.To >= w.sc.Nodes {
		return
	}
	l := w.net.l(r.From, r.To)
	l.tx.gen++
	l.tx.redial = true
	// Redial: TCP connect plus the TLS 1.3 handshake and the Hello.
	l.tx.downUntil = w.now + 3*(l.minDelay+l.maxDelay) + time.Millisecond
	l.tx.busyUntil = min(l.tx.busyUntil, w.now)
	w.tr.line(w.now, -1, fmt.Sprintf("connection reset n%d->n%d: messages on the wire lost, %d queued wait for the redial", r.From, r.To, len(l.tx.waiting)))
	w.wakeLink(r.From, r.To)
}

// stale reports whether a delivery was sent on a connection since reset.
func (w *World) stale(e event) bool {
	r, ok := e.in.(sm.Recv)
	return ok && w.net.resets && w.net.l(r.From, e.node).tx.gen != e.lgen
}

// senderGone drops the queues of a process that died.
func (nw *network) senderGone(from int) {
	for to := 0; to < nw.n; to++ {
		q := &nw.l(from, to).tx
		q.waiting, q.busyUntil, q.downUntil = nil, 0, 0
	}
}
