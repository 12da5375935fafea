package sim

import (
	"slices"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// S4 judged on answers (quorum mode): a deposed primary answers nothing.
//
// The rule: every OK reply, to a write or a read, comes from a node that
// was primary of a term T during the step that emitted it, and T is at
// least every term that a majority of disks durably held (in data/term)
// before the request was sent. Once a majority has durably moved to a
// term K, no primary of a term below K can legitimately confirm anything
// that arrives later: its write needs durable acks from a majority in its
// term, its read needs a majority to echo a heartbeat round sent after the
// read arrived, and every majority now contains a node that refuses a
// lower term (terms are durable and never go back). A primary that still
// answers OK is serving from a history the new term may already have
// contradicted; porcupine judges the content of answers that do pass.
//
// It is judged on replies alone, so it is armed under message loss,
// duplication, partitions and pauses alike (the dual-primary bound in
// checkGlobal only counts time while links are clean). Waived after a
// disk wipe (a wiped node forgets its term) and in seed mode.

type preStep struct {
	role sm.Role
	term uint64
}

type termSince struct {
	at   time.Duration
	term uint64
}

type answerCheck struct {
	durTerm []uint64    // per node: the highest term its data/term durably held
	hist    []termSince // the majority's durable term, from at on
	pre     []preStep   // per node: role and term when its current step began
}

func (a *answerCheck) init(n int) {
	if a.durTerm == nil {
		a.durTerm = make([]uint64, n)
		a.pre = make([]preStep, n)
	}
}

// beforeStep is the hook at the start of every step of nd.
func (w *World) beforeStep(nd *simNode) {
	w.ans.init(len(w.nodes))
	w.ans.pre[nd.id] = preStep{role: nd.node.Role(), term: nd.node.Term()}
}

// noteDurableTerm re-reads nd's durable data/term (at every durable change)
// and advances the majority's durable term.
func (w *World) noteDurableTerm(nd *simNode) {
	a := &w.ans
	a.init(len(w.nodes))
	b, ok := nd.disk.DurableData(sm.TermPath)
	if !ok {
		return
	}
	t, _, err := nd.termFile.parse(b)
	if err != nil || t <= a.durTerm[nd.id] {
		return // unreadable: checkTermClaim reports it at the next send
	}
	a.durTerm[nd.id] = t
	ts := slices.Clone(a.durTerm)
	slices.Sort(ts)
	// ts[len-1-n/2] is the highest term held by at least n/2+1 disks.
	m := ts[len(ts)-1-len(ts)/2]
	if len(a.hist) == 0 || m > a.hist[len(a.hist)-1].term {
		a.hist = append(a.hist, termSince{at: w.now, term: m})
	}
}

// majorityTermBefore is the highest term a majority durably held at or
// before t, and since when.
func (a *answerCheck) majorityTermBefore(t time.Duration) (uint64, time.Duration) {
	k, _ := slices.BinarySearchFunc(a.hist, t, func(e termSince, t time.Duration) int {
		if e.at <= t {
			return -1
		}
		return 1
	})
	if k == 0 {
		return 0, 0
	}
	return a.hist[k-1].term, a.hist[k-1].at
}

// replyTerm is the term nd answers in: the term it was primary of when the
// step began, or became primary of during it (false: it was not primary).
func (w *World) replyTerm(nd *simNode) (uint64, bool) {
	w.ans.init(len(w.nodes))
	if p := w.ans.pre[nd.id]; p.role == sm.RolePrimary {
		return p.term, true
	}
	if nd.node.Role() == sm.RolePrimary {
		return nd.node.Term(), true
	}
	return 0, false
}

// judgeReply is the hook for every reply a node emits: the S4 answer rule
// and the canonical chain's commit (chain.go).
func (w *World) judgeReply(nd *simNode, r sm.Reply) {
	if r.Status != sm.StatusOK || !w.chainArmed() || r.ID == 0 || r.ID > uint64(len(w.wl.calls)) {
		return
	}
	c := w.wl.calls[r.ID-1]
	term, ok := w.replyTerm(nd)
	if !ok {
		w.violate("S4", "n%d answered #%d (%s) OK while not primary (%s, term %d)", nd.id, c.id, c.req.Kind, nd.node.Role(), nd.node.Term())
		return
	}
	if k, since := w.ans.majorityTermBefore(c.sent); term < k {
		w.violate("S4", "n%d answered #%d (%s, sent at %v) OK as primary of term %d, but from %v on, before the request was sent, a majority of disks durably held term %d or higher: a deposed primary answered", nd.id, c.id, describeReq(c.req), c.sent, term, since, k)
		return
	}
	w.noteCommit(nd, r, term)
}
