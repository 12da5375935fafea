package sim

import (
	"fmt"
	"strconv"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// The handle checker (S8): claim handles and job ids name one history.
// Judged on the client history alone (every acknowledged reply, as it
// reaches its client), in both modes, on every schedule:
//
//   - a claim reply's handles name the reply's own record: the claim stamp
//     carries the reply's LSN;
//   - no two claim replies ever hand out the same handle (id, attempt,
//     claim stamp);
//   - an ack, ack-batch item, heartbeat, retry or fail answered OK names a
//     handle some claim reply handed out: one that reached its client, or
//     one a node sent that arrived after its client gave up (the workload
//     forges handles, and a forged one can be the real handle of a claim
//     whose reply came late: seed 905552), or one that may be the real
//     handle of a claim whose reply was never sent (unknowable, below);
//   - no job id is ever shown with two payloads.
//
// The one excuse is the documented residual of seed mode: two primaries in
// one term (two partitioned nodes promoting into the same term, or a
// wiped disk that forgot its term) write two histories with the same
// record positions and the same id range. The checker records every
// (node, incarnation) it saw as primary of each term, and a reuse within a
// term that had two is counted, not failed. A job id's term is its high
// bits (sm.TermIDBits: the id scheme docs/replication.md documents).

type handleCheck struct {
	handed map[queue.Handle]handout // every handle a claim reply handed out
	sent   map[queue.Handle]bool    // every handle in a claim reply the nodes sent, delivered in time or not
	// answered: the record (term, LSN) of every write a node answered OK,
	// delivered in time or not.
	answered map[queue.ClaimStamp]bool
	idOwner  map[uint64]handout   // job id -> the first payload shown with it
	primOf   map[uint64][]nodeInc // term -> the (node, incarnation)s seen primary in it
	excused  int                  // reuses excused by a term with two primaries
}

type handout struct {
	payload string
	call    uint64
	node    int
}

type nodeInc struct{ node, inc int }

// noteTermPrimary runs after every step of nd: it records nd as primary of
// its term.
func (w *World) noteTermPrimary(nd *simNode) {
	hc := &w.hc
	if hc.primOf == nil {
		hc.primOf = map[uint64][]nodeInc{}
	}
	if nd.node.Role() != sm.RolePrimary {
		return
	}
	t, me := nd.node.Term(), nodeInc{nd.id, nd.inc}
	for _, x := range hc.primOf[t] {
		if x == me {
			return
		}
	}
	hc.primOf[t] = append(hc.primOf[t], me)
}

// twoPrimaries reports whether two primaries were seen in term t.
func (hc *handleCheck) twoPrimaries(t uint64) bool { return len(hc.primOf[t]) > 1 }

// handleViolation fails the schedule, unless two primaries shared term.
func (w *World) handleViolation(term uint64, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if w.hc.twoPrimaries(term) {
		w.hc.excused++
		w.tr.line(w.now, -1, fmt.Sprintf("S8 excused (term %d had two primaries, the documented residual of seed mode): %s", term, msg))
		return
	}
	w.violate("S8", "%s", msg)
}

// checkBatchIDs: an enqueue batch's reply names, in IDs, the jobs its
// Jobs show, one per payload in order (the API answers with IDs alone).
func (w *World) checkBatchIDs(c *call) {
	ids, jobs := c.rep.IDs, c.rep.Jobs
	if len(ids) != len(c.req.Payloads) || len(jobs) != len(ids) {
		w.violate("S8", "enqueue batch reply to #%d from n%d: %d ids and %d jobs for %d payloads", c.id, c.node, len(ids), len(jobs), len(c.req.Payloads))
		return
	}
	for i, j := range jobs {
		if ids[i] != j.ID {
			w.violate("S8", "enqueue batch reply to #%d from n%d names job %d by id but shows job %d at %d", c.id, c.node, ids[i], j.ID, i)
			return
		}
	}
}

// checkHandleReply judges an acknowledged reply c (called from observe).
func (w *World) checkHandleReply(c *call) {
	hc := &w.hc
	if hc.handed == nil {
		hc.handed, hc.idOwner = map[queue.Handle]handout{}, map[uint64]handout{}
	}
	here := func(p []byte) handout { return handout{payload: string(p), call: c.id, node: c.node} }
	if c.req.Kind == sm.JobEnqueueBatch {
		w.checkBatchIDs(c)
	}
	for _, j := range c.rep.Jobs {
		if o, ok := hc.idOwner[j.ID]; !ok {
			hc.idOwner[j.ID] = here(j.Payload)
		} else if o.payload != string(j.Payload) {
			w.handleViolation(j.ID>>sm.TermIDBits, "job id %d was shown with payload %s (reply to #%d from n%d), then with %s (reply to #%d from n%d)",
				j.ID, o.payload, o.call, o.node, j.Payload, c.id, c.node)
		}
		if c.req.Kind != sm.JobClaim {
			continue
		}
		h := j.Handle()
		if h.Claim.LSN != c.rep.LSN {
			w.violate("S8", "claim reply to #%d from n%d (lsn %d) hands out %s, whose claim stamp names another record", c.id, c.node, c.rep.LSN, fmtHandle(h))
		}
		if o, dup := hc.handed[h]; dup {
			w.handleViolation(h.Claim.Term, "handle %s was handed out twice: to payload %s (reply to #%d from n%d) and to %s (reply to #%d from n%d)",
				fmtHandle(h), o.payload, o.call, o.node, j.Payload, c.id, c.node)
			continue
		}
		hc.handed[h] = here(j.Payload)
	}
	okOp := func(h queue.Handle, ok bool) {
		if _, known := hc.handed[h]; ok && !known && !hc.sent[h] {
			if w.unknowable(h) {
				w.tr.line(w.now, -1, fmt.Sprintf("S8 unknowable: %s of handle %s answered OK (#%d from n%d) may name a claim whose reply was never sent", c.req.Kind, fmtHandle(h), c.id, c.node))
				return
			}
			w.handleViolation(h.Claim.Term, "%s of handle %s answered OK (#%d from n%d), but no claim reply handed that handle out", c.req.Kind, fmtHandle(h), c.id, c.node)
		}
	}
	switch c.req.Kind {
	case sm.JobAck, sm.JobHeartbeat, sm.JobRetry, sm.JobFail:
		okOp(c.req.Handle, c.rep.OK)
	case sm.JobAckBatch, sm.JobClaim: // a claim's Handles: the acks it carries
		for i, h := range c.req.Handles {
			okOp(h, i < len(c.rep.OKs) && c.rep.OKs[i])
		}
	}
}

// unknowable reports whether h, which no claim reply the nodes sent
// handed out, may still be the real handle of a claim whose reply was
// never sent: a claim sent to the primary of h's term got no reply, and
// no answered write names the record h's stamp names. A claim record
// names no jobs (replay decides them), so the client history cannot say
// which handles such a claim made (seed 804879: a primary replicated a
// claim and was killed before it replied; a forged retry named that
// claim's handle exactly, and the new primary rightly took it). A node
// that ignored stamps would still be caught whenever a forged stamp names
// an answered write's record.
func (w *World) unknowable(h queue.Handle) bool {
	if w.hc.answered[h.Claim] {
		return false
	}
	for _, c := range w.wl.calls {
		if c.req.Kind == sm.JobClaim && !c.replied && c.term == h.Claim.Term {
			return true
		}
	}
	return false
}

// noteSent records, as node nd sends reply r to c and before it is known
// whether it reaches its client in time, the record an answered write
// names and the handles a claim reply hands out.
func (hc *handleCheck) noteSent(nd *simNode, c *call, r sm.Reply) {
	if r.Status != sm.StatusOK {
		return
	}
	if !c.req.Kind.ReadOnly() && r.LSN > 0 {
		if hc.answered == nil {
			hc.answered = map[queue.ClaimStamp]bool{}
		}
		hc.answered[queue.ClaimStamp{Term: nd.node.Term(), LSN: r.LSN}] = true
	}
	if c.req.Kind != sm.JobClaim {
		return
	}
	if hc.sent == nil {
		hc.sent = map[queue.Handle]bool{}
	}
	for _, j := range r.Jobs {
		hc.sent[j.Handle()] = true
	}
}

// fmtHandle is a handle as xcecli prints it, ID:ATTEMPT:TERM.LSN.
func fmtHandle(h queue.Handle) string { return string(appendHandle(nil, h)) }

// appendHandle appends fmtHandle(h).
func appendHandle(b []byte, h queue.Handle) []byte {
	b = strconv.AppendUint(b, h.ID, 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(h.Attempt), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, h.Claim.Term, 10)
	b = append(b, '.')
	return strconv.AppendUint(b, h.Claim.LSN, 10)
}
