package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// Porcupine over the cluster world's client history, against a reference
// model of seed 000's queue contract written here for the checker (not
// sm.ApplyJob). The model is per job — the history is partitioned by job
// (payload), so each partition is small and porcupine finishes — and it is
// nondeterministic where the clients cannot see: an operation of unknown
// outcome may or may not have happened, and the primary's own maintenance
// sweeps may at any time dead-letter an expiring job or one whose
// attempts are used up, and purge a dead job of a queue with retention.
// The state every node restarted with at the end is the last operation
// of each partition, so a lost job shows up as a non-linearizable history.
//
// What the per-job projection checks: a claim hands out only a pending
// job or a lapsed claim, with Claims and Attempts advanced by one, never
// one pinned elsewhere; ack/heartbeat/retry/fail succeed exactly when
// the handle names the current, unexpired claim (its claim count and the
// claim stamp the claim reply showed); cancel only a pending
// job; redrive only a dead one; get/list/the final state show the job in
// the state the history leads to. It does not check claim order (priority,
// readiness) across jobs.

// linBudget bounds porcupine's search of one schedule's history, in wall
// clock time (porcupine has no other bound), so a verdict near it depends
// on the machine's load: seed 1073463's history of 164 operations needs
// about 20 s alone and timed out at 20 s under a long run's load; the
// budget is three times that.
const linBudget = 60 * time.Second

type linState uint8

const (
	lAbsent linState = iota // not enqueued (yet)
	lPending
	lProcessing
	lDead
	lGone // deleted: acked, cancelled or purged
)

// linJob is the model's state of one job. expires is the claim deadline
// (Unix seconds) or -1 when no reply has shown it; claim is the stamp of
// the latest claim as a reply showed it (zero: a claim no reply showed,
// whose handle no client can hold).
type linJob struct {
	st       linState
	claims   uint32
	attempts uint32
	expires  int64
	claim    queue.ClaimStamp
}

// linMeta is what the history says of a job, constant through it.
type linMeta struct {
	key       string
	maxAtt    uint32
	vt        int64
	retention bool // dead jobs are purged after retention
	expiring  bool // enqueued with a lifetime
	pin       string
	enqueued  time.Duration // when its (first) enqueue was sent
	keyed     bool          // submitted with an idempotency key: repeats enqueue nothing
}

type linIn struct {
	meta  *linMeta
	kind  sm.JobKind // 0: the final state read
	h     queue.Handle
	host  string
	hit   *queue.Job // claim/get/list/final: this job in the reply, nil if not there
	id    uint64
	final bool
}

// unknownOut is the output of every operation of unknown outcome.
var unknownOut linOut

// linOut is an operation's output (the history holds pointers to them).
type linOut struct {
	known bool  // the client learned the outcome
	ok    bool  // Reply.OK (or OKs[i] of an ack-batch)
	at    int64 // Reply.At: the second the primary applied it at
	// atLate: at may be a later second than the one the operation was
	// judged at (the acks a long-poll claim carried, judged on arrival;
	// its reply's At may be a later retry's): its validity by time is
	// unknown.
	atLate bool
}

// validity is the tri-state validity predicate of a handle.
type validity uint8

const (
	vNo validity = iota
	vYes
	vMaybe
)

func (s linJob) valid(h queue.Handle, out linOut) validity {
	if s.st != lProcessing || s.claims != h.Attempt || h.Claim.LSN == 0 || s.claim != h.Claim {
		return vNo
	}
	if s.expires < 0 || !out.known || out.atLate {
		return vMaybe
	}
	if out.at < s.expires {
		return vYes
	}
	return vNo
}

// spontaneous returns s and every state the primary's own sweeps (or a
// claim of another job) may move it to, at times nobody observed,
// appended to out[:0] (the model's step passes an array on its stack).
func spontaneous(s linJob, m *linMeta, out []linJob) []linJob {
	out = append(out[:0], s)
	for i := 0; i < len(out); i++ {
		x := out[i]
		switch {
		case (x.st == lPending || x.st == lProcessing) && m.expiring,
			x.st == lProcessing && x.attempts >= m.maxAtt:
			out = append(out, linJob{st: lDead, claims: x.claims, attempts: x.attempts, expires: -1, claim: x.claim})
		case x.st == lDead && m.retention:
			out = append(out, linJob{st: lGone})
		}
	}
	return out
}

// shows reports whether job j as a reply showed it matches state s.
func shows(s linJob, j *queue.Job) bool {
	want := lAbsent // a state no reply shows
	switch j.State {
	case queue.Pending:
		want = lPending
	case queue.Processing:
		want = lProcessing
	case queue.Dead:
		want = lDead
	}
	return s.st == want && s.claims == j.Claims && s.attempts == j.Attempts && (s.claim.LSN == 0 || s.claim == j.Claim)
}

// learn takes the claim deadline and stamp from a reply that showed the
// job.
func learn(s linJob, j *queue.Job) linJob {
	if s.st == lProcessing {
		s.expires = j.ClaimExpiresAt
	}
	s.claim = j.Claim
	return s
}

// linStep is one operation on one job's state: every possible next state
// (none: the output is impossible from s), appended to next.
func linStep(next []linJob, s linJob, in *linIn, out linOut) []linJob {
	m := in.meta
	// either: alt if the client learned the outcome, else alt or s.
	either := func(alt linJob) []linJob {
		if out.known {
			return append(next, alt)
		}
		return append(next, alt, s)
	}
	switch in.kind {
	case sm.JobEnqueue, sm.JobEnqueueBatch:
		if s.st != lAbsent {
			if m.keyed {
				return append(next, s) // a repeat of a keyed submit: the job is the first's
			}
			return next
		}
		return either(linJob{st: lPending, expires: -1})
	case sm.JobClaim:
		claimable := (s.st == lPending || s.st == lProcessing && s.attempts < m.maxAtt && (s.expires < 0 || !out.known || s.expires <= out.at)) &&
			(m.pin == "" || m.pin == in.host)
		n := linJob{st: lProcessing, claims: s.claims + 1, attempts: s.attempts + 1, expires: -1}
		switch {
		case out.known && in.hit != nil:
			if !claimable || in.hit.Claims != n.claims || in.hit.Attempts != n.attempts {
				return next
			}
			return append(next, learn(n, in.hit))
		case out.known || !claimable:
			return append(next, s)
		default:
			return append(next, s, n)
		}
	case sm.JobAck, sm.JobAckBatch, sm.JobHeartbeat, sm.JobRetry, sm.JobFail:
		v := s.valid(in.h, out)
		var applied linJob
		switch in.kind {
		case sm.JobAck, sm.JobAckBatch:
			applied = linJob{st: lGone}
		case sm.JobHeartbeat:
			applied = s
			if s.expires >= 0 && out.known {
				applied.expires = max(s.expires, out.at+m.vt)
			} else {
				applied.expires = -1
			}
		case sm.JobRetry:
			applied = linJob{st: lPending, claims: s.claims, attempts: s.attempts, expires: -1, claim: s.claim}
			if s.attempts >= m.maxAtt {
				applied.st = lDead
			}
		case sm.JobFail:
			applied = linJob{st: lDead, claims: s.claims, attempts: s.attempts, expires: -1, claim: s.claim}
		}
		switch {
		case !out.known && v == vNo:
			return append(next, s)
		case !out.known:
			return append(next, s, applied)
		case out.ok && v != vNo:
			return append(next, applied)
		case !out.ok && v != vYes:
			return append(next, s)
		}
		return next
	case sm.JobCancel:
		return onlyIf(next, s, out, s.st == lPending, linJob{st: lGone})
	case sm.JobRedrive:
		return onlyIf(next, s, out, s.st == lDead, linJob{st: lPending, claims: s.claims, expires: -1, claim: s.claim})
	case sm.JobGet, sm.JobList, 0:
		if !out.known {
			return append(next, s) // a read nobody saw the answer to constrains nothing
		}
		if in.hit == nil {
			if s.st == lAbsent || s.st == lGone {
				return append(next, s)
			}
			return next
		}
		if !shows(s, in.hit) {
			return next
		}
		return append(next, learn(s, in.hit))
	}
	return append(next, s)
}

// onlyIf is an operation that succeeds exactly when cond holds.
func onlyIf(next []linJob, s linJob, out linOut, cond bool, applied linJob) []linJob {
	switch {
	case !out.known && cond:
		return append(next, s, applied)
	case !out.known, !out.ok && !cond:
		return append(next, s)
	case out.ok && cond:
		return append(next, applied)
	}
	return next
}

// linSet is the model's state: the set of the job states the history so
// far may have led to (no two equal; order is of no account).
type linSet []linJob

// step is the set of every state an operation may lead to from a state of
// ss, each once, in first-reached order (nil: none).
func (ss linSet) step(in *linIn, out linOut) linSet {
	var nbuf [8]linJob
	next, cand := nbuf[:0], []linJob(nil)
	var sbuf [3]linJob // spontaneous gives s and at most two more
	var cbuf [8]linJob
	for _, s := range ss {
		for _, sp := range spontaneous(s, in.meta, sbuf[:0]) {
			cand = linStep(cbuf[:0], sp, in, out)
			for _, n := range cand {
				if !slices.Contains(next, n) {
					next = append(next, n)
				}
			}
		}
	}
	switch {
	case len(next) == 0:
		return nil
	case slices.Equal(next, ss):
		return ss // states are never written: the same set is shared
	}
	return slices.Clone(next)
}

// equal is set equality (both sides hold each state once).
func (ss linSet) equal(o linSet) bool {
	if len(ss) != len(o) {
		return false
	}
	for _, s := range ss {
		if !slices.Contains(o, s) {
			return false
		}
	}
	return true
}

func linModel() porcupine.Model {
	// A deterministic porcupine model over sets of job states (what
	// porcupine.NondeterministicModel.ToModel builds from a step giving
	// every next state, written here without boxing each state into an
	// interface: that construction's allocations were most of the check).
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			// By job, in first-seen order, each in history order; sized
			// by a first pass (one array under them all).
			idx := map[*linMeta]int{}
			var sizes []int
			for _, op := range h {
				m := op.Input.(*linIn).meta
				i, ok := idx[m]
				if !ok {
					i = len(sizes)
					idx[m] = i
					sizes = append(sizes, 0)
				}
				sizes[i]++
			}
			parts := make([][]porcupine.Operation, len(sizes))
			all := make([]porcupine.Operation, len(h))
			off := 0
			for i, n := range sizes {
				parts[i] = all[off : off : off+n]
				off += n
			}
			for _, op := range h {
				i := idx[op.Input.(*linIn).meta]
				parts[i] = append(parts[i], op)
			}
			return parts
		},
		Init: func() any { return linSet{{expires: -1}} },
		Step: func(state, input, output any) (bool, any) {
			ss := state.(linSet)
			next := ss.step(input.(*linIn), *output.(*linOut))
			switch {
			case len(next) == 0:
				return false, nil
			case &next[0] == &ss[0]:
				return true, state // the same set, boxed already
			}
			return true, next
		},
		Equal: func(a, b any) bool { return a.(linSet).equal(b.(linSet)) },
		DescribeOperation: func(input, output any) string {
			in, ok := input.(*linIn)
			if !ok {
				return fmt.Sprintf("%v", input) // porcupine's visualization describes partition boundaries with nil
			}
			var out linOut
			if o, ok := output.(*linOut); ok {
				out = *o
			}
			name := in.kind.String()
			if in.final {
				name = "final-state"
			}
			res := "?"
			if out.known {
				res = fmt.Sprintf("ok=%v at=%d", out.ok, out.at)
			}
			hit := "-"
			if in.hit != nil {
				hit = fmt.Sprintf("%d/%s/c%d/a%d", in.hit.ID, in.hit.State, in.hit.Claims, in.hit.Attempts)
			}
			return fmt.Sprintf("%s %s h=%s hit=%s -> %s", in.meta.key, name, fmtHandle(in.h), hit, res)
		},
		DescribeState: func(state any) string {
			var ds []string
			for _, s := range state.(linSet) {
				ds = append(ds, fmt.Sprintf("%v c%d a%d exp=%d claim=%d.%d", []string{"absent", "pending", "processing", "dead", "gone"}[s.st], s.claims, s.attempts, s.expires, s.claim.Term, s.claim.LSN))
			}
			return "{" + strings.Join(ds, ", ") + "}"
		},
	}
}

// checkHistory runs porcupine over the client history and the final
// state (final: the jobs the primary recovered after every node
// restarted, read at time end). Only in strict mode: in seed mode the
// history is expected not to linearize once a write is lost, and the
// durability checker counts that loss.
func (w *World) checkHistory(final []queue.Job, end time.Duration) {
	if !w.strict() {
		return
	}
	hist := w.linHistory(final, end)
	defer putHistory(hist)
	// The verbose check (what the visualization needs) records the longest
	// linearizable prefix at every backtrack: it runs only to explain a
	// failure.
	res := porcupine.CheckOperationsTimeout(linModel(), hist, linBudget)
	switch res {
	case porcupine.Ok:
		w.tr.line(w.now, -1, fmt.Sprintf("porcupine: %d operations linearizable", len(hist)))
	case porcupine.Unknown:
		w.violate("S5", "porcupine timed out on %d operations: linearizability of the client history unknown", len(hist))
	default:
		path := filepath.Join(os.TempDir(), fmt.Sprintf("xce-sim-%d.html", w.sc.Seed))
		_, info := porcupine.CheckOperationsVerbose(linModel(), hist, linBudget)
		if err := porcupine.VisualizePath(linModel(), info, path); err != nil {
			path = "(visualization failed: " + err.Error() + ")"
		}
		key, ops := w.firstIllegal(hist)
		for _, op := range ops {
			w.tr.line(w.now, -1, fmt.Sprintf("porcupine %s: [%v, %v] %s", key, time.Duration(op.Call), time.Duration(op.Return), linModel().DescribeOperation(op.Input, op.Output)))
		}
		w.violate("S5", "client history (%d operations, partitioned by job) is not linearizable against the queue-contract model: job %s's %d operations (traced) have no linearization; porcupine visualization: %s", len(hist), key, len(ops), path)
	}
}

// firstIllegal finds the first job whose partition does not linearize,
// so the failure names it and the trace shows its operations in order.
func (w *World) firstIllegal(hist []porcupine.Operation) (string, []porcupine.Operation) {
	model := linModel()
	for _, part := range model.Partition(hist) {
		if !porcupine.CheckOperations(model, part) {
			sort.SliceStable(part, func(i, j int) bool { return part[i].Call < part[j].Call })
			return part[0].Input.(*linIn).meta.key, part
		}
	}
	return "?", nil
}

// linHistory projects the client history onto jobs.
func (w *World) linHistory(final []queue.Job, end time.Duration) []porcupine.Operation {
	wl := w.wl
	metas := map[string]*linMeta{}
	var keys []string // in first-seen order: no map order reaches the history
	idKey := map[uint64]string{}
	for id, k := range wl.led.idKey {
		idKey[id] = k
	}
	for _, j := range final {
		if _, ok := idKey[j.ID]; !ok {
			idKey[j.ID] = string(j.Payload)
		}
	}
	type stamped struct {
		st queue.Stamps
		ok bool
	}
	stamps := map[string]stamped{} // queueStamps of each queue, once
	meta := func(key, q string) *linMeta {
		if m, ok := metas[key]; ok {
			return m
		}
		m := &linMeta{key: key}
		qs, seen := stamps[q]
		if !seen {
			qs.st, qs.ok = w.queueStamps(q)
			stamps[q] = qs
		}
		if st, ok := qs.st, qs.ok; ok {
			m.maxAtt, m.vt, m.retention = st.MaxAttempts, int64(st.VisibilityTimeoutS), st.DeadLetterRetentionS > 0
		}
		metas[key] = m
		keys = append(keys, key)
		return m
	}
	byQueue := map[string][]string{} // queue -> keys enqueued to it
	// Pass 1: every job's meta, from its enqueue request.
	for _, c := range wl.calls {
		if c.req.Kind != sm.JobEnqueue && c.req.Kind != sm.JobEnqueueBatch {
			continue
		}
		ps := c.req.Payloads
		if c.req.Kind == sm.JobEnqueue {
			ps = [][]byte{c.req.Payload}
		}
		for _, p := range ps {
			if _, seen := metas[string(p)]; seen {
				continue // a keyed submit's repeat: the same job
			}
			m := meta(string(p), c.req.Queue)
			m.expiring, m.pin, m.enqueued, m.keyed = c.req.Expires > 0, c.req.Host, c.sent, keyed(c.req)
			byQueue[c.req.Queue] = append(byQueue[c.req.Queue], m.key)
		}
	}
	hist := getHistory()
	finalAt := int64(end)
	var ins []linIn // the inputs, allocated in chunks: boxing each was a malloc
	input := func(in linIn) *linIn {
		if len(ins) == cap(ins) {
			ins = make([]linIn, 0, 256)
		}
		ins = append(ins, in)
		return &ins[len(ins)-1]
	}
	var outs []linOut // the outputs, the same way (never written: shared)
	output := func(out linOut) *linOut {
		if out == (linOut{}) {
			return &unknownOut
		}
		if len(outs) == cap(outs) {
			outs = make([]linOut, 0, 256)
		}
		outs = append(outs, out)
		return &outs[len(outs)-1]
	}
	add := func(c *call, in linIn, ok bool) {
		op := porcupine.Operation{ClientId: c.client, Input: input(in), Call: int64(c.sent)}
		if c.out == outOK {
			late := c.req.Kind == sm.JobClaim && c.req.Wait > 0 // only the acks it carries judge by at
			op.Output, op.Return = output(linOut{known: true, ok: ok, at: c.rep.At, atLate: late}), int64(c.done)
		} else {
			// Unknown: it may take effect at any time before the final
			// restart killed every process (no request outlives that).
			op.Output, op.Return = output(linOut{}), finalAt-1
		}
		hist = append(hist, op)
	}
	// addAcks: the handles of an ack batch, or the acks a claim carries
	// (applied before its claim, as an ack batch).
	addAcks := func(c *call, hs []queue.Handle) {
		// A long poll's acks are judged on arrival; its reply may come from
		// a later retry (a claim, or a dead-lettering empty one) with
		// that retry's At (add marks it: atLate).
		for i, h := range hs {
			if k, ok := idKey[h.ID]; ok && metas[k] != nil {
				add(c, linIn{meta: metas[k], kind: sm.JobAckBatch, h: h}, i < len(c.rep.OKs) && c.rep.OKs[i])
			}
		}
	}
	hitIn := func(jobs []queue.Job, key string) *queue.Job {
		for i := range jobs {
			if string(jobs[i].Payload) == key {
				return &jobs[i]
			}
		}
		return nil
	}
	for _, c := range wl.calls {
		if c.out == outRefused {
			continue // certainly not applied
		}
		r := c.req
		if c.out != outOK && (r.Kind == sm.JobGet || r.Kind == sm.JobList) {
			// A read nobody saw the answer to constrains nothing, and as
			// an operation open until the end (every job's, for a list)
			// it multiplies porcupine's search: the read probes of a
			// frozen primary time out by the dozen.
			continue
		}
		switch r.Kind {
		case sm.JobEnqueue, sm.JobEnqueueBatch:
			ps := r.Payloads
			if r.Kind == sm.JobEnqueue {
				ps = [][]byte{r.Payload}
			}
			for _, p := range ps {
				add(c, linIn{meta: metas[string(p)], kind: r.Kind}, true)
			}
		case sm.JobClaim, sm.JobList:
			addAcks(c, r.Handles) // a list has none
			// Every job of the queue may be involved.
			qs := []string{r.Queue}
			if r.Queue == "" {
				qs = []string{"q0", "q1"}
			}
			for _, q := range qs {
				for _, k := range byQueue[q] {
					m, hit := metas[k], hitIn(c.rep.Jobs, k)
					// Cost: a claim or list that answered before the job's
					// enqueue was sent, or was sent after its ack was
					// acknowledged, and does not show it, cannot involve it.
					if hit == nil && (c.out == outOK && c.done < m.enqueued || ackedBefore(wl, k, c.sent)) {
						continue
					}
					add(c, linIn{meta: m, kind: r.Kind, host: r.Host, hit: hit}, c.rep.OK)
				}
			}
		case sm.JobAck, sm.JobHeartbeat, sm.JobRetry, sm.JobFail:
			if k, ok := idKey[r.Handle.ID]; ok && metas[k] != nil {
				add(c, linIn{meta: metas[k], kind: r.Kind, h: r.Handle}, c.rep.OK)
			}
		case sm.JobAckBatch:
			addAcks(c, r.Handles)
		case sm.JobCancel, sm.JobRedrive, sm.JobGet:
			if k, ok := idKey[r.ID]; ok && metas[k] != nil {
				add(c, linIn{meta: metas[k], kind: r.Kind, id: r.ID, hit: hitIn(c.rep.Jobs, k)}, c.rep.OK)
			}
		}
	}
	// The final state: one read per job (keys in first-seen order).
	for _, k := range keys {
		in := input(linIn{meta: metas[k], final: true, hit: hitIn(final, k)})
		hist = append(hist, porcupine.Operation{ClientId: len(wl.clients), Input: in, Call: finalAt, Output: output(linOut{known: true, ok: in.hit != nil}), Return: finalAt + 1})
	}
	return hist
}

// histories keeps the arrays of histories checked: a history is a few
// thousand operations, grown by appending, once per schedule.
var histories sync.Pool

// getHistory is an empty history, with an array used before if any.
func getHistory() []porcupine.Operation {
	if h, ok := histories.Get().(*[]porcupine.Operation); ok {
		return (*h)[:0]
	}
	return nil
}

// putHistory gives back the array of a history no longer read (porcupine
// copies what it checks).
func putHistory(h []porcupine.Operation) {
	clear(h) // keep none of its inputs alive
	h = h[:0]
	histories.Put(&h)
}

// ackedBefore reports whether an ack of job key was acknowledged before t.
func ackedBefore(wl *workload, key string, t time.Duration) bool {
	at, ok := wl.led.ackedAt[key]
	return ok && at < t
}

// queueStamps are the stamps the workload's queues are configured with
// (sampleConfig: the same for the current and the older config).
func (w *World) queueStamps(q string) (queue.Stamps, bool) {
	for i, name := range []string{"q0", "q1"} {
		if name == q {
			c := sampleQueue(i)
			return queue.Stamps{VisibilityTimeoutS: c.VisibilityTimeoutS, MaxAttempts: c.MaxAttempts, BackoffBaseS: c.BackoffBaseS, DeadLetterRetentionS: c.DeadLetterRetentionS}, true
		}
	}
	return queue.Stamps{}, false
}
