package queue

// job is a job as the state holds it: Job's fields, compacted (issue 9
// item 5; docs/performance.md, "Memory per job"), with its positions in
// the indexes. A queued job that was never claimed is 112 bytes here
// beside its payload, where a Job is 216:
//
//   - the queue name is the lane's (one string per queue, not per job);
//   - the stamps point into a table of the distinct stamps (they come from
//     the queue's config, so all the jobs of a queue share them);
//   - the fields of a claim (its counts too), a death and a pin are in
//     claimInfo, which a job gets the first time one of them is set;
//   - a job is in at most one of the global heaps (the expiry heap while
//     live, the retention heap once dead): one position serves both.
//
// A job's fields are never written once a View may share it: own
// replaces it first, in the job table and the heaps, with a copy the
// View does not share. Only the index positions (lh, slot, gslot) of a
// shared job are still written, and no View reads them (and owned, when
// the generation wraps: Queues.View).
type job struct {
	ID         uint64
	Seq        uint64
	RunAt      int64
	EnqueuedAt int64
	ExpiresAt  int64
	Payload    []byte // never written: shared with Views and with the jobs Tick fires
	lane       *lane  // the job's queue (its name is the lane's)
	st         *Stamps
	x          *claimInfo // nil: every field of it is zero
	owned      uint32     // the Queues generation whose job this is (own)
	Priority   int32
	Resource   uint32
	slot       int32 // position in the lane heap lh names
	gslot      int32 // position in Queues.expiry (live) or Queues.retain (dead), -1 = absent
	State      State
	lh         heapKind // the lane heap holding the job (laneHeap); noHeap when dead
}

// claimInfo is the part of a job that a queued, unpinned, never-claimed
// job does not need.
type claimInfo struct {
	Pin            string
	Host           string
	LastError      string
	ClaimedAt      int64
	ClaimExpiresAt int64
	DiedAt         int64
	Claim          ClaimStamp
	Attempts       uint32
	Claims         uint32
}

func (j *job) Queue() string { return j.lane.name }

// info is the claimInfo fields of j (zero when it has none).
func (j *job) info() claimInfo {
	if j.x == nil {
		return claimInfo{}
	}
	return *j.x
}

func (j *job) pin() string { return j.info().Pin }

func (j *job) attempts() uint32 {
	if j.x == nil {
		return 0
	}
	return j.x.Attempts
}

func (j *job) claims() uint32 {
	if j.x == nil {
		return 0
	}
	return j.x.Claims
}
func (j *job) claimExpiresAt() int64 { return j.info().ClaimExpiresAt }
func (j *job) diedAt() int64         { return j.info().DiedAt }

// sidelined is Job.Sidelined.
func (j *job) sidelined(lf string) bool { return j.Queue() == lf || j.pin() == lf }

// sizeIn is Job.SizeIn.
func (j *job) sizeIn(enc Encoding) int {
	x := j.info()
	if enc == JSON {
		return JSONSizeBound(len(j.Payload), len(j.Queue())+len(x.Pin)+len(x.Host)+len(x.LastError))
	}
	return sizeBound(len(j.Payload), len(j.Queue()), len(x.Pin), len(x.Host), len(x.LastError))
}

// toJob is j as a Job; the payload is shared.
func (j *job) toJob() Job {
	x := j.info()
	return Job{
		ID: j.ID, Queue: j.Queue(), Payload: j.Payload, Priority: j.Priority, State: j.State,
		RunAt: j.RunAt, Seq: j.Seq, EnqueuedAt: j.EnqueuedAt, ExpiresAt: j.ExpiresAt,
		Attempts: x.Attempts, Stamps: *j.st, Pin: x.Pin, Host: x.Host, Resource: j.Resource,
		ClaimedAt: x.ClaimedAt, ClaimExpiresAt: x.ClaimExpiresAt, LastError: x.LastError, DiedAt: x.DiedAt,
		Claims: x.Claims, Claim: x.Claim,
	}
}

// fromJob is the job j holds, its payload taken (not copied) and its
// strings and stamps interned; its lane and positions are set by insert.
func (q *Queues) fromJob(j Job) *job {
	out := &job{
		ID: j.ID, Seq: j.Seq, RunAt: j.RunAt, EnqueuedAt: j.EnqueuedAt, ExpiresAt: j.ExpiresAt,
		Payload: j.Payload, st: q.stamps(j.Stamps), Priority: j.Priority,
		Resource: j.Resource, State: j.State,
	}
	x := claimInfo{Pin: q.name(j.Pin), Host: q.name(j.Host), LastError: j.LastError, ClaimedAt: j.ClaimedAt,
		ClaimExpiresAt: j.ClaimExpiresAt, DiedAt: j.DiedAt, Claim: j.Claim, Attempts: j.Attempts, Claims: j.Claims}
	if x != (claimInfo{}) {
		out.x = &x
	}
	return out
}

// maxInterned bounds each intern table: past it a new value is kept
// as given (stamps: allocated per job), so no input grows the tables
// without bound.
const maxInterned = 1024

// stamps is the shared copy of s.
func (q *Queues) stamps(s Stamps) *Stamps {
	if p := q.lastStamps; p != nil && *p == s {
		return p
	}
	if p := q.stampTab[s]; p != nil {
		q.lastStamps = p
		return p
	}
	p := &s
	if len(q.stampTab) < maxInterned {
		q.stampTab[s] = p
		q.lastStamps = p
	}
	return p
}

// name is the shared copy of a host name (a claimant or a pin): each
// record decodes its own, and many jobs hold the same few.
func (q *Queues) name(s string) string {
	if s == "" {
		return ""
	}
	if s == q.lastName { // the one interned last: a log names the same few hosts
		return q.lastName
	}
	if c, ok := q.nameTab[s]; ok {
		q.lastName = c
		return c
	}
	if len(q.nameTab) < maxInterned {
		q.nameTab[s] = s
		q.lastName = s
	}
	return s
}
