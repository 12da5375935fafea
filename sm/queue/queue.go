// Package queue is the controller's job-queue state: seed 000's queue
// contract (per-job stamps, single-step claim, the validity predicate,
// dead-letter moves, both-states sweep, dead-visible Get, the "@every"
// scheduler) on in-memory state instead of SQLite.
//
// Every operation is a deterministic function of (state, inputs): time is an
// input (now, Unix seconds), nothing reads a clock, and no Go map order
// reaches a result. Durability comes from a WAL that records each call with
// its inputs; replaying the calls in order rebuilds the same state, and
// Export/Import carry it across snapshots.
//
// Time may go backwards between calls (a stepped wall clock): every rule is
// stated against the now of the call, so a smaller now only makes fewer
// things due.
//
// A job is in exactly one State at every step; a move to Dead is a field
// change, so no failure can strand it between two places. Refusals are
// values (false, nil), not errors; errors are reserved for invalid inputs.
package queue

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
)

// Stamps are the per-job settings, resolved from the queue's defaults when
// the job is enqueued and immutable afterwards (seed 000, ADR-010 §3a).
type Stamps struct {
	VisibilityTimeoutS   uint32 // a claim lasts this long (and each heartbeat extends it so); >= 1
	MaxAttempts          uint32 // claims a job may consume before it is dead-lettered; >= 1
	BackoffBaseS         uint32 // retry delay is BackoffBaseS * 2^(Attempts-1), with equal jitter (Backoff); 0 = retry at once
	DeadLetterRetentionS uint32 // a dead job is deleted this long after DiedAt; 0 = kept forever
}

func (s Stamps) valid() bool { return s.VisibilityTimeoutS > 0 && s.MaxAttempts > 0 }

// State is where a job is in its life.
type State uint8

const (
	Pending    State = iota // waiting to be claimed (maybe not ready yet)
	Processing              // claimed by Host until ClaimExpiresAt
	Dead                    // dead-lettered; kept with every field until retention deletes it
)

func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Processing:
		return "processing"
	case Dead:
		return "dead"
	default:
		return "state?"
	}
}

// The pinned LastError strings of seed 000.
const (
	ErrMsgExhausted = "max attempts exceeded"
	ErrMsgExpired   = "expired"
	ErrMsgFailed    = "failed"
)

// MaxBackoffShift caps the exponent of the retry curve: the delay is at
// most BackoffBaseS << min(Attempts-1, MaxBackoffShift), at most 2^62 s,
// and the ready time saturates instead of overflowing.
const MaxBackoffShift = 30

// MaxRetryDelayS bounds the delay a worker may choose for its retry
// (RetryAfter): 24 hours.
const MaxRetryDelayS = 86400

// Job is every field of a job; Get, List, ClaimBatch and Export return
// copies (the Payload too).
type Job struct {
	ID         uint64
	Queue      string
	Payload    []byte // nil when empty
	Priority   int32  // higher is claimed first
	State      State
	RunAt      int64  // ready time: a pending job is claimable once RunAt <= now
	Seq        uint64 // enqueue order (claim-order tie-break)
	EnqueuedAt int64
	ExpiresAt  int64 // 0 = never
	Attempts   uint32
	Stamps     Stamps
	Pin        string // only a claimant host of this name may claim the job; "" = any (EnqueueOpts.Host)
	Host       string // claimant host while processing; kept on dead jobs, cleared on retry and redrive
	Resource   uint32 // resource requirement, carried as data; 0 = none

	ClaimedAt      int64 // start of the latest claim; kept across retry, cleared by redrive
	ClaimExpiresAt int64 // deadline of the current claim; 0 when pending
	LastError      string
	DiedAt         int64

	// Claims counts every handout of the job and, unlike Attempts, is never
	// reset (Redrive resets Attempts). A claim's Handle carries it, so a
	// handle from before a redrive can never match a later claim.
	Claims uint32
	// Claim is the stamp of the latest claim (the record that made it);
	// like Claims it is set by every claim and never cleared. Zero until
	// the first claim.
	Claim ClaimStamp
}

// ClaimStamp names the record whose application made a claim: the term and
// LSN of that WAL record, given by the caller of ClaimBatch. A log
// position names one record of one history, so a handle carrying it can
// match only the claim that record made, never one a different history
// (a deposed primary's lost suffix, say) made of the same job with the
// same claim count. LSN 0 names no record.
type ClaimStamp struct {
	Term uint64
	LSN  uint64
}

// Handle identifies one claim: the caller's claim of job ID.
type Handle struct {
	ID uint64
	// Attempt is the job's Claims at the handout. It equals the job's
	// Attempts until an operator Redrive resets the attempt budget; use
	// Job.Handle rather than building a Handle from Attempts.
	Attempt uint32
	// Claim is the stamp of the claim (Job.Claim at the handout).
	Claim ClaimStamp
}

// Handle returns the handle of the claim that handed out j.
func (j Job) Handle() Handle { return Handle{ID: j.ID, Attempt: j.Claims, Claim: j.Claim} }

// EnqueueOpts are the per-call inputs of Enqueue.
type EnqueueOpts struct {
	Priority int32
	Delay    int64  // seconds after now; wins over RunAt when non-zero (seed "delay-over-run_at"); >= 0
	RunAt    int64  // absolute ready time, Unix seconds; 0 or in the past = now
	Expires  int64  // lifetime in seconds relative to now; 0 = never; >= 0
	Resource uint32 // 0 = none
	Host     string // pin: only this claimant host may claim the job; "" = any
	// Key is the submit's idempotency key ("" = none; at most MaxKeyLen
	// bytes): the job is held under it for KeyWindow seconds (keys.go).
	// The caller asks KeyedJob first: Enqueue refuses a key still held.
	Key       string
	KeyWindow int64
}

// Errors of Enqueue, Register and Import.
var (
	ErrEmptyQueueName = errors.New("queue: empty queue name")
	ErrBadStamps      = errors.New("queue: bad stamps (max_attempts and visibility_timeout_s must be >= 1)")
	ErrBadOpts        = errors.New("queue: bad options (negative delay or expiry)")
	ErrBadKey         = errors.New("queue: bad idempotency key (at most 128 bytes, a window of at least 1 s)")
	ErrKeyHeld        = errors.New("queue: idempotency key already names a job")
	ErrBadRetryDelay  = fmt.Errorf("queue: retry delay outside 0..%d seconds", MaxRetryDelayS)
)

func (j *job) copyJob() Job {
	out := j.toJob()
	out.Payload = bytes.Clone(out.Payload)
	return out
}

// own returns the job to change in place of e: e itself if no View taken
// since e was made shares it, else a copy of e (and of its claimInfo; the
// payload and the stamps are never written, so they stay shared) that
// replaces e in the job table and in every heap holding it, so that the
// Views keep e as it was (copy on write). The caller uses the job own
// returns from then on.
func (q *Queues) own(e *job) *job {
	if e.owned == q.gen {
		return e
	}
	c := *e
	if c.x != nil {
		x := *c.x
		c.x = &x
	}
	c.owned = q.gen
	q.jobs.put(c.ID, &c)
	if h := q.laneHeap(e); h != nil {
		h.at(int(e.slot)).e = &c
	}
	if g := q.globalHeap(e); g != nil {
		g.at(int(e.gslot)).e = &c
	}
	return &c
}

// laneHeap is the lane heap holding e, nil if none.
func (q *Queues) laneHeap(e *job) *jobHeap {
	l := e.lane
	switch e.lh {
	case hWaiting:
		return &l.waiting
	case hReady:
		return l.ready[e.pin()]
	case hExhausted:
		return &l.exhausted
	case hParked:
		return &l.parked
	default:
		return nil
	}
}

// more is e's claimInfo to write, added if e has none. The caller owns e.
// globalHeap is the global heap holding e (the expiry heap while e is
// live, the retention heap once dead), nil if none.
func (q *Queues) globalHeap(e *job) *jobHeap {
	switch {
	case e.gslot < 0:
		return nil
	case e.State == Dead:
		return &q.retain
	default:
		return &q.expiry
	}
}

func (e *job) more() *claimInfo {
	if e.x == nil {
		e.x = new(claimInfo)
	}
	return e.x
}

// lane is the index of one queue.
type lane struct {
	name      string
	waiting   jobHeap
	exhausted jobHeap
	parked    jobHeap
	ready     map[string]*jobHeap // by Pin

	pending, processing, dead int
	runAts                    runAtSet    // the ready times of the pending jobs (OldestPending)
	through                   *Throughput // the queue's counters, kept when the lane is dropped
}

func (l *lane) readyHeap(pin string) *jobHeap {
	h := l.ready[pin]
	if h == nil {
		h = &jobHeap{kind: hReady}
		l.ready[pin] = h
	}
	return h
}

// count adds d (1 or -1) jobs of state s to the lane's counts; runAt is
// the job's RunAt, which the lane keeps for its pending jobs.
func (l *lane) count(s State, runAt int64, d int) {
	switch s {
	case Pending:
		l.pending += d
		if d > 0 {
			l.runAts.add(runAt)
		} else {
			l.runAts.remove(runAt)
		}
	case Processing:
		l.processing += d
	case Dead:
		l.dead += d
	}
}

// Queues is the whole job state: every job of every queue and the
// schedules.
type Queues struct {
	jobs   table[job]
	lanes  map[string]*lane
	expiry jobHeap
	retain jobHeap
	scheds []*schedule // sorted by Name
	keys   keyTable    // idempotency keys (keys.go)
	// through holds each queue's counters (metrics.go), by name: not
	// state, so no View, Export or Import carries them.
	through map[string]*Throughput

	// Intern tables (job.go): the jobs' stamps and host names, and the
	// stamps interned last (a queue's jobs share them: one comparison
	// instead of a lookup by a 16-byte key).
	stampTab   map[Stamps]*Stamps
	nameTab    map[string]string
	lastStamps *Stamps
	lastName   string // interned last (name)
	lastLane   *lane  // found last (findLane); never one dropped

	nextID, nextSeq uint64
	// gen counts Views: a job created or copied in generation gen is not
	// shared with any View (own).
	gen uint32
}

// New returns an empty state. Job IDs and Seqs start at 1.
func New() *Queues {
	return &Queues{
		jobs:     newTable[job](),
		lanes:    make(map[string]*lane),
		expiry:   jobHeap{kind: hExpiry},
		retain:   jobHeap{kind: hRetain},
		stampTab: make(map[Stamps]*Stamps),
		nameTab:  make(map[string]string),
		through:  make(map[string]*Throughput),
		nextID:   1,
		nextSeq:  1,
		gen:      1,
	}
}

// lane is the lane of queue name, made if there is none.
func (q *Queues) lane(name string) *lane {
	l := q.findLane(name)
	if l == nil {
		l = &lane{
			name:      name,
			waiting:   jobHeap{kind: hWaiting},
			exhausted: jobHeap{kind: hExhausted},
			parked:    jobHeap{kind: hParked},
			ready:     make(map[string]*jobHeap),
			through:   q.throughput(name),
		}
		q.lanes[name] = l
		q.lastLane = l
	}
	return l
}

// findLane is the lane of queue name, nil if there is none. The lane found
// last is kept: the records of a log name the same few queues.
func (q *Queues) findLane(name string) *lane {
	if l := q.lastLane; l != nil && l.name == name {
		return l
	}
	l := q.lanes[name]
	if l != nil {
		q.lastLane = l
	}
	return l
}

// dropLane removes l, which holds no job.
func (q *Queues) dropLane(l *lane) {
	delete(q.lanes, l.name)
	if q.lastLane == l {
		q.lastLane = nil
	}
}

func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

// Enqueue adds a job to queue with the stamps st and returns it.
//
// Resolution: a non-zero Delay gives RunAt = now + Delay and wins over
// o.RunAt; otherwise RunAt = o.RunAt, or now when that is 0 or in the past.
// ExpiresAt = now + Expires (0 = never). EnqueuedAt = now.
//
// The job returned carries payload itself, not a copy of the queue's own:
// the caller holds those bytes already, and a second copy of every
// payload was a tenth of what a primary allocated while inserting.
func (q *Queues) Enqueue(now int64, queue string, payload []byte, st Stamps, o EnqueueOpts) (Job, error) {
	e, err := q.enqueueChecked(now, queue, payload, st, o)
	if err != nil {
		return Job{}, err
	}
	out := e.toJob()
	if len(payload) > 0 {
		out.Payload = payload // an empty one is stored, and shown, as nil
	}
	return out, nil
}

// EnqueueID is Enqueue returning only the new job's ID, not a copy of the
// job (with its payload): for a caller that discards the reply, as
// replaying a log does.
func (q *Queues) EnqueueID(now int64, queue string, payload []byte, st Stamps, o EnqueueOpts) (uint64, error) {
	e, err := q.enqueueChecked(now, queue, payload, st, o)
	if err != nil {
		return 0, err
	}
	return e.ID, nil
}

// enqueueChecked validates Enqueue's inputs and enqueues a copy of payload.
func (q *Queues) enqueueChecked(now int64, queue string, payload []byte, st Stamps, o EnqueueOpts) (*job, error) {
	switch {
	case queue == "":
		return nil, ErrEmptyQueueName
	case !st.valid():
		return nil, ErrBadStamps
	case o.Delay < 0 || o.Expires < 0:
		return nil, ErrBadOpts
	case o.Key != "" && (len(o.Key) > MaxKeyLen || o.KeyWindow < 1):
		return nil, ErrBadKey
	}
	if _, held, _ := q.KeyedJob(now, queue, payload, o); held {
		return nil, fmt.Errorf("%w: key %q of queue %q", ErrKeyHeld, o.Key, queue)
	}
	var p []byte
	if len(payload) > 0 {
		p = bytes.Clone(payload)
	}
	e := q.enqueue(now, queue, p, st, o)
	if o.Key != "" {
		q.holdKey(now, queue, e.ID, payload, o)
	}
	return e, nil
}

// enqueue is Enqueue on validated inputs (also the scheduler's fire path);
// the job holds payload itself, which is never written.
func (q *Queues) enqueue(now int64, queue string, payload []byte, st Stamps, o EnqueueOpts) *job {
	runAt := now
	if o.Delay != 0 {
		runAt = addSat(now, o.Delay)
	} else if o.RunAt > now {
		runAt = o.RunAt
	}
	var expiresAt int64
	if o.Expires != 0 {
		expiresAt = addSat(now, o.Expires)
	}
	j := &job{
		ID: q.nextID, Payload: payload, Priority: o.Priority, State: Pending,
		RunAt: runAt, Seq: q.nextSeq, EnqueuedAt: now, ExpiresAt: expiresAt,
		st: q.stamps(st), Resource: o.Resource,
	}
	if o.Host != "" {
		j.x = &claimInfo{Pin: q.name(o.Host)}
	}
	q.nextID++
	q.nextSeq++
	e := q.insert(j, queue, now)
	e.lane.through.Enqueued++
	return e
}

// insert adds e (any state, new: in no index) of queue to the job table
// and every index; now places a ready pending job (see place).
func (q *Queues) insert(e *job, queue string, now int64) *job {
	e.owned, e.lh, e.slot, e.gslot = q.gen, noHeap, -1, -1
	q.jobs.put(e.ID, e)
	q.setLane(e, queue)
	if e.State == Dead {
		if e.st.DeadLetterRetentionS != 0 {
			q.retain.push(e)
		}
		return e
	}
	q.place(e, now)
	if e.ExpiresAt != 0 {
		q.expiry.push(e)
	}
	return e
}

// setLane counts e, in no lane, in the lane of queue, whose name is then
// its queue's (one string per queue). The caller owns e.
func (q *Queues) setLane(e *job, queue string) {
	e.lane = q.lane(queue)
	e.lane.count(e.State, e.RunAt, 1)
}

// place puts a live job (in no lane heap) into the lane heap its state
// calls for: a processing one into exhausted (last attempt) or waiting (for
// its claim to lapse); a pending one into its ready heap when RunAt <= now,
// else into waiting, from which ClaimBatch promotes it once ready. Where a
// pending job waits never changes a result: ClaimBatch considers every
// candidate of both heaps.
func (q *Queues) place(e *job, now int64) {
	l := e.lane
	switch {
	case e.State == Processing && e.attempts() >= e.st.MaxAttempts:
		l.exhausted.push(e)
	case e.State == Pending && e.RunAt <= now:
		l.readyHeap(e.pin()).push(e)
	default:
		l.waiting.push(e)
	}
}

func (q *Queues) unplace(e *job) {
	if h := q.laneHeap(e); h != nil {
		h.remove(e)
	}
}

// setState moves e to state s, keeping the lane counts. The caller owns e
// and sets a RunAt that changes with the move before it.
func (e *job) setState(s State) {
	e.lane.count(e.State, e.RunAt, -1)
	e.State = s
	e.lane.count(s, e.RunAt, 1)
}

// kill dead-letters a live job.
func (q *Queues) kill(e *job, now int64, msg string) {
	q.unplace(e)
	if e.gslot >= 0 {
		q.expiry.remove(e)
	}
	e = q.own(e)
	e.setState(Dead)
	e.lane.through.Dead++
	x := e.more()
	x.LastError = msg
	x.DiedAt = now
	if e.st.DeadLetterRetentionS != 0 {
		q.retain.push(e)
	}
}

// drop deletes e from the state.
func (q *Queues) drop(e *job) {
	q.unplace(e)
	if g := q.globalHeap(e); g != nil {
		g.remove(e)
	}
	q.jobs.delete(e.ID)
	l := e.lane
	l.count(e.State, e.RunAt, -1)
	if l.pending == 0 && l.processing == 0 && l.dead == 0 {
		q.dropLane(l)
	}
}

// AdvanceNextID raises the ID the next enqueued job gets to at least
// floor (never lowers it). The caller uses it to give each history its own
// range of IDs (sm: the first record of every term).
func (q *Queues) AdvanceNextID(floor uint64) { q.nextID = max(q.nextID, floor) }

// ClaimBatch hands out up to max jobs of queue to the claimant host, in the
// order Priority DESC, ready time ASC, Seq ASC, where the ready time of a
// pending job is its RunAt and that of a processing job whose claim lapsed
// is its ClaimExpiresAt.
//
// Candidates are the ready pending jobs (RunAt <= now) and the processing
// jobs whose claim lapsed (ClaimExpiresAt <= now: a reclaim, which consumes
// an attempt), whose Pin is "" or host, and which have not expired
// (ExpiresAt == 0 || ExpiresAt > now; expired ones wait for SweepExpired).
// First, every processing job of the queue whose claim lapsed with its
// attempts exhausted is moved to Dead ("max attempts exceeded"): such a job
// is never handed out. Each handed job gets Attempts+1, Claims+1, State
// Processing, Host = host, ClaimedAt = now, ClaimExpiresAt = now + its
// own VisibilityTimeoutS and Claim = at (the stamp its Handle carries).
//
// An empty host, max <= 0 or a stamp naming no record (at.LSN == 0) is
// refused (nil, nothing changes).
func (q *Queues) ClaimBatch(now int64, queue, host string, max int, at ClaimStamp) []Job {
	return q.ClaimBatchWithin(now, queue, host, max, Budget{}, at)
}

// SizeBound bounds the bytes j takes in a binary (protobuf) reply: its
// variable-length fields plus a fixed allowance for the rest.
func (j Job) SizeBound() int {
	return sizeBound(len(j.Payload), len(j.Queue), len(j.Pin), len(j.Host), len(j.LastError))
}

// SizeIn bounds the bytes j takes in a reply in enc.
func (j Job) SizeIn(enc Encoding) int {
	if enc == JSON {
		return JSONSizeBound(len(j.Payload), len(j.Queue)+len(j.Pin)+len(j.Host)+len(j.LastError))
	}
	return j.SizeBound()
}

func sizeBound(payload, queue, pin, host, lastError int) int {
	return payload + queue + pin + host + lastError + 256
}

// Encoding is the encoding of a reply that carries jobs, for their size
// bound.
type Encoding uint8

const (
	Binary Encoding = iota // protobuf
	JSON                   // protobuf's JSON mapping (protojson)
)

// JSONJobFixed bounds the JSON of a job without its payload and strings:
// every field name, every number at its longest (64-bit ones quoted),
// the longest state name, the quotes and separators.
const JSONJobFixed = 1024

// JSONSizeBound bounds the JSON of a job with a payload of payload bytes
// and strings (queue, pin, host, last error) of strs bytes together: the
// payload in base64 (4 bytes per 3, padded), each string byte escaped at
// worst as \u00XX (6 bytes: a control byte), and JSONJobFixed.
func JSONSizeBound(payload, strs int) int {
	return 4*((payload+2)/3) + 6*strs + JSONJobFixed
}

// Budget bounds the jobs one reply hands out: their SizeIn(Enc) together
// at most Bytes (0: no bound).
type Budget struct {
	Bytes int
	Enc   Encoding
}

// ClaimBatchWithin is ClaimBatch that stops before the claimed jobs'
// size in the reply's encoding would pass the budget, so that the reply
// handing them out fits its message: the first candidate is always
// claimed, and the ones left stay ready for the next claim, never
// stranded in a reply that cannot be sent.
func (q *Queues) ClaimBatchWithin(now int64, queue, host string, max int, budget Budget, at ClaimStamp) []Job {
	var out []Job
	q.claimBatch(now, queue, host, max, budget, at, &out)
	return out
}

// ClaimBatchCount is ClaimBatchWithin returning only how many jobs it
// claimed, not copies of them: for a caller that discards the reply, as
// replaying a log does. The state it leaves is ClaimBatchWithin's.
func (q *Queues) ClaimBatchCount(now int64, queue, host string, max int, budget Budget, at ClaimStamp) int {
	return q.claimBatch(now, queue, host, max, budget, at, nil)
}

// claimBatch is ClaimBatchWithin: it claims up to max jobs and returns how
// many, appending a copy of each to *out unless out is nil.
func (q *Queues) claimBatch(now int64, queue, host string, max int, budget Budget, at ClaimStamp, out *[]Job) int {
	l := q.findLane(queue)
	if host == "" || max <= 0 || at.LSN == 0 || l == nil {
		return 0
	}
	for e := l.exhausted.top(); e != nil && e.claimExpiresAt() <= now; e = l.exhausted.top() {
		q.kill(e, now, ErrMsgExhausted)
	}
	// Bring in everything that may be a candidate now. A ready heap may
	// still hold entries that are not (time went backwards): the loop below
	// sends them back as it meets them.
	for e := l.parked.top(); e != nil && e.ExpiresAt > now; e = l.parked.top() {
		l.parked.remove(e)
		l.readyHeap(e.pin()).push(e)
	}
	for e := l.waiting.top(); e != nil && readyAt(e) <= now; e = l.waiting.top() {
		l.waiting.remove(e)
		l.readyHeap(e.pin()).push(e)
	}
	shared, mine := l.ready[""], l.ready[host]
	claimed, used := 0, 0
	for claimed < max {
		var h *jobHeap
		switch {
		case shared != nil && shared.len() > 0 && (mine == nil || mine.len() == 0 || less(hReady, shared.top(), mine.top())):
			h = shared
		case mine != nil && mine.len() > 0:
			h = mine
		}
		if h == nil {
			break
		}
		e := h.pop()
		if readyAt(e) > now {
			l.waiting.push(e)
			continue
		}
		if e.ExpiresAt != 0 && e.ExpiresAt <= now {
			l.parked.push(e)
			continue
		}
		size := e.sizeIn(budget.Enc)
		if budget.Bytes > 0 && claimed > 0 && used+size > budget.Bytes {
			h.push(e) // for the next claim
			break
		}
		used += size
		e = q.own(e)
		if e.State != Processing {
			e.setState(Processing)
		}
		x := e.more()
		x.Attempts++
		x.Claims++
		x.Claim = at
		x.Host = q.name(host)
		x.ClaimedAt = now
		x.ClaimExpiresAt = addSat(now, int64(e.st.VisibilityTimeoutS))
		q.place(e, now)
		claimed++
		l.through.Claimed++
		if out != nil {
			if *out == nil {
				*out = make([]Job, 0, min(max, 16))
			}
			*out = append(*out, e.copyJob())
		}
	}
	return claimed
}

// claimOf returns the job h names if the validity predicate holds: the job
// exists, is Processing, h is its current claim (claim count and claim
// stamp both match), and the claim has not lapsed (now < ClaimExpiresAt).
func (q *Queues) claimOf(now int64, h Handle) *job {
	e := q.jobs.get(h.ID)
	if e == nil || e.State != Processing || e.claims() != h.Attempt || e.info().Claim != h.Claim || now >= e.claimExpiresAt() {
		return nil
	}
	return e
}

// Ack completes the caller's claim: the job is deleted. False (nothing
// changes) unless the validity predicate holds.
func (q *Queues) Ack(now int64, h Handle) bool {
	e := q.claimOf(now, h)
	if e == nil {
		return false
	}
	e.lane.through.Acked++
	q.drop(e)
	return true
}

// AckBatch acks each handle in order and reports each result.
func (q *Queues) AckBatch(now int64, hs []Handle) []bool {
	out := make([]bool, len(hs))
	for i, h := range hs {
		out[i] = q.Ack(now, h)
	}
	return out
}

// Heartbeat extends the caller's claim to now + VisibilityTimeoutS (never
// shortening it). False unless the validity predicate holds.
func (q *Queues) Heartbeat(now int64, h Handle) bool {
	e := q.claimOf(now, h)
	if e == nil {
		return false
	}
	if d := addSat(now, int64(e.st.VisibilityTimeoutS)); d > e.claimExpiresAt() {
		q.unplace(e)
		e = q.own(e)
		e.more().ClaimExpiresAt = d
		q.place(e, now)
	}
	return true
}

// Retry gives the caller's claim up with an error: the job goes back to
// Pending with RunAt = now + Backoff(BackoffBaseS, Attempts, ID),
// LastError = errMsg, Host and ClaimExpiresAt cleared; or, when its
// attempts are exhausted, to Dead with "max attempts exceeded". False
// unless the validity predicate holds.
func (q *Queues) Retry(now int64, h Handle, errMsg string) bool {
	return q.RetryAfter(now, h, errMsg, 0)
}

// CheckRetryDelay is the one check of a worker's retry delay (seconds):
// 0 (the queue's backoff) to MaxRetryDelayS.
func CheckRetryDelay(delay int64) error {
	if delay < 0 || delay > MaxRetryDelayS {
		return fmt.Errorf("%w: %d", ErrBadRetryDelay, delay)
	}
	return nil
}

// RetryAfter is Retry with the delay the worker chose: with delay > 0 the
// job is ready at now + delay exactly (no backoff, no jitter); 0 is
// Retry. A delay CheckRetryDelay refuses is refused (false, nothing
// changes), as is a handle the validity predicate refuses.
func (q *Queues) RetryAfter(now int64, h Handle, errMsg string, delay int64) bool {
	if CheckRetryDelay(delay) != nil {
		return false
	}
	e := q.claimOf(now, h)
	if e == nil {
		return false
	}
	if e.attempts() >= e.st.MaxAttempts {
		q.kill(e, now, ErrMsgExhausted)
		return true
	}
	if delay == 0 {
		delay = Backoff(e.st.BackoffBaseS, e.attempts(), e.ID)
	}
	q.unplace(e)
	e = q.own(e)
	e.RunAt = addSat(now, delay)
	e.setState(Pending)
	e.lane.through.Retried++
	x := e.more()
	x.LastError = errMsg
	x.Host = ""
	x.ClaimExpiresAt = 0
	q.place(e, now)
	return true
}

// Backoff is the retry delay in seconds of job id after its attempts-th
// attempt: exponential backoff with "equal jitter". The ceiling is
// d = base << min(attempts-1, MaxBackoffShift); the delay is
// ceil(d/2) + r mod (floor(d/2)+1), within [ceil(d/2), d], where r is
// JitterDraw(id, attempts). The draw is a hash, not a random number, so
// the primary, every standby and every replay compute the same delay,
// while jobs that failed together (one broken dependency) come back
// spread over the upper half of the window instead of all at once.
func Backoff(base, attempts uint32, id uint64) int64 {
	d := backoffCeiling(base, attempts)
	half := d / 2
	return d - half + int64(JitterDraw(id, attempts)%uint64(half+1))
}

func backoffCeiling(base, attempts uint32) int64 {
	shift := uint32(0)
	if attempts > 1 {
		shift = min(attempts-1, MaxBackoffShift)
	}
	return int64(base) << shift
}

// JitterDraw is the backoff's pseudo-random draw for job id's attempts-th
// attempt: the SplitMix64 finaliser of id + attempts * 0x9E3779B97F4A7C15.
func JitterDraw(id uint64, attempts uint32) uint64 {
	x := id + uint64(attempts)*0x9E3779B97F4A7C15
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// Fail dead-letters the caller's claim: LastError = errMsg ("failed" when
// empty), DiedAt = now. False unless the validity predicate holds.
func (q *Queues) Fail(now int64, h Handle, errMsg string) bool {
	e := q.claimOf(now, h)
	if e == nil {
		return false
	}
	if errMsg == "" {
		errMsg = ErrMsgFailed
	}
	q.kill(e, now, errMsg)
	return true
}

// Cancel is the operator's delete of a Pending job. A Processing job (its
// claimant owns it) or a Dead one is refused, as is an unknown ID.
func (q *Queues) Cancel(now int64, id uint64) bool {
	_ = now // recorded by the WAL with every call; no rule depends on it
	e := q.jobs.get(id)
	if e == nil || e.State != Pending {
		return false
	}
	q.drop(e)
	return true
}

// SweepExpired dead-letters, in every queue, each processing job whose
// claim lapsed with its attempts exhausted ("max attempts exceeded") and
// then each pending or processing job with ExpiresAt != 0 && ExpiresAt <=
// now ("expired"), and deletes each dead job whose DiedAt +
// DeadLetterRetentionS <= now (retention 0 = kept forever).
func (q *Queues) SweepExpired(now int64) (moved, deleted int) {
	names := make([]string, 0, len(q.lanes))
	for name := range q.lanes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		l := q.lanes[name]
		for e := l.exhausted.top(); e != nil && e.claimExpiresAt() <= now; e = l.exhausted.top() {
			q.kill(e, now, ErrMsgExhausted)
			moved++
		}
	}
	for e := q.expiry.top(); e != nil && e.ExpiresAt <= now; e = q.expiry.top() {
		q.kill(e, now, ErrMsgExpired)
		moved++
	}
	for e := q.retain.top(); e != nil && purgeAt(e) <= now; e = q.retain.top() {
		q.drop(e)
		deleted++
	}
	return moved, deleted
}

// Get returns every field of job id, whatever its state.
func (q *Queues) Get(id uint64) (Job, bool) {
	e := q.jobs.get(id)
	if e == nil {
		return Job{}, false
	}
	return e.copyJob(), true
}

// Redrive is the operator's restart of a Dead job: it becomes Pending,
// ready at now, with Attempts = 0 and LastError, DiedAt, Host, ClaimedAt,
// ClaimExpiresAt cleared; a job with an expiry gets its original lifetime
// again from now (ExpiresAt = now + ExpiresAt - EnqueuedAt). Claims, Seq,
// EnqueuedAt and the stamps are kept. False unless the job is Dead.
func (q *Queues) Redrive(now int64, id uint64) bool {
	e := q.jobs.get(id)
	if e == nil || e.State != Dead {
		return false
	}
	if e.gslot >= 0 {
		q.retain.remove(e)
	}
	e = q.own(e)
	e.RunAt = now
	e.setState(Pending)
	if x := e.x; x != nil {
		x.Attempts = 0
		x.LastError = ""
		x.DiedAt = 0
		x.Host = ""
		x.ClaimedAt = 0
		x.ClaimExpiresAt = 0
	}
	if e.ExpiresAt != 0 {
		e.ExpiresAt = addSat(now, e.ExpiresAt-e.EnqueuedAt)
		q.expiry.push(e)
	}
	q.place(e, now)
	return true
}

// List returns the jobs of queue ("" = every queue) sorted by ID.
func (q *Queues) List(queue string) []Job {
	var out []Job
	for _, e := range q.jobs.all() {
		if queue == "" || e.Queue() == queue {
			out = append(out, e.copyJob())
		}
	}
	return out
}

// Counts returns how many jobs of queue ("" = every queue) are in each
// state.
func (q *Queues) Counts(queue string) (pending, processing, dead int) {
	if queue != "" {
		if l := q.lanes[queue]; l != nil {
			return l.pending, l.processing, l.dead
		}
		return 0, 0, 0
	}
	for _, l := range q.lanes { // unordered: sums
		pending += l.pending
		processing += l.processing
		dead += l.dead
	}
	return pending, processing, dead
}

// QueueNames returns the names of the queues that hold jobs, sorted.
func (q *Queues) QueueNames() []string {
	names := make([]string, 0, len(q.lanes))
	for name := range q.lanes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// SweepDue reports whether SweepExpired at now would change anything: a
// lapsed claim with its attempts exhausted, an expired job, or a dead job
// past retention. O(lanes) (heap tops only).
func (q *Queues) SweepDue(now int64) bool {
	if e := q.expiry.top(); e != nil && e.ExpiresAt <= now {
		return true
	}
	if e := q.retain.top(); e != nil && purgeAt(e) <= now {
		return true
	}
	for _, l := range q.lanes { // unordered: whether any lane is due
		if e := l.exhausted.top(); e != nil && e.claimExpiresAt() <= now {
			return true
		}
	}
	return false
}
