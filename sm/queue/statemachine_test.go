package queue

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// immutable are the fields of a job no operation may change after enqueue
// (the stamps and the enqueue-time resolution).
type immutable struct {
	Queue      string
	Payload    string
	Priority   int32
	Seq        uint64
	EnqueuedAt int64
	Stamps     Stamps
	Pin        string
	Resource   uint32
}

func immutableOf(j Job) immutable {
	return immutable{j.Queue, string(j.Payload), j.Priority, j.Seq, j.EnqueuedAt, j.Stamps, j.Pin, j.Resource}
}

// harness runs the implementation and the model side by side and checks,
// besides their agreement, the contract properties of seed 000 directly on
// the implementation.
type harness struct {
	q   *Queues
	m   *model
	now int64

	issued []Handle          // every handle ever handed out, in order (lost histories too)
	latest map[uint64]Handle // the most recent handle of each job
	born   map[uint64]immutable

	// The log the claims are stamped from: each claim is a record at the
	// next LSN of the current term. A fork saves a point of the history;
	// losing rolls the state back to it and continues in a new term from
	// that LSN (a deposed primary's suffix lost, the next primary's log),
	// with the next ID raised above every ID any history handed out.
	term, lsn uint64
	saved     *savedPoint
	lost      []Handle        // handles handed out by lost histories
	everID    map[uint64]bool // every job ID any history handed out
	maxID     uint64

	stats map[string]int // how often the interesting shapes occurred, over all runs
}

type savedPoint struct {
	snap   Snapshot
	latest map[uint64]Handle
	born   map[uint64]immutable
	lsn    uint64
	issued int
}

func (h *harness) fatalf(t *rapid.T, format string, args ...any) {
	t.Helper()
	t.Fatalf("now=%d: %s", h.now, fmt.Sprintf(format, args...))
}

func drawStamps(t *rapid.T) Stamps {
	st := Stamps{
		VisibilityTimeoutS:   rapid.Uint32Range(1, 30).Draw(t, "vt"),
		MaxAttempts:          rapid.Uint32Range(1, 3).Draw(t, "max_attempts"),
		BackoffBaseS:         rapid.Uint32Range(0, 10).Draw(t, "backoff"),
		DeadLetterRetentionS: rapid.SampledFrom([]uint32{0, 1, 10, 50}).Draw(t, "retention"),
	}
	switch rapid.IntRange(0, 29).Draw(t, "bad_stamps") {
	case 28:
		st.MaxAttempts = 0
	case 29:
		st.VisibilityTimeoutS = 0
	}
	return st
}

func drawPayload(t *rapid.T) []byte {
	return rapid.SliceOfN(rapid.Byte(), 0, 3).Draw(t, "payload")
}

// drawHandle picks a handle: the latest of some job, a stale one of a job
// that is processing again (the ack-vs-reclaim race, and the same after a
// redrive), any issued one, or a made-up one.
func (h *harness) drawHandle(t *rapid.T) Handle {
	var stale []Handle
	for _, hd := range h.issued {
		if i := h.m.find(hd.ID); i >= 0 && h.m.jobs[i].State == Processing && hd != h.latest[hd.ID] {
			stale = append(stale, hd)
		}
	}
	// A lost history's handle with the claim count of the job's current
	// claim: it differs from the current handle only in its stamp.
	var twins []Handle
	for _, hd := range h.lost {
		if cur, ok := h.latest[hd.ID]; ok && cur.Attempt == hd.Attempt {
			twins = append(twins, hd)
		}
	}
	switch k := rapid.IntRange(0, 11).Draw(t, "handle_kind"); {
	case k >= 10 && len(twins) > 0:
		return rapid.SampledFrom(twins).Draw(t, "twin")
	case k >= 10 && len(h.lost) > 0:
		return rapid.SampledFrom(h.lost).Draw(t, "lost")
	case k < 2 && len(stale) > 0:
		return rapid.SampledFrom(stale).Draw(t, "stale")
	case k < 6 && len(h.issued) > 0:
		// Recent handles are the interesting ones.
		i := len(h.issued) - 1 - rapid.IntRange(0, min(len(h.issued)-1, 6)).Draw(t, "recent")
		return h.latest[h.issued[i].ID]
	case k < 9 && len(h.issued) > 0:
		return rapid.SampledFrom(h.issued).Draw(t, "issued")
	default:
		return Handle{
			ID:      rapid.Uint64Range(0, h.m.nextID+1).Draw(t, "id"),
			Attempt: rapid.Uint32Range(0, 4).Draw(t, "attempt"),
			Claim:   ClaimStamp{Term: rapid.Uint64Range(0, h.term).Draw(t, "stamp_term"), LSN: rapid.Uint64Range(0, h.lsn).Draw(t, "stamp_lsn")},
		}
	}
}

// checkHandleOp checks a handle operation's result against the validity
// predicate evaluated on the state before it: only the job's latest handle
// may succeed, and only while the job is processing and the claim has not
// lapsed.
func (h *harness) checkHandleOp(t *rapid.T, op string, hd Handle, before Snapshot, ok bool) {
	t.Helper()
	var prev *Job
	for i := range before.Jobs {
		if before.Jobs[i].ID == hd.ID {
			prev = &before.Jobs[i]
		}
	}
	want := prev != nil && prev.State == Processing && h.now < prev.ClaimExpiresAt && hd == h.latest[hd.ID]
	if ok != want {
		h.fatalf(t, "%s(%+v) = %v, validity predicate says %v (job before: %+v)", op, hd, ok, want, prev)
	}
	switch {
	case ok:
		h.stats[op+" accepted"]++
	case prev == nil:
		h.stats["handle op on a missing job refused"]++
	case hd != h.latest[hd.ID] && prev.State == Processing && hd.Attempt == prev.Claims && hd.ID == h.latest[hd.ID].ID:
		h.stats["handle of another history's claim refused (id and attempt match)"]++
	case hd != h.latest[hd.ID] && prev.State == Processing && hd.Attempt < prev.Claims && hd.Attempt == prev.Attempts:
		h.stats["stale handle from before a redrive refused (attempt matches)"]++
	case hd != h.latest[hd.ID] && prev.State == Processing:
		h.stats["stale handle of a reclaimed job refused"]++
	case prev.State == Processing:
		h.stats["lapsed handle refused"]++
	default:
		h.stats["handle op on a "+prev.State.String()+" job refused"]++
	}
}

func (h *harness) checkNoZombies(t *rapid.T, queue string) {
	t.Helper()
	for _, j := range h.q.Export().Jobs {
		if (queue == "" || j.Queue == queue) && zombie(j, h.now) {
			h.fatalf(t, "zombie left after claim/sweep: %+v", j)
		}
	}
}

func (h *harness) enqueue(t *rapid.T) {
	queue := rapid.SampledFrom([]string{"a", "a", "b", "b", ""}).Draw(t, "queue")
	payload := drawPayload(t)
	st := drawStamps(t)
	o := EnqueueOpts{
		Priority: rapid.Int32Range(-1, 2).Draw(t, "priority"),
		Resource: rapid.Uint32Range(0, 2).Draw(t, "resource"),
		Host:     rapid.SampledFrom([]string{"", "", "", "h1", "h9"}).Draw(t, "pin"),
	}
	if rapid.Bool().Draw(t, "has_delay") {
		o.Delay = rapid.Int64Range(0, 40).Draw(t, "delay")
	}
	if rapid.Bool().Draw(t, "has_run_at") {
		o.RunAt = h.now + rapid.Int64Range(-20, 40).Draw(t, "run_at")
	}
	if rapid.IntRange(0, 2).Draw(t, "has_expires") == 2 {
		o.Expires = rapid.Int64Range(0, 60).Draw(t, "expires")
	}
	switch rapid.IntRange(0, 15).Draw(t, "bad_opts") {
	case 14:
		o.Delay = -1
	case 15:
		o.Expires = -1
	}
	var (
		got Job
		err error
	)
	if rapid.IntRange(0, 2).Draw(t, "enqueue_id") == 0 {
		// EnqueueID (replay's): the job it made is Enqueue's.
		var id uint64
		if id, err = h.q.EnqueueID(h.now, queue, payload, st, o); err == nil {
			got, _ = h.q.Get(id)
		}
		h.stats["EnqueueID"]++
	} else {
		got, err = h.q.Enqueue(h.now, queue, payload, st, o)
	}
	want, werr := h.m.enqueue(h.now, queue, payload, st, o)
	if !errors.Is(err, werr) || (werr == nil) != (err == nil) || !reflect.DeepEqual(got, want) {
		h.fatalf(t, "Enqueue = %+v, %v; model %+v, %v", got, err, want, werr)
	}
	if err == nil {
		if h.everID[got.ID] {
			h.fatalf(t, "Enqueue reused job id %d, which an earlier (maybe lost) history handed out", got.ID)
		}
		h.noteID(got.ID)
		h.born[got.ID] = immutableOf(got)
		if len(payload) > 0 {
			payload[0]++ // the state must not alias the caller's bytes
		}
	}
}

func (h *harness) claim(t *rapid.T) {
	queue := rapid.SampledFrom([]string{"a", "a", "b", "zz"}).Draw(t, "queue")
	host := rapid.SampledFrom([]string{"h1", "h2", "h3", "h1", ""}).Draw(t, "host")
	n := rapid.IntRange(-1, 4).Draw(t, "max")
	h.lsn++
	at := ClaimStamp{Term: h.term, LSN: h.lsn}
	if rapid.IntRange(0, 19).Draw(t, "no_stamp") == 0 {
		at.LSN = 0 // names no record: refused
	}
	before := h.q.Export()
	var got []Job
	count := rapid.IntRange(0, 2).Draw(t, "claim_count") == 0
	if !count {
		got = h.q.ClaimBatch(h.now, queue, host, n, at)
	}
	want := h.m.claim(h.now, queue, host, n, at)
	if count {
		// ClaimBatchCount (replay's): the count, and the jobs it claimed
		// are ClaimBatch's.
		if k := h.q.ClaimBatchCount(h.now, queue, host, n, Budget{}, at); k != len(want) {
			h.fatalf(t, "ClaimBatchCount(%q, %q, %d, %+v) = %d, model claimed %d", queue, host, n, at, k, len(want))
		}
		for _, w := range want {
			j, _ := h.q.Get(w.ID)
			got = append(got, j)
		}
		h.stats["ClaimBatchCount"]++
	}
	if !reflect.DeepEqual(got, want) {
		h.fatalf(t, "ClaimBatch(%q, %q, %d, %+v) = %+v\nmodel %+v", queue, host, n, at, got, want)
	}
	if at.LSN == 0 && got != nil {
		h.fatalf(t, "ClaimBatch without a record stamp handed out %+v", got)
	}
	if len(got) > max(n, 0) {
		h.fatalf(t, "claimed %d > max %d", len(got), n)
	}
	prev := map[uint64]Job{}
	for _, j := range before.Jobs {
		prev[j.ID] = j
	}
	seen := map[uint64]bool{}
	for _, j := range got {
		p, ok := prev[j.ID]
		switch {
		case seen[j.ID]:
			h.fatalf(t, "job %d handed out twice in one batch", j.ID)
		case !ok:
			h.fatalf(t, "claimed unknown job %d", j.ID)
		// Exclusivity: nobody else may hold a valid claim on a handed job.
		case p.State == Processing && p.ClaimExpiresAt > h.now:
			h.fatalf(t, "job %d handed to %s while %s's claim is valid until %d", j.ID, host, p.Host, p.ClaimExpiresAt)
		case p.State == Dead:
			h.fatalf(t, "dead job %d handed out", j.ID)
		case p.State == Pending && p.RunAt > h.now:
			h.fatalf(t, "job %d handed out before its RunAt %d", j.ID, p.RunAt)
		case expired(p, h.now):
			h.fatalf(t, "expired job %d handed out", j.ID)
		case p.Attempts >= p.Stamps.MaxAttempts:
			h.fatalf(t, "job %d with exhausted attempts handed out", j.ID)
		// Reclaim eats an attempt like any claim.
		case j.Attempts != p.Attempts+1:
			h.fatalf(t, "job %d: attempts %d -> %d on claim", j.ID, p.Attempts, j.Attempts)
		case p.Pin != "" && p.Pin != host:
			h.fatalf(t, "job %d pinned to %q handed to %q", j.ID, p.Pin, host)
		case j.Host != host || j.State != Processing || j.ClaimExpiresAt != h.now+int64(j.Stamps.VisibilityTimeoutS) || j.Claim != at:
			h.fatalf(t, "job %d handed out as %+v", j.ID, j)
		}
		h.stats["handed out"]++
		if p.State == Processing {
			h.stats["reclaimed (lapsed claim)"]++
		}
		if p.Pin != "" {
			h.stats["pinned job handed to its host"]++
		}
		seen[j.ID] = true
		hd := j.Handle()
		if old, ok := h.latest[j.ID]; ok && old == hd {
			h.fatalf(t, "job %d: new claim reuses handle %+v", j.ID, hd)
		}
		for _, l := range h.lost {
			if l == hd {
				h.fatalf(t, "job %d: claim hands out %+v, a handle a lost history handed out", j.ID, hd)
			}
		}
		h.latest[j.ID] = hd
		h.issued = append(h.issued, hd)
	}
	if host != "" && n > 0 && at.LSN != 0 {
		h.checkNoZombies(t, queue)
		for _, j := range before.Jobs {
			if j.Queue == queue && zombie(j, h.now) {
				h.stats["zombie dead-lettered by claim"]++
			}
		}
	}
}

func (h *harness) ack(t *rapid.T) {
	hd := h.drawHandle(t)
	before := h.q.Export()
	got, want := h.q.Ack(h.now, hd), h.m.ack(h.now, hd)
	if got != want {
		h.fatalf(t, "Ack(%+v) = %v, model %v", hd, got, want)
	}
	h.checkHandleOp(t, "Ack", hd, before, got)
}

func (h *harness) ackBatch(t *rapid.T) {
	n := rapid.IntRange(0, 4).Draw(t, "n")
	hs := make([]Handle, n)
	for i := range hs {
		hs[i] = h.drawHandle(t)
	}
	got := h.q.AckBatch(h.now, hs)
	want := make([]bool, n)
	for i, hd := range hs {
		want[i] = h.m.ack(h.now, hd)
	}
	if !reflect.DeepEqual(got, want) {
		h.fatalf(t, "AckBatch(%+v) = %v, model %v", hs, got, want)
	}
	acked := map[uint64]bool{}
	for i, hd := range hs {
		if got[i] && (acked[hd.ID] || hd != h.latest[hd.ID]) {
			h.fatalf(t, "AckBatch accepted %+v twice or stale", hd)
		}
		acked[hd.ID] = acked[hd.ID] || got[i]
	}
}

func (h *harness) heartbeat(t *rapid.T) {
	hd := h.drawHandle(t)
	before := h.q.Export()
	got, want := h.q.Heartbeat(h.now, hd), h.m.heartbeat(h.now, hd)
	if got != want {
		h.fatalf(t, "Heartbeat(%+v) = %v, model %v", hd, got, want)
	}
	h.checkHandleOp(t, "Heartbeat", hd, before, got)
}

func (h *harness) retry(t *rapid.T) {
	hd := h.drawHandle(t)
	msg := rapid.SampledFrom([]string{"", "boom"}).Draw(t, "msg")
	// A worker's delay now and then, sometimes out of bounds.
	delay := rapid.SampledFrom([]int64{0, 0, 0, 1, 3, 20, -1, MaxRetryDelayS + 1}).Draw(t, "delay")
	before := h.q.Export()
	got, want := h.q.RetryAfter(h.now, hd, msg, delay), h.m.retryAfter(h.now, hd, msg, delay)
	if got != want {
		h.fatalf(t, "RetryAfter(%+v, %d) = %v, model %v", hd, delay, got, want)
	}
	if delay < 0 || delay > MaxRetryDelayS {
		if !reflect.DeepEqual(before, h.q.Export()) {
			h.fatalf(t, "a refused retry delay %d changed the state", delay)
		}
		return
	}
	h.checkHandleOp(t, "Retry", hd, before, got)
}

func (h *harness) fail(t *rapid.T) {
	hd := h.drawHandle(t)
	msg := rapid.SampledFrom([]string{"", "oops"}).Draw(t, "msg")
	before := h.q.Export()
	got, want := h.q.Fail(h.now, hd, msg), h.m.fail(h.now, hd, msg)
	if got != want {
		h.fatalf(t, "Fail(%+v) = %v, model %v", hd, got, want)
	}
	h.checkHandleOp(t, "Fail", hd, before, got)
}

func (h *harness) drawID(t *rapid.T) uint64 {
	return rapid.Uint64Range(0, h.m.nextID).Draw(t, "id")
}

func (h *harness) cancel(t *rapid.T) {
	id := h.drawID(t)
	if got, want := h.q.Cancel(h.now, id), h.m.cancel(id); got != want {
		h.fatalf(t, "Cancel(%d) = %v, model %v", id, got, want)
	}
}

func (h *harness) redrive(t *rapid.T) {
	id := h.drawID(t)
	if got, want := h.q.Redrive(h.now, id), h.m.redrive(h.now, id); got != want {
		h.fatalf(t, "Redrive(%d) = %v, model %v", id, got, want)
	} else if got {
		h.stats["redriven"]++
	}
}

func (h *harness) sweep(t *rapid.T) {
	for _, j := range h.q.Export().Jobs {
		if expired(j, h.now) && j.State != Dead {
			h.stats["sweep: expired "+j.State.String()]++
		}
		if zombie(j, h.now) {
			h.stats["sweep: zombie"]++
		}
	}
	gm, gd := h.q.SweepExpired(h.now)
	h.stats["sweep: retention delete"] += gd
	wm, wd := h.m.sweep(h.now)
	if gm != wm || gd != wd {
		h.fatalf(t, "SweepExpired = %d, %d; model %d, %d", gm, gd, wm, wd)
	}
	h.checkNoZombies(t, "")
	for _, j := range h.q.Export().Jobs {
		r := int64(j.Stamps.DeadLetterRetentionS)
		switch {
		case j.State != Dead && expired(j, h.now):
			h.fatalf(t, "expired %v job %d survived the sweep", j.State, j.ID)
		case j.State == Dead && r != 0 && j.DiedAt+r <= h.now:
			h.fatalf(t, "dead job %d past retention survived the sweep", j.ID)
		}
	}
}

func (h *harness) advance(t *rapid.T) {
	switch rapid.IntRange(0, 9).Draw(t, "jump") {
	case 0:
		h.now += rapid.Int64Range(100, 5000).Draw(t, "far")
	case 1:
		h.now -= rapid.Int64Range(1, 30).Draw(t, "back") // a stepped wall clock
		h.stats["time stepped back"]++
	default:
		h.now += rapid.Int64Range(0, 15).Draw(t, "dt")
	}
}

func (h *harness) register(t *rapid.T) {
	name := rapid.SampledFrom([]string{"s1", "s2", "s1", "s3", ""}).Draw(t, "name")
	spec := rapid.SampledFrom([]string{"@every 5s", "@every 7s", "@every 1m", "@every 5s", "@every 2m", "@every 1h", "@every 7s", "@every 0s", "@daily", "*/5 * * * *",
		"* * * * *", "@hourly", "30 2 * * *", "0,30 * * * 1-5", "*/5 * * *", "0 0 30 2 *", "61 * * * *", "@every5s"}).Draw(t, "spec")
	queue := rapid.SampledFrom([]string{"a", "b", "b", "a", ""}).Draw(t, "queue")
	fire := FireOpts{Priority: rapid.Int32Range(-1, 2).Draw(t, "priority"), ExpiresS: rapid.Int64Range(0, 30).Draw(t, "expires_s")}
	if rapid.IntRange(0, 15).Draw(t, "bad_fire") == 15 {
		fire.ExpiresS = -1
	}
	payload := drawPayload(t)
	st := drawStamps(t)
	err := h.q.Register(h.now, name, spec, queue, payload, st, fire)
	if ok := h.m.register(h.now, name, spec, queue, payload, st, fire); ok != (err == nil) {
		h.fatalf(t, "Register(%q, %q, %q) = %v, model ok=%v", name, spec, queue, err, ok)
	}
}

func (h *harness) unregister(t *rapid.T) {
	name := rapid.SampledFrom([]string{"s1", "s2", "s3", "x"}).Draw(t, "name")
	if got, want := h.q.Unregister(name), h.m.unregister(name); got != want {
		h.fatalf(t, "Unregister(%q) = %v, model %v", name, got, want)
	}
}

func (h *harness) tick(t *rapid.T) {
	got, want := h.q.Tick(h.now), h.m.tick(h.now)
	if !reflect.DeepEqual(got, want) {
		h.fatalf(t, "Tick = %+v\nmodel %+v", got, want)
	}
	for _, j := range got {
		if h.everID[j.ID] {
			h.fatalf(t, "Tick reused job id %d, which an earlier (maybe lost) history handed out", j.ID)
		}
		h.noteID(j.ID)
		h.born[j.ID] = immutableOf(j)
	}
	if len(got) > 0 {
		h.stats["tick fired"]++
	}
	if len(got) >= SchedulerMaxCatchupFires {
		h.stats["tick hit the catch-up cap"]++
	}
	if again := h.q.Tick(h.now); len(again) != 0 {
		h.fatalf(t, "second Tick at the same now fired %d jobs", len(again))
	}
	h.m.tick(h.now)
	for _, s := range h.q.Schedules() {
		if s.Next <= h.now {
			h.fatalf(t, "schedule %q still due (next %d) after Tick", s.Name, s.Next)
		}
	}
}

func (h *harness) noteID(id uint64) {
	h.everID[id] = true
	h.maxID = max(h.maxID, id)
}

// fork saves the current point of the history.
func (h *harness) fork(t *rapid.T) {
	latest, born := map[uint64]Handle{}, map[uint64]immutable{}
	for k, v := range h.latest {
		latest[k] = v
	}
	for k, v := range h.born {
		born[k] = v
	}
	h.saved = &savedPoint{snap: h.q.Export(), latest: latest, born: born, lsn: h.lsn, issued: len(h.issued)}
}

// lose rolls back to the saved point: what happened since is a lost
// history. The next history is a new term that continues the log from the
// saved LSN, so its claims have the LSNs the lost ones had; the caller's
// ID scheme (here: above every ID handed out so far) keeps new IDs fresh.
func (h *harness) lose(t *rapid.T) {
	sp := h.saved
	if sp == nil {
		return
	}
	q, err := Import(sp.snap)
	if err != nil {
		h.fatalf(t, "Import(saved point) = %v", err)
	}
	h.lost = append(h.lost, h.issued[sp.issued:]...)
	h.q, h.m = q, modelFrom(sp.snap)
	h.latest, h.born, h.lsn = sp.latest, sp.born, sp.lsn
	h.term++
	h.q.AdvanceNextID(h.maxID + 1)
	h.m.advanceNextID(h.maxID + 1)
	h.saved = nil
	h.stats["history lost, next term continues from the fork"]++
}

// restore replaces the implementation by Import(Export()): the rebuilt
// indexes must behave exactly like the live ones from here on. The
// counters are not state: the rebuilt one starts them at zero, as a new
// process does.
func (h *harness) restore(t *rapid.T) {
	q, err := Import(h.q.Export())
	if err != nil {
		h.fatalf(t, "Import(Export()) = %v", err)
	}
	h.q = q
	h.m.through = map[string]Throughput{}
}

// resetCounters is ResetThroughput: every counter back to zero, the
// state unchanged.
func (h *harness) resetCounters(t *rapid.T) {
	h.q.ResetThroughput()
	h.m.through = map[string]Throughput{}
}

func (h *harness) check(t *rapid.T) {
	t.Helper()
	got, want := h.q.Export(), h.m.export()
	if !reflect.DeepEqual(got, want) {
		h.fatalf(t, "state differs\nimpl  %+v\nmodel %+v", got, want)
	}
	if err := h.q.checkIndexes(); err != nil {
		h.fatalf(t, "indexes: %v", err)
	}
	for id := uint64(0); id <= h.m.nextID; id++ {
		gj, gok := h.q.Get(id)
		wj, wok := h.m.get(id)
		if gok != wok || !reflect.DeepEqual(gj, wj) {
			h.fatalf(t, "Get(%d) = %+v, %v; model %+v, %v", id, gj, gok, wj, wok)
		}
	}
	for _, j := range got.Jobs {
		if j.State > Dead {
			h.fatalf(t, "job %d in no state (%d)", j.ID, j.State)
		}
		if immutableOf(j) != h.born[j.ID] {
			h.fatalf(t, "job %d changed immutable fields: %+v, born %+v", j.ID, immutableOf(j), h.born[j.ID])
		}
	}
	for _, queue := range []string{"a", "b", "zz"} {
		gat, gok := h.q.OldestPending(queue)
		wat, wok := h.m.oldestPending(queue)
		if gat != wat || gok != wok {
			h.fatalf(t, "OldestPending(%q) = %d, %v; a scan of the model's jobs %d, %v", queue, gat, gok, wat, wok)
		}
		if got, want := h.q.Throughput(queue), h.m.through[queue]; got != want {
			h.fatalf(t, "Throughput(%q) = %+v, model %+v", queue, got, want)
		}
	}
	for _, queue := range []string{"a", "b", "zz", ""} {
		gp, gpr, gd := h.q.Counts(queue)
		wp, wpr, wd := h.m.counts(queue)
		if gp != wp || gpr != wpr || gd != wd {
			h.fatalf(t, "Counts(%q) = %d/%d/%d, model %d/%d/%d", queue, gp, gpr, gd, wp, wpr, wd)
		}
		var want []Job
		for _, j := range got.Jobs {
			if queue == "" || j.Queue == queue {
				want = append(want, j)
			}
		}
		if l := h.q.List(queue); !reflect.DeepEqual(l, want) {
			h.fatalf(t, "List(%q) = %+v, want %+v", queue, l, want)
		}
	}
	gs, gok := h.q.Soonest()
	ws, wok := h.m.soonest()
	if gs != ws || gok != wok {
		h.fatalf(t, "Soonest = %d, %v; model %d, %v", gs, gok, ws, wok)
	}
}

// TestStateMachine drives the implementation and the reference model with
// random operation sequences - several hosts, stale and lapsed handles,
// time jumps (also backwards), schedules, snapshot round trips - and
// compares their full state after every step, with each queue's oldest
// pending ready time (against a scan of the model's jobs) and counters.
func TestStateMachine(t *testing.T) {
	stats := map[string]int{}
	defer func() {
		keys := make([]string, 0, len(stats))
		for k := range stats {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Logf("%6d  %s", stats[k], k)
		}
	}()
	rapid.Check(t, func(t *rapid.T) {
		h := &harness{
			q: New(), m: newModel(),
			now:    rapid.Int64Range(1_000_000, 1_000_100).Draw(t, "start"),
			latest: map[uint64]Handle{},
			born:   map[uint64]immutable{},
			stats:  stats,
			term:   rapid.Uint64Range(0, 3).Draw(t, "first_term"),
			everID: map[uint64]bool{},
		}
		actions := map[string]func(*rapid.T){
			"enqueue": h.enqueue, "claim": h.claim, "ack": h.ack, "ackBatch": h.ackBatch,
			"heartbeat": h.heartbeat, "retry": h.retry, "fail": h.fail, "cancel": h.cancel,
			"redrive": h.redrive, "sweep": h.sweep, "advance": h.advance, "register": h.register,
			"unregister": h.unregister, "tick": h.tick, "restore": h.restore,
			"fork": h.fork, "lose": h.lose, "resetCounters": h.resetCounters,
		}
		// Weights (rapid favours the first and last entries): enough
		// enqueues, claims and time to keep jobs moving.
		weighted := []string{
			"enqueue", "claim", "advance", "ack", "heartbeat", "retry", "claim", "fail", "redrive",
			"ackBatch", "sweep", "enqueue", "cancel", "tick", "advance", "register", "unregister",
			"retry", "restore", "heartbeat", "fork", "claim", "ack", "lose", "resetCounters", "sweep", "claim",
		}
		steps := rapid.IntRange(50, 400).Draw(t, "steps")
		for range steps {
			actions[rapid.SampledFrom(weighted).Draw(t, "action")](t)
			h.check(t)
		}
	})
}
