package sm

import (
	"fmt"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/tzdb"
)

// LostAndFound is the synthetic queue and host (seed 002 §6.5).
const LostAndFound = schema.ReservedName

// router resolves names in WAL records against the running config. Live,
// unknown names are refused before anything is logged; on replay they are
// routed to lost_and_found (seed 002 §6.5) and reported through warn.
type router struct {
	queues    map[string]*schema.Queue
	hosts     map[string]bool
	resources map[uint32]bool
	warn      func(what string, id string) // replay only
	// routed counts the jobs routed to lost_and_found: the seed's
	// lost_and_found_job_count (§6.5), reset by a drain.
	routed int
	// The queue and host found known last: a log's records name the same
	// few (one comparison instead of a lookup).
	lastQueue, lastHost string
}

func newRouter(c *schema.ClusterConfig) *router {
	r := &router{queues: map[string]*schema.Queue{}, hosts: map[string]bool{}, resources: map[uint32]bool{}}
	for _, q := range c.GetQueues() {
		r.queues[q.GetName()] = q
	}
	for _, h := range c.GetHosts() {
		r.hosts[h.GetName()] = true
	}
	for _, res := range c.GetResources() {
		r.resources[res.GetId()] = true
	}
	return r
}

func (r *router) knownQueue(name string) bool {
	if name == r.lastQueue && name != "" {
		return true
	}
	if _, ok := r.queues[name]; ok || name == LostAndFound {
		r.lastQueue = name
		return true
	}
	return false
}

// knownHost: with no hosts configured any host may claim.
func (r *router) knownHost(h string) bool {
	if h == "" || h == r.lastHost || len(r.hosts) == 0 {
		return true
	}
	if r.hosts[h] || h == LostAndFound {
		r.lastHost = h
		return true
	}
	return false
}

func (r *router) knownResource(id uint32) bool {
	return id == 0 || len(r.resources) == 0 || r.resources[id]
}

func (r *router) queue(name string, countJob bool) string {
	if r.knownQueue(name) {
		return name
	}
	if r.warn != nil {
		r.warn("queue", name)
	}
	if countJob {
		r.routed++
	}
	return LostAndFound
}

func (r *router) host(h string) string {
	if r.knownHost(h) {
		return h
	}
	if r.warn != nil {
		r.warn("host", h)
	}
	return LostAndFound
}

func (r *router) resource(id uint32) uint32 {
	if r.knownResource(id) {
		return id
	}
	if r.warn != nil {
		r.warn("resource", fmt.Sprint(id))
	}
	return 0 // cleared; the job pends (it is pending at enqueue)
}

func stampsOf(s *schema.WalStamps) queue.Stamps {
	return queue.Stamps{VisibilityTimeoutS: s.GetVisibilityTimeoutS(), MaxAttempts: s.GetMaxAttempts(),
		BackoffBaseS: s.GetBackoffBaseS(), DeadLetterRetentionS: s.GetDeadLetterRetentionS()}
}

func walStamps(s queue.Stamps) *schema.WalStamps {
	return &schema.WalStamps{VisibilityTimeoutS: s.VisibilityTimeoutS, MaxAttempts: s.MaxAttempts,
		BackoffBaseS: s.BackoffBaseS, DeadLetterRetentionS: s.DeadLetterRetentionS}
}

func queueStamps(q *schema.Queue) queue.Stamps {
	return queue.Stamps{VisibilityTimeoutS: q.GetVisibilityTimeoutS(), MaxAttempts: q.GetMaxAttempts(),
		BackoffBaseS: q.GetBackoffBaseS(), DeadLetterRetentionS: q.GetDeadLetterRetentionS()}
}

// lostAndFoundStamps are the stamps of jobs enqueued directly to
// lost_and_found (only by replay routing of a scheduler fire).
var lostAndFoundStamps = queue.Stamps{VisibilityTimeoutS: 300, MaxAttempts: 1}

// HandleOf is the handle a wire or WAL handle names.
func HandleOf(h *schema.WalHandle) queue.Handle {
	return queue.Handle{ID: h.GetId(), Attempt: h.GetAttempt(), Claim: queue.ClaimStamp{Term: h.GetClaimTerm(), LSN: h.GetClaimLsn()}}
}

// WalHandle is the wire and WAL form of h.
func WalHandle(h queue.Handle) *schema.WalHandle {
	return &schema.WalHandle{Id: h.ID, Attempt: h.Attempt, ClaimTerm: h.Claim.Term, ClaimLsn: h.Claim.LSN}
}

// TermIDBits is how many low bits of a job id count jobs within a term:
// applying the first record of term T (its no-op) raises the next id to at
// least TermIDFloor(T) = T<<TermIDBits | 1, so the jobs of each term's
// history get ids no history of another term handed out (2^40 ids per
// term, terms up to 2^24-1).
const TermIDBits = 40

// TermIDFloor is the lowest id the jobs enqueued in term get; 1 (no
// floor) for term 0 and for terms too large for the scheme, which then
// continue the counter (docs/replication.md, "Job ids and claim handles").
func TermIDFloor(term uint64) uint64 {
	if term >= 1<<(64-TermIDBits) {
		return 1
	}
	return term<<TermIDBits | 1
}

// buildRecord turns a validated live request into its WAL record, with
// every input resolved (stamps from the queue's config; time).
func buildRecord(r *router, now int64, req JobRequest) (*schema.WalRecord, error) {
	rec := &schema.WalRecord{Now: now}
	switch req.Kind {
	case JobEnqueue:
		q := r.queues[req.Queue]
		e := &schema.WalEnqueue{Queue: req.Queue, QueueId: q.GetId(), Payload: req.Payload,
			Stamps: walStamps(queueStamps(q)), Priority: req.Priority, Delay: req.Delay, RunAt: req.RunAt, Expires: req.Expires,
			Resource: req.Resource, Host: req.Host}
		if req.Key != "" {
			// The window is logged: replay holds the key as long as
			// the live apply did, whatever the config says later.
			e.IdempotencyKey, e.IdempotencyWindowS = req.Key, schema.IdempotencyWindowS(q)
		}
		rec.Op = &schema.WalRecord_Enqueue{Enqueue: e}
	case JobEnqueueBatch:
		q := r.queues[req.Queue]
		e := &schema.WalEnqueueBatch{Queue: req.Queue, QueueId: q.GetId(), Payloads: req.Payloads,
			Stamps: walStamps(queueStamps(q)), Priority: req.Priority, Delay: req.Delay, RunAt: req.RunAt, Expires: req.Expires,
			Resource: req.Resource, Host: req.Host}
		if anyKey(req.Keys) {
			e.IdempotencyKeys, e.IdempotencyWindowS = req.Keys, schema.IdempotencyWindowS(q)
		}
		rec.Op = &schema.WalRecord_EnqueueBatch{EnqueueBatch: e}
	case JobClaim:
		rec.Op = &schema.WalRecord_ClaimBatch{ClaimBatch: &schema.WalClaimBatch{Queue: req.Queue, QueueId: r.queues[req.Queue].GetId(), Host: req.Host, Max: uint32(req.Max), Json: req.JSON}}
	case JobAck:
		rec.Op = &schema.WalRecord_Ack{Ack: &schema.WalAck{Handle: WalHandle(req.Handle)}}
	case JobAckBatch:
		hs := make([]*schema.WalHandle, len(req.Handles))
		for i, h := range req.Handles {
			hs[i] = WalHandle(h)
		}
		rec.Op = &schema.WalRecord_AckBatch{AckBatch: &schema.WalAckBatch{Handles: hs}}
	case JobHeartbeat:
		rec.Op = &schema.WalRecord_Heartbeat{Heartbeat: &schema.WalHeartbeat{Handle: WalHandle(req.Handle)}}
	case JobRetry:
		rec.Op = &schema.WalRecord_Retry{Retry: &schema.WalRetry{Handle: WalHandle(req.Handle), Error: req.Error, Delay: req.RetryDelay}}
	case JobFail:
		rec.Op = &schema.WalRecord_Fail{Fail: &schema.WalFail{Handle: WalHandle(req.Handle), Error: req.Error}}
	case JobCancel:
		rec.Op = &schema.WalRecord_Cancel{Cancel: &schema.WalCancel{Id: req.ID}}
	case JobRedrive:
		rec.Op = &schema.WalRecord_Redrive{Redrive: &schema.WalRedrive{Id: req.ID}}
	case JobSweep:
		rec.Op = &schema.WalRecord_SweepExpired{SweepExpired: &schema.WalSweepExpired{}}
	case JobRegister:
		q := r.queues[req.Queue]
		// The zone a cron spec names is resolved here, once, from the
		// database compiled into this binary; its rules travel in the
		// record (the spec itself is checked when the record is applied).
		var zone []byte
		if name, _ := queue.SpecZone(req.Spec); name != "" {
			z, err := tzdb.Lookup(name)
			if err != nil {
				return nil, fmt.Errorf("%w: %q: %w", queue.ErrBadSpec, req.Spec, err)
			}
			zone = z
		}
		rec.Op = &schema.WalRecord_Register{Register: &schema.WalRegister{Name: req.Name, Spec: req.Spec, Queue: req.Queue, QueueId: q.GetId(),
			Payload: req.Payload, Stamps: walStamps(queueStamps(q)), Fire: &schema.WalFireOpts{Priority: req.Fire.Priority, ExpiresS: req.Fire.ExpiresS},
			Zone: zone}}
	case JobUnregister:
		rec.Op = &schema.WalRecord_Unregister{Unregister: &schema.WalUnregister{Name: req.Name}}
	case JobTick:
		rec.Op = &schema.WalRecord_Tick{Tick: &schema.WalTick{}}
	case JobDrainLostAndFound:
		rec.Op = &schema.WalRecord_LostAndFoundDrain{LostAndFoundDrain: &schema.WalLostAndFoundDrain{Queue: req.Queue, Host: req.Host, Cancel: req.Cancel}}
	default:
		return nil, fmt.Errorf("operation %s is not logged", req.Kind)
	}
	return rec, nil
}

// applyRecord executes one record against q: the same function runs live
// (right after the record is built) and on replay, so replay reproduces
// exactly what clients were told. Its reply is whole (replyJobs).
func applyRecord(q *queue.Queues, r *router, rec *schema.WalRecord) (Reply, error) {
	return apply(q, r, rec, replyJobs)
}

// replayApply is applyRecord for a caller that discards the reply
// (recovery, a standby's checkpoint, ReplayRecords): the same changes to
// q and the same error, without the copies of the jobs a reply carries.
func replayApply(q *queue.Queues, r *router, rec *schema.WalRecord) error {
	_, err := apply(q, r, rec, replyNone)
	return err
}

// replyShape is how much of a reply apply builds.
type replyShape uint8

const (
	// replyNone: no reply (the queue's EnqueueID and ClaimBatchCount).
	replyNone replyShape = iota
	// replyIDs: an enqueue batch's reply names its jobs by IDs alone;
	// every other reply is whole.
	replyIDs
	// replyJobs: every reply whole, an enqueue batch's with Jobs too.
	replyJobs
)

// replyShapeOf is the reply req asks for: an enqueue batch's jobs only
// if WithJobs is set.
func replyShapeOf(req JobRequest) replyShape {
	if req.Kind == JobEnqueueBatch && !req.WithJobs {
		return replyIDs
	}
	return replyJobs
}

// apply is applyRecord with the reply shaped as shape says.
func apply(q *queue.Queues, r *router, rec *schema.WalRecord, shape replyShape) (Reply, error) {
	reply := shape != replyNone
	now := rec.GetNow()
	rep := Reply{LSN: rec.GetLsn(), At: now}
	switch op := rec.GetOp().(type) {
	case *schema.WalRecord_Enqueue:
		e := op.Enqueue
		name := r.queue(e.GetQueue(), true)
		st := stampsOf(e.GetStamps())
		o := queue.EnqueueOpts{Priority: e.GetPriority(), Delay: e.GetDelay(), RunAt: e.GetRunAt(),
			Expires: e.GetExpires(), Resource: r.resource(e.GetResource()), Host: r.host(e.GetHost()),
			Key: e.GetIdempotencyKey(), KeyWindow: int64(e.GetIdempotencyWindowS())}
		id, held, err := q.KeyedJob(now, name, e.GetPayload(), o)
		switch {
		case err != nil:
			return rep, err
		case held:
			rep.OK, rep.Deduplicated = true, []bool{true}
			if reply {
				rep.Jobs = []queue.Job{keyedJob(q, id, name, e.GetPayload(), st)}
			}
			return rep, nil
		case !reply:
			_, err := q.EnqueueID(now, name, e.GetPayload(), st, o)
			return rep, err
		}
		job, err := q.Enqueue(now, name, e.GetPayload(), st, o)
		if err != nil {
			return rep, err
		}
		rep.OK, rep.Jobs = true, []queue.Job{job}
	case *schema.WalRecord_EnqueueBatch:
		e := op.EnqueueBatch
		name := r.queue(e.GetQueue(), false)
		if name == LostAndFound && e.GetQueue() != LostAndFound {
			r.routed += len(e.GetPayloads()) // every job of the batch is routed
		}
		opts := queue.EnqueueOpts{Priority: e.GetPriority(), Delay: e.GetDelay(), RunAt: e.GetRunAt(),
			Expires: e.GetExpires(), Resource: r.resource(e.GetResource()), Host: r.host(e.GetHost())}
		// A job's copy is over 200 bytes, its id 8: the ids alone unless
		// the caller asked for the jobs (JobRequest.WithJobs). Sized once:
		// grown by doubling, the jobs took ~4% of a primary's CPU while
		// inserting.
		if reply {
			rep.IDs = make([]uint64, 0, len(e.GetPayloads()))
		}
		withJobs := shape == replyJobs
		if withJobs {
			rep.Jobs = make([]queue.Job, 0, len(e.GetPayloads()))
		}
		st := stampsOf(e.GetStamps())
		keys := e.GetIdempotencyKeys()
		if len(keys) != 0 && len(keys) != len(e.GetPayloads()) {
			return rep, fmt.Errorf("enqueue batch: %d idempotency keys for %d payloads", len(keys), len(e.GetPayloads()))
		}
		// Every key is judged before any job is enqueued: a reused one
		// refuses the whole batch, which then changed nothing.
		dups, err := keyedJobs(q, now, name, e.GetPayloads(), keys, opts, int64(e.GetIdempotencyWindowS()))
		if err != nil {
			return rep, err
		}
		rep.Deduplicated = dups.dedup
		for i, p := range e.GetPayloads() {
			var (
				job queue.Job
				err error
			)
			o := opts
			if len(keys) > 0 {
				o.Key, o.KeyWindow = keys[i], int64(e.GetIdempotencyWindowS())
			}
			if dups.dedup != nil && dups.dedup[i] {
				if reply {
					rep.IDs = append(rep.IDs, dups.ids[i])
				}
				if withJobs {
					rep.Jobs = append(rep.Jobs, keyedJob(q, dups.ids[i], name, p, st))
				}
				continue
			}
			var id uint64
			if withJobs {
				job, err = q.Enqueue(now, name, p, st, o)
				id = job.ID
			} else {
				id, err = q.EnqueueID(now, name, p, st, o)
			}
			if err != nil {
				if i == 0 {
					return rep, err // shared stamps/options: nothing enqueued
				}
				return rep, fmt.Errorf("enqueue batch: job %d: %w", i, err)
			}
			if reply {
				rep.IDs = append(rep.IDs, id)
			}
			if withJobs {
				rep.Jobs = append(rep.Jobs, job)
			}
		}
		rep.OK = true
	case *schema.WalRecord_ClaimBatch:
		c := op.ClaimBatch
		// The claim is stamped with its own record: a handle names one
		// claim record of one history (term and LSN are set before the
		// record is applied, live and on replay alike).
		at := queue.ClaimStamp{Term: rec.GetTerm(), LSN: rec.GetLsn()}
		name, host := r.queue(c.GetQueue(), false), r.host(c.GetHost())
		// The reply's encoding, logged with the claim, sizes it: replay
		// claims the jobs the live claim did.
		budget := budgetFor(c.GetJson())
		if !reply {
			rep.OK = q.ClaimBatchCount(now, name, host, int(c.GetMax()), budget, at) > 0
			break
		}
		rep.Jobs = q.ClaimBatchWithin(now, name, host, int(c.GetMax()), budget, at)
		rep.OK = len(rep.Jobs) > 0
	case *schema.WalRecord_Ack:
		rep.OK = q.Ack(now, HandleOf(op.Ack.GetHandle()))
	case *schema.WalRecord_AckBatch:
		if !reply { // AckBatch is an Ack of each handle in turn
			for _, h := range op.AckBatch.GetHandles() {
				q.Ack(now, HandleOf(h))
			}
			break
		}
		hs := make([]queue.Handle, len(op.AckBatch.GetHandles()))
		for i, h := range op.AckBatch.GetHandles() {
			hs[i] = HandleOf(h)
		}
		rep.OKs = q.AckBatch(now, hs)
	case *schema.WalRecord_Heartbeat:
		rep.OK = q.Heartbeat(now, HandleOf(op.Heartbeat.GetHandle()))
	case *schema.WalRecord_Retry:
		rep.OK = q.RetryAfter(now, HandleOf(op.Retry.GetHandle()), op.Retry.GetError(), op.Retry.GetDelay())
	case *schema.WalRecord_Fail:
		rep.OK = q.Fail(now, HandleOf(op.Fail.GetHandle()), op.Fail.GetError())
	case *schema.WalRecord_Cancel:
		rep.OK = q.Cancel(now, op.Cancel.GetId())
	case *schema.WalRecord_Redrive:
		rep.OK = q.Redrive(now, op.Redrive.GetId())
	case *schema.WalRecord_SweepExpired:
		rep.Moved, rep.Deleted = q.SweepExpired(now)
		rep.OK = true
	case *schema.WalRecord_Register:
		g := op.Register
		st := stampsOf(g.GetStamps())
		name := r.queue(g.GetQueue(), false)
		if name == LostAndFound && g.GetQueue() != LostAndFound {
			st = lostAndFoundStamps
		}
		if err := q.RegisterZone(now, g.GetName(), g.GetSpec(), g.GetZone(), name, g.GetPayload(), st,
			queue.FireOpts{Priority: g.GetFire().GetPriority(), ExpiresS: g.GetFire().GetExpiresS()}); err != nil {
			return rep, err
		}
		rep.OK = true
	case *schema.WalRecord_Unregister:
		rep.OK = q.Unregister(op.Unregister.GetName())
	case *schema.WalRecord_Tick:
		rep.Jobs = q.Tick(now)
		rep.OK = true
	case *schema.WalRecord_LostAndFoundDrain:
		d := op.LostAndFoundDrain
		// On replay a target since removed resolves to lost_and_found,
		// which the queue refuses: the jobs stay sidelined.
		to, host := d.GetQueue(), d.GetHost()
		if !d.GetCancel() {
			to, host = r.queue(to, false), r.host(host)
		}
		rep.Moved = q.DrainSidelined(now, LostAndFound, to, host, d.GetCancel())
		rep.OK = d.GetCancel() || to != LostAndFound && host != LostAndFound
		if rep.OK {
			r.routed = 0
		}
	case *schema.WalRecord_Noop:
		// A term's first record: its jobs get ids no other term's history
		// handed out.
		q.AdvanceNextID(TermIDFloor(rec.GetTerm()))
		rep.OK = true
	default:
		return rep, fmt.Errorf("WAL record %d has no known operation", rec.GetLsn())
	}
	return rep, nil
}

// keyedJob is the job an earlier submit with the same key made, as a
// deduplicated reply carries it: as it is now, or, when it is gone
// (acked, cancelled, purged), its id with the submit's payload (the key
// matched, so the payloads are equal) and stamps.
func keyedJob(q *queue.Queues, id uint64, name string, payload []byte, st queue.Stamps) queue.Job {
	if j, ok := q.Get(id); ok {
		return j
	}
	return queue.Job{ID: id, Queue: name, Payload: payload, Stamps: st}
}

// batchKeys is what a batch's keys name: per payload, the earlier job
// (dedup true) or none; dedup is nil when no key named one.
type batchKeys struct {
	dedup []bool
	ids   []uint64
}

// keyedJobs judges each payload's key in name at now (queue.KeyedJob):
// the first reused one is the error.
func keyedJobs(q *queue.Queues, now int64, name string, payloads [][]byte, keys []string, o queue.EnqueueOpts, window int64) (batchKeys, error) {
	var out batchKeys
	for i, k := range keys {
		if k == "" {
			continue
		}
		o.Key, o.KeyWindow = k, window
		id, held, err := q.KeyedJob(now, name, payloads[i], o)
		if err != nil {
			return batchKeys{}, fmt.Errorf("payload %d: %w", i, err)
		}
		if held {
			if out.dedup == nil {
				out.dedup, out.ids = make([]bool, len(keys)), make([]uint64, len(keys))
			}
			out.dedup[i], out.ids[i] = true, id
		}
	}
	return out, nil
}

// ApplyJob runs one live request against q exactly as a primary of term
// would log it at lsn (validation, record, apply) but without durability:
// the sequential specification the simulator's linearizability checker
// uses, and the replay of tools. The term's no-op came first, so the
// term's id floor applies (raising it again is a no-op). Refused requests
// return Status != StatusOK and change nothing.
func ApplyJob(q *queue.Queues, cfg *schema.ClusterConfig, term, lsn uint64, now int64, req JobRequest) Reply {
	r := newRouter(cfg)
	if msg := validateJob(r, req); msg != "" {
		return Reply{Status: StatusEINVAL, Error: msg}
	}
	switch req.Kind {
	case JobClaim:
		if len(req.Handles) > 0 {
			return Reply{Status: StatusEINVAL, Error: "a claim carrying acks is two records: apply the acks (an ack batch) first, then the claim"}
		}
	case JobGet:
		job, ok := q.Get(req.ID)
		rep := Reply{OK: ok}
		if ok {
			rep.Jobs = []queue.Job{job}
		}
		return rep
	case JobList:
		return Reply{OK: true, Jobs: q.List(req.Queue)}
	case JobListSchedules:
		return Reply{OK: true, Schedules: q.Schedules()}
	}
	rec, err := buildRecord(r, now, req)
	if err != nil {
		return Reply{Status: StatusEINVAL, Error: err.Error()}
	}
	rec.Term, rec.Lsn = term, lsn
	q.AdvanceNextID(TermIDFloor(term))
	rep, err := applyRecord(q, r, rec)
	if err != nil {
		return Reply{Status: refusedStatus(err), Error: err.Error()}
	}
	return rep
}

// ReplayRecords rebuilds the job state from records under cfg, routing
// unknown names to lost_and_found; it returns the state and how many jobs
// were routed.
func ReplayRecords(cfg *schema.ClusterConfig, recs []*schema.WalRecord) (*queue.Queues, int) {
	q, r := queue.New(), newRouter(cfg)
	for _, rec := range recs {
		_ = replayApply(q, r, rec) // refused records are skipped, as recovery does
	}
	return q, r.routed
}

// anyKey says whether a batch names an idempotency key for any of its
// jobs (an empty key is a job without one).
func anyKey(keys []string) bool {
	for _, k := range keys {
		if k != "" {
			return true
		}
	}
	return false
}
