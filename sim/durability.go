package sim

import (
	"fmt"
	"strconv"
	"time"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// The durability checker (S5) keeps its own reference: only what clients
// were told — never sm's apply path or its WAL. A job is known by its
// payload (unique per enqueue), so a lost job cannot hide behind a reused
// id. It holds the cluster to three rules:
//
//   - every job of an acknowledged enqueue exists, unless an operation that
//     could remove it was issued with an acknowledged or unknown outcome
//     (ack, ack-batch, cancel of its id; or it may have died — fail, retry,
//     attempts used up, expiry — in a queue whose retention purges dead
//     jobs);
//   - a job whose ack was acknowledged never exists again;
//   - a job id belongs to one payload, and a payload to one id.
//
// In quorum mode any violation is S5. In seed mode (DESIGN §4.4) the loss
// is what the mode trades for availability: it is counted in the report.
// A disk wipe (a replaced disk: amnesia) excuses loss in either mode.

const finalBound = 30 * time.Second // restart of every node -> a primary serving its recovered job state

type ledger struct {
	idKey   map[uint64]string        // job id -> the payload first seen with it
	keyID   map[string]uint64        // payload -> its job id
	ackedAt map[string]time.Duration // payload -> when an ack of it was acknowledged
	lost    map[string]bool          // lost writes counted, by payload (or id)
	acked   int
	wiped   bool // some disk was wiped: amnesia excuses loss
}

func newLedger() ledger {
	return ledger{idKey: map[uint64]string{}, keyID: map[string]uint64{}, ackedAt: map[string]time.Duration{}, lost: map[string]bool{}}
}

// strict reports whether any loss of an acknowledged write is a violation.
func (w *World) strict() bool { return !w.sc.SeedMode && !w.wl.led.wiped }

// loss records the loss of an acknowledged write, once per key.
func (w *World) loss(key, format string, args ...any) {
	led := &w.wl.led
	if led.lost[key] {
		return
	}
	led.lost[key] = true
	msg := fmt.Sprintf(format, args...)
	if w.strict() {
		w.violate("S5", "acknowledged write lost: %s", msg)
		return
	}
	why := "seed mode"
	if led.wiped {
		why = "after a disk wipe"
	}
	w.tr.line(w.now, -1, "acknowledged write lost ("+why+", counted): "+msg)
}

// noteJob checks a job in an acknowledged reply against what earlier
// replies said: one payload per id, one id per payload, and no job alive
// after its ack was acknowledged (to a request sent after that).
// A deduplicated submit's job (dedup) is an earlier submit's, shown as
// it is now or, once gone, by id and payload alone: it is not alive.
func (w *World) noteJob(c *call, j queue.Job, dedup bool) {
	led := &w.wl.led
	key := string(j.Payload)
	if k, ok := led.idKey[j.ID]; !ok {
		led.idKey[j.ID] = key
	} else if k != key {
		w.loss("id:"+strconv.FormatUint(j.ID, 10), "job id %d was handed to payload %s, and then to %s (reply to #%d from n%d)", j.ID, k, key, c.id, c.node)
	}
	if isScheduled(key) {
		return // a schedule fires many jobs with one payload
	}
	if id, ok := led.keyID[key]; !ok {
		led.keyID[key] = j.ID
	} else if id != j.ID {
		w.loss(key, "payload %s was job %d, then job %d (reply to #%d from n%d)", key, id, j.ID, c.id, c.node)
	}
	if at, ok := led.ackedAt[key]; ok && c.sent > at && !dedup {
		w.loss(key, "job %d (%s) was acknowledged as acked at %v, yet #%d sent at %v to n%d returned it %s", j.ID, key, at, c.id, c.sent, c.node, j.State)
	}
}

// noteAcked: an ack of handle h was acknowledged (ok: it succeeded).
func (w *World) noteAcked(c *call, h queue.Handle, ok bool) {
	led := &w.wl.led
	if !ok {
		return
	}
	if key, known := led.idKey[h.ID]; known && !isScheduled(key) {
		if _, dup := led.ackedAt[key]; !dup {
			led.ackedAt[key] = c.done
		}
	}
}

// excuses is what the history allows to have removed a job.
type excuses struct {
	removable map[uint64]bool   // an ack/ack-batch/cancel naming the id may have succeeded
	mayDie    map[uint64]bool   // fail/retry naming the id may have succeeded, or it expires
	attempts  map[uint64]uint32 // highest attempt count a claim reply showed
	unknown   map[string]int    // claims of unknown outcome, per queue
}

// acks: the handles c acks (an ack batch's, or a claim's) may be gone.
func (x excuses) acks(c *call) {
	for i, h := range c.req.Handles {
		if c.mayApply() && (c.out != outOK || i < len(c.rep.OKs) && c.rep.OKs[i]) {
			x.removable[h.ID] = true
		}
	}
}

func (w *World) excuses() excuses {
	x := excuses{removable: map[uint64]bool{}, mayDie: map[uint64]bool{}, attempts: map[uint64]uint32{}, unknown: map[string]int{}}
	for _, c := range w.wl.calls {
		switch c.req.Kind {
		case sm.JobAck:
			if c.okAt() {
				x.removable[c.req.Handle.ID] = true
			}
		case sm.JobAckBatch:
			x.acks(c)
		case sm.JobCancel:
			if c.okAt() {
				x.removable[c.req.ID] = true
			}
		case sm.JobRetry, sm.JobFail:
			if c.okAt() {
				x.mayDie[c.req.Handle.ID] = true
			}
		case sm.JobClaim:
			x.acks(c) // the acks it carries
			switch {
			case c.out == outOK:
				for _, j := range c.rep.Jobs {
					x.attempts[j.ID] = max(x.attempts[j.ID], j.Attempts)
				}
			case c.mayApply():
				x.unknown[c.req.Queue]++
			}
		case sm.JobEnqueue, sm.JobEnqueueBatch:
			if c.out == outOK && c.req.Expires > 0 {
				for _, j := range c.rep.Jobs {
					x.mayDie[j.ID] = true
				}
			}
		}
	}
	return x
}

// excused reports whether job j (as its enqueue reply showed it) may have
// been removed: by an operation naming it, or by a purge after it died in
// a queue with retention (a claim lapsing with its attempts used up kills
// it too, and claims of unknown outcome may have used them).
func (x excuses) excused(j queue.Job) bool {
	if x.removable[j.ID] {
		return true
	}
	if j.Stamps.DeadLetterRetentionS == 0 {
		return false // dead jobs are kept forever
	}
	return x.mayDie[j.ID] || x.attempts[j.ID]+uint32(x.unknown[j.Queue]) >= j.Stamps.MaxAttempts
}

// checkDurable holds the job state a primary serves (its recovered or
// live jobs) to every write acknowledged so far.
func (w *World) checkDurable(jobs []queue.Job, where string) {
	led := &w.wl.led
	st := make(map[string]queue.Job, len(jobs))
	for _, j := range jobs {
		key := string(j.Payload)
		if o, dup := st[key]; dup && !isScheduled(key) {
			w.loss(key, "payload %s is held by two jobs, %d and %d, in %s: one enqueue applied twice", key, o.ID, j.ID, where)
		}
		st[key] = j
		if k, ok := led.idKey[j.ID]; ok && k != key {
			w.loss("id:"+strconv.FormatUint(j.ID, 10), "job id %d belongs to payload %s, but %s holds it with %s", j.ID, k, where, key)
		}
	}
	x := w.excuses()
	acked := 0
	for _, c := range w.wl.calls {
		if c.out != outOK || w.fail != nil {
			continue
		}
		switch c.req.Kind {
		case sm.JobEnqueue, sm.JobEnqueueBatch:
			for _, j := range c.rep.Jobs {
				acked++
				key := string(j.Payload)
				if got, ok := st[key]; ok {
					if got.ID != j.ID {
						w.loss(key, "job %s was acknowledged as job %d by #%d but %s holds it as job %d", key, j.ID, c.id, where, got.ID)
					}
					continue
				}
				if !x.excused(j) {
					w.loss(key, "job %d (%s, %s) acknowledged to #%d by n%d at %v is missing from %s, and no operation that could remove it was issued", j.ID, key, j.Queue, c.id, c.node, c.done, where)
				}
			}
		case sm.JobAck:
			if c.rep.OK {
				acked++
				w.checkGone(c, c.req.Handle, st, where)
			}
		case sm.JobAckBatch, sm.JobClaim:
			for i, h := range c.req.Handles {
				if i < len(c.rep.OKs) && c.rep.OKs[i] {
					acked++
					w.checkGone(c, h, st, where)
				}
			}
		}
	}
	led.acked = acked
	w.tr.line(w.now, -1, fmt.Sprintf("S5 durability check of %s: %d jobs, %d acknowledged writes, %d lost so far", where, len(jobs), acked, len(led.lost)))
}

// checkGone: the job of an acknowledged ack must not exist.
func (w *World) checkGone(c *call, h queue.Handle, st map[string]queue.Job, where string) {
	key, known := w.wl.led.idKey[h.ID]
	if !known || isScheduled(key) {
		return // (a schedule's jobs share one payload: st holds only one)
	}
	if j, ok := st[key]; ok {
		w.loss(key, "job %d (%s) was acknowledged as acked to #%d at %v but is %s again in %s", h.ID, key, c.id, c.done, j.State, where)
	}
}

// finalRestart stops the clients, restarts every node without faults —
// all processes killed, or every machine's power cut — and requires one
// primary to recover and serve within finalBound; then the state it
// recovered must hold every acknowledged write.
func (w *World) finalRestart() {
	if w.rep.NoConfigLeft {
		return // nothing can serve (L3); every job is gone with the configs
	}
	wl := w.wl
	wl.stopped = true
	w.runUntil(w.now+clientTimeout+time.Second, wl.idle)
	if w.fail != nil {
		return
	}
	w.checkLogsSynced()
	if w.fail != nil {
		return
	}
	power := w.sc.FinalPowerLoss
	why := "final restart of every node"
	for _, nd := range w.nodes {
		nd.restart = true // started below, all together
		if nd.up {
			w.kill(nd.id, why, power)
		} else if power {
			nd.disk.Crash(w.rng)
			w.durableChanged(nd)
		}
	}
	start := w.now
	for _, nd := range w.nodes {
		w.push(event{at: w.now + time.Duration(w.rng.IntN(200))*time.Millisecond, kind: evStart, node: nd.id})
	}
	p := -1
	w.runUntil(w.now+finalBound, func() bool { p = w.servingPrimary(); return p >= 0 })
	if w.fail != nil {
		return
	}
	if p < 0 && w.quorumStuck() {
		w.tr.line(w.now, -1, "quorum mode: no config holder has a log as fresh as a majority's — unavailable by design")
		return
	}
	if p < 0 && w.rotStranded() {
		w.tr.line(w.now, -1, "the only config holders are lost to bit rot: unavailable until an operator restores them")
		return
	}
	if p < 0 {
		w.violate("L1", "after a fault-free restart of every node (power loss: %v) no primary recovered its job state within %v: %s", power, finalBound, w.describe())
		return
	}
	w.rep.RestartTime = w.now - start
	q, _, _ := w.nodes[p].node.JobState()
	final := q.Export().Jobs
	w.final = final
	w.checkDurable(final, fmt.Sprintf("primary n%d after every node restarted", p))
	w.checkKeyedState(final, fmt.Sprintf("primary n%d after every node restarted", p))
	if w.fail == nil {
		w.checkHistory(final, w.now)
	}
}

// servingPrimary returns the one live primary that has recovered its job
// state (so it serves clients), or -1.
func (w *World) servingPrimary() int {
	p := -1
	for _, nd := range w.nodes {
		if !nd.up || nd.node.Role() != sm.RolePrimary {
			continue
		}
		if p >= 0 {
			return -1
		}
		p = nd.id
	}
	if p < 0 {
		return -1
	}
	if _, _, rec := w.nodes[p].node.JobState(); !rec {
		return -1
	}
	return p
}
