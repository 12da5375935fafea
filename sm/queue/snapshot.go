package queue

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"math"

	"github.com/xce-hpc/xce/sm/idset"
)

// Snapshot is the whole state as plain data: what a checkpoint stores.
type Snapshot struct {
	Jobs      []Job      // sorted by ID
	Schedules []Schedule // sorted by Name
	NextID    uint64     // ID the next enqueued job gets
	NextSeq   uint64     // Seq the next enqueued job gets
	Keys      []Key      // idempotency keys, oldest first (keys.go)
}

// ErrBadSnapshot is wrapped by every error of Import.
var ErrBadSnapshot = errors.New("queue: bad snapshot")

// Export returns the whole state. It shares no memory with q.
func (q *Queues) Export() Snapshot {
	s := Snapshot{
		Jobs:      make([]Job, 0, q.jobs.len()),
		Schedules: q.Schedules(),
		NextID:    q.nextID,
		NextSeq:   q.nextSeq,
		Keys:      append([]Key(nil), q.keys.heldKeys()...),
	}
	for _, e := range q.jobs.all() {
		s.Jobs = append(s.Jobs, e.copyJob())
	}
	return s
}

// Jobs yields every job in the order Export gives them, one at a time and
// without copying the state: a reader (the simulator's checkers) that
// only looks at the jobs. Payloads are shared, so they must not be
// written; the jobs must not be changed while the sequence runs.
func (q *Queues) Jobs() iter.Seq[Job] {
	return func(yield func(Job) bool) {
		for _, e := range q.jobs.all() {
			if !yield(e.toJob()) {
				return
			}
		}
	}
}

// View is the state at one moment, taken in time proportional to the
// number of the job table's pages (one per 256 ids), not of jobs: the
// table's pages and the jobs themselves are shared with the live state,
// which copies a page or a job before it changes it from then on (copy on
// write). A View is immutable, so another goroutine may read it (Export)
// while the state goes on changing.
type View struct {
	jobs      table[job] // frozen
	schedules []Schedule
	nextID    uint64
	nextSeq   uint64
	keys      []Key // shared with the live table (keyTable)
}

// View returns the current state as a View.
func (q *Queues) View() View {
	v := View{jobs: q.jobs.freeze(), schedules: q.Schedules(), nextID: q.nextID, nextSeq: q.nextSeq, keys: q.keys.heldKeys()}
	if q.gen == math.MaxUint32 {
		// The generation wraps (job.owned is 32 bits: 16 B a job less
		// with the rest): no job may keep a generation the counter
		// reaches again, so every job is marked made before generation 1.
		for _, e := range q.jobs.all() {
			e.owned = 0
		}
		q.gen = 0
	}
	q.gen++ // every job now may be shared: the next change copies it
	return v
}

// Len is the number of jobs in the view.
func (v View) Len() int { return v.jobs.len() }

// Len is how many jobs q holds.
func (q *Queues) Len() int { return q.jobs.len() }

// Export is the view as a Snapshot, jobs sorted by ID. The jobs' payloads
// are shared with the view (payloads are never written).
func (v View) Export() Snapshot {
	s := Snapshot{Jobs: make([]Job, 0, v.jobs.len()), Schedules: v.schedules, NextID: v.nextID, NextSeq: v.nextSeq, Keys: v.keys}
	for j := range v.Jobs() {
		s.Jobs = append(s.Jobs, j)
	}
	return s
}

// Jobs yields the view's jobs in ID order, one at a time (an encoder
// streams them: no copy of the whole state). Payloads are shared.
func (v View) Jobs() iter.Seq[Job] {
	return func(yield func(Job) bool) {
		for _, j := range v.jobs.all() {
			if !yield(j.toJob()) {
				return
			}
		}
	}
}

// Next is the ID and the Seq the next enqueued job gets.
func (v View) Next() (id, seq uint64) { return v.nextID, v.nextSeq }

// Schedules are the view's schedules, sorted by name (shared: read only).
func (v View) Schedules() []Schedule { return v.schedules }

// Keys is the view's idempotency keys, oldest first (shared: entries are
// never written).
func (v View) Keys() []Key { return v.keys }

// Import rebuilds a state from a snapshot (in any order), checking that it
// is one the operations can reach: unique non-zero IDs below NextID, unique
// Seqs below NextSeq, known states, valid stamps, non-empty queue names,
// Attempts <= MaxAttempts and <= Claims, a claim stamp (LSN >= 1) exactly
// when Claims > 0, a pending job with budget left
// and no claim, a processing job with a claimant, a live job not dead-dated;
// schedules with unique non-empty names, a valid spec, queue, stamps and
// fire options. The result holds the jobs' payloads of s, not copies (a
// payload is never written; recovery decodes each into a buffer of its
// own, so a copy would only double it for a moment); it shares no other
// memory with s.
func Import(s Snapshot) (*Queues, error) {
	im, err := NewImporter(s.NextID, s.NextSeq, len(s.Jobs))
	if err != nil {
		return nil, err
	}
	for _, j := range s.Jobs {
		if err := im.Job(j); err != nil {
			return nil, err
		}
	}
	for _, sc := range s.Schedules {
		if err := im.Schedule(sc); err != nil {
			return nil, err
		}
	}
	for _, k := range s.Keys {
		if err := im.Key(k); err != nil {
			return nil, err
		}
	}
	return im.Done(), nil
}

// Importer is Import one job and one schedule at a time, so that a
// snapshot decoded as a stream is never held whole beside the state built
// from it (sm's importSnapshot).
type Importer struct {
	q    *Queues
	seqs *idset.Set // the ids are checked in the job table
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadSnapshot, fmt.Sprintf(format, args...))
}

// NewImporter starts an Import of a snapshot with these counters, its
// check of duplicate seqs sized for about jobs jobs.
func NewImporter(nextID, nextSeq uint64, jobs int) (*Importer, error) {
	if nextID == 0 || nextSeq == 0 {
		return nil, bad("next id %d / next seq %d must be >= 1", nextID, nextSeq)
	}
	q := New()
	q.nextID, q.nextSeq = nextID, nextSeq
	return &Importer{q: q, seqs: idset.New(jobs)}, nil
}

// Job adds j, checked as Import does; the state holds j's payload.
func (im *Importer) Job(j Job) error {
	q := im.q
	if err := checkJob(j, q.nextID, q.nextSeq); err != nil {
		return bad("job %d: %v", j.ID, err)
	}
	if q.jobs.get(j.ID) != nil {
		return bad("duplicate job id %d", j.ID)
	}
	if !im.seqs.Add(j.Seq) {
		return bad("job %d: duplicate seq %d", j.ID, j.Seq)
	}
	if len(j.Payload) == 0 {
		j.Payload = nil
	}
	q.insert(q.fromJob(j), j.Queue, knownPast(j))
	return nil
}

// knownPast is a time the job's own history shows has passed: where an
// imported job waits never changes a result (place), but a job that was
// ready then goes straight into its ready heap, so that the first claim
// after a recovery does not promote every job of a large snapshot.
func knownPast(j Job) int64 { return max(j.EnqueuedAt, j.ClaimedAt, j.DiedAt) }

// Schedule adds sc, checked as Import does; the state holds a copy of its
// payload.
func (im *Importer) Schedule(sc Schedule) error {
	q := im.q
	rule, err := ParseSpec(sc.Spec, sc.Zone)
	switch {
	case err != nil:
		return bad("schedule %q: %v", sc.Name, err)
	case sc.Name == "":
		return bad("schedule with empty name")
	case sc.Queue == "":
		return bad("schedule %q: empty queue name", sc.Name)
	case !sc.Stamps.valid():
		return bad("schedule %q: bad stamps %+v", sc.Name, sc.Stamps)
	case sc.Fire.ExpiresS < 0:
		return bad("schedule %q: negative fire expiry", sc.Name)
	}
	i, found := q.findSchedule(sc.Name)
	if found {
		return bad("duplicate schedule %q", sc.Name)
	}
	c := &schedule{Schedule: sc, rule: rule}
	c.Payload, c.Zone = nil, nil
	if len(sc.Payload) > 0 {
		c.Payload = bytes.Clone(sc.Payload)
	}
	if len(sc.Zone) > 0 {
		c.Zone = bytes.Clone(sc.Zone)
	}
	q.scheds = append(q.scheds, nil)
	copy(q.scheds[i+1:], q.scheds[i:])
	q.scheds[i] = c
	return nil
}

// Done is the state imported; the Importer must not be used after it.
func (im *Importer) Done() *Queues {
	q := im.q
	im.q, im.seqs = nil, nil
	return q
}

func checkJob(j Job, nextID, nextSeq uint64) error {
	switch {
	case j.ID == 0 || j.ID >= nextID:
		return fmt.Errorf("id not in [1, next id %d)", nextID)
	case j.Seq == 0 || j.Seq >= nextSeq:
		return fmt.Errorf("seq %d not in [1, next seq %d)", j.Seq, nextSeq)
	case j.Queue == "":
		return errors.New("empty queue name")
	case !j.Stamps.valid():
		return fmt.Errorf("bad stamps %+v", j.Stamps)
	case j.Attempts > j.Stamps.MaxAttempts:
		return fmt.Errorf("attempts %d > max attempts %d", j.Attempts, j.Stamps.MaxAttempts)
	case j.Attempts > j.Claims:
		return fmt.Errorf("attempts %d > claims %d", j.Attempts, j.Claims)
	case j.Claims > 0 && j.Claim.LSN == 0:
		return fmt.Errorf("claimed %d times but no claim stamp", j.Claims)
	case j.Claims == 0 && j.Claim != (ClaimStamp{}):
		return fmt.Errorf("never claimed but claim stamp %+v", j.Claim)
	}
	switch j.State {
	case Pending:
		switch {
		case j.Attempts >= j.Stamps.MaxAttempts:
			return errors.New("pending with its attempts exhausted")
		case j.Host != "" || j.ClaimExpiresAt != 0:
			return errors.New("pending with a claim")
		case j.DiedAt != 0:
			return errors.New("pending with a death time")
		}
	case Processing:
		switch {
		case j.Attempts == 0:
			return errors.New("processing with no attempt")
		case j.Host == "":
			return errors.New("processing without a claimant")
		case j.DiedAt != 0:
			return errors.New("processing with a death time")
		}
	case Dead:
	default:
		return fmt.Errorf("bad state %d", j.State)
	}
	return nil
}
