package sm

import (
	"errors"
	"fmt"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/tracker"
	"github.com/xce-hpc/xce/sm/wal"
)

// jobState is the primary's durable job state: the in-memory queues, the
// WAL it appends to with group commit, and checkpoints.
type jobState struct {
	kept         *compactBase // until recovery plans: a standby checkpoint's state (startRecovery)
	q            *queue.Queues
	r            *router
	recovered    bool
	nextLSN      uint64 // LSN the next record gets
	durableLSN   uint64 // every record <= this is fsync'd
	lastNow      int64  // record time never goes backwards
	seg          string // segment new records go to
	segRecords   int
	batches      []walBatch // records not yet written, oldest first
	writing      bool
	group        groupCommit // a small batch's wait for its writers (groupcommit.go)
	hold         bool        // records are being added for one write: do not start it yet (release)
	waiting      []waitingReply
	reads        []waitingRead // quorum mode: reads waiting for their round
	polls        []parkedClaim // long-poll claims waiting for a job (longpoll.go)
	lostFound    int
	ckpt         checkpoint
	liveSegs     map[string]bool   // segments known on disk (for obsolete removal)
	repl         map[int]*replPeer // standbys receiving the log
	prog         tracker.Set       // their progress: repl[s].Progress, by s
	replEpoch    uint64            // the newest sync's epoch (newSyncEpoch)
	lastTerm     uint64            // term of the last record (replayed or appended)
	recoveredLSN uint64            // the log recovery ended at
	recent       recentLog         // the batches this promotion wrote last (recentlog.go)
	mustReach    uint64            // recovery: LSN of a corrupt snapshot it skipped
}

// walBatch is a group commit: records for one segment, one append+fsync.
type walBatch struct {
	seg      string
	data     []byte
	firstLSN uint64
	lastLSN  uint64
	n        int
}

type waitingReply struct {
	lsn uint64
	rep Reply
}

// waitingRead is a read answered once lsn is committed and round confirmed.
type waitingRead struct {
	lsn   uint64
	round uint64
	rep   Reply
}

// onClientOp handles a client request (seed 000 ops over seed 002's
// controller): only a recovered primary serves; mutations are logged and
// applied, and the reply waits for the fsync of their batch.
func (jl *journal) onClientOp(c ClientOp) {
	if jl.sw.hold(c) {
		return // a switchover holds every call until it ends (switchover.go)
	}
	req := c.Req
	if jl.role != RolePrimary || jl.jobs == nil || !jl.jobs.recovered {
		why := "Not primary — redirect to primary"
		if jl.role == RolePrimary {
			why = "primary is recovering its job state; retry"
		}
		jl.emit(Reply{ID: c.ID, Status: StatusEAGAIN, Error: why, Primary: jl.el.primary, NotPrimary: jl.role != RolePrimary})
		return
	}
	j := jl.jobs
	if msg := validateJob(j.r, req); msg != "" {
		jl.emit(Reply{ID: c.ID, Status: StatusEINVAL, Error: msg, Primary: jl.el.primary})
		return
	}
	if req.Kind.ReadOnly() {
		rep := Reply{ID: c.ID, OK: true}
		switch req.Kind {
		case JobGet:
			job, ok := j.q.Get(req.ID)
			rep.OK = ok
			if ok {
				rep.Jobs = []queue.Job{job}
			}
		case JobList:
			rep.Jobs, rep.More = listPage(j.q.List(req.Queue), req.AfterID, req.JSON)
		case JobListSchedules:
			rep.Schedules = j.q.Schedules()
		}
		jl.answerRead(rep)
		return
	}
	// The request's records join the pending batch, whose write starts
	// (or waits for its group: groupcommit.go) once the request waits
	// for it: a claim's acks' and its own records go in one write.
	j.hold = true
	defer jl.release()
	var acks []bool // a claim's acks (claimAcks), applied before it
	var ackLSN uint64
	var ackAt int64
	if req.Kind == JobClaim && len(req.Handles) > 0 {
		var refused bool
		if acks, ackLSN, ackAt, refused = jl.claimAcks(c.ID, req.Handles); refused {
			return
		}
		req.Handles = nil
	}
	rep, changed, refused := jl.mutate(c.ID, req, acks)
	switch {
	case refused && ackLSN > 0: // cannot happen for a validated claim; say so rather than "nothing applied"
		jl.emit(Reply{ID: c.ID, Status: StatusOutcomeUnknown, Error: "acks applied, then the claim was refused: " + rep.Error, Primary: jl.el.primary})
	case refused:
		jl.emit(rep)
	case changed:
	case req.Kind == JobClaim && req.Wait > 0:
		jl.park(c.ID, req, acks, ackLSN, ackAt) // nothing ready: wait for a job (longpoll.go)
	case ackLSN > 0:
		// Nothing to claim, but its acks were logged: a write, answered
		// once they are durable (a step-down: outcome unknown).
		rep.LSN = ackLSN
		jl.replyWhenDurable(rep.LSN, rep)
	default:
		// No record without a state change (an idle worker's empty claim,
		// a refused handle): the answer is a read of the current state.
		jl.answerRead(rep)
	}
}

// claimAcks applies the acks a claim carries (issue 10: acks carried on
// the next claim) as the ack-batch record they would be on their own,
// logged before the claim's: their per-handle results, the LSN of their
// record (0: nothing logged), the wall time they were judged at, and
// whether they were refused (then answered here).
func (jl *journal) claimAcks(id uint64, hs []queue.Handle) (oks []bool, lsn uint64, at int64, refused bool) {
	rep, logged, refused := jl.apply(id, JobRequest{Kind: JobAckBatch, Handles: hs})
	if refused {
		jl.emit(rep)
		return nil, 0, 0, true
	}
	if logged {
		lsn = jl.jobs.nextLSN - 1
		jl.wakePolls() // an ack may free a resource a parked claim waits for
	}
	return rep.OKs, lsn, rep.At, false
}

// release ends a hold of the WAL (jobState.hold): the records appended
// meanwhile go out in one write.
func (jl *journal) release() {
	if j := jl.jobs; j != nil {
		j.hold = false
		jl.flushWAL()
	}
}

// mutate builds, applies and logs req; the reply waits for its
// durability. changed is false if it changed nothing (not logged: rep is
// then the answer as a read); refused, if it is refused (rep says why).
// A claim's reply carries acks, the results of the acks it carried.
func (jl *journal) mutate(id uint64, req JobRequest, acks []bool) (rep Reply, changed, refused bool) {
	rep, changed, refused = jl.apply(id, req)
	if req.Kind == JobClaim {
		rep.OKs = acks
	}
	if changed {
		jl.replyWhenDurable(rep.LSN, rep)
		jl.wakePolls() // the record may have made a job ready for a parked claim
	}
	return rep, changed, refused
}

// apply builds, applies and logs req (no reply): changed and refused as
// mutate's.
func (jl *journal) apply(id uint64, req JobRequest) (rep Reply, changed, refused bool) {
	j := jl.jobs
	now := max(jl.now.Wall/1e9, j.lastNow)
	rec, err := buildRecord(j.r, now, req)
	if err != nil {
		return Reply{ID: id, Status: StatusEINVAL, Error: err.Error(), Primary: jl.el.primary}, false, true
	}
	rec.Lsn, rec.Term = j.nextLSN, jl.el.ha.term // applying a claim stamps it with both
	if why := recordTooLarge(rec); why != "" {
		return Reply{ID: id, Status: StatusEINVAL, Error: why, Primary: jl.el.primary}, false, true
	}
	var before [3]int // an empty claim may still dead-letter exhausted jobs
	if req.Kind == JobClaim {
		before = laneCounts(j.q, req.Queue)
	}
	rep, err = apply(j.q, j.r, rec, replyShapeOf(req))
	if err != nil { // refused before anything changed: not logged
		return Reply{ID: id, Status: refusedStatus(err), Error: err.Error(), Primary: jl.el.primary}, false, true
	}
	rep.ID = id
	if changedNothing(req.Kind, rep) && (req.Kind != JobClaim || laneCounts(j.q, req.Queue) == before) {
		rep.LSN = 0
		return rep, false, false
	}
	j.nextLSN++
	j.lastNow = now
	jl.appendRecord(rec)
	return rep, true, false
}

// answerRead answers rep, which observed the current state: once the
// records it may have seen are durable (committed, and still ours in
// quorum mode: a read-index round).
func (jl *journal) answerRead(rep Reply) {
	j := jl.jobs
	if jl.quorumMode() {
		j.reads = append(j.reads, waitingRead{lsn: j.nextLSN - 1, round: jl.el.readRound(), rep: rep})
		jl.releaseWaiting()
		return
	}
	jl.replyWhenDurable(j.nextLSN-1, rep)
}

// laneCounts is queue's pending, processing and dead counts (O(1)).
func laneCounts(q *queue.Queues, name string) [3]int {
	p, r, d := q.Counts(name)
	return [3]int{p, r, d}
}

// changedNothing: an applied operation whose answer shows it changed no
// job (a refused handle op, cancel or redrive changes nothing by the
// queue's contract; for a claim the caller also compares the queue's
// counts). Such an operation is not logged.
func changedNothing(k JobKind, rep Reply) bool {
	switch k {
	case JobClaim:
		return len(rep.Jobs) == 0
	case JobAck, JobHeartbeat, JobRetry, JobFail, JobCancel, JobRedrive:
		return !rep.OK
	case JobAckBatch:
		for _, ok := range rep.OKs {
			if ok {
				return false
			}
		}
		return true
	case JobEnqueue, JobEnqueueBatch:
		// Every job an earlier submit's (its key's): a read of the log.
		if len(rep.Deduplicated) == 0 {
			return false
		}
		for _, d := range rep.Deduplicated {
			if !d {
				return false
			}
		}
		return true
	}
	return false
}

// validateJob refuses what must never reach the log (seed 002 §6.5: no
// submissions to lost_and_found; unknown queue, host or resource).
func validateJob(r *router, req JobRequest) string {
	if why := checkKeys(req); why != "" {
		return why
	}
	switch req.Kind {
	case JobEnqueue, JobRegister, JobEnqueueBatch:
		if req.Kind == JobEnqueueBatch && (len(req.Payloads) == 0 || len(req.Payloads) > maxBatchJobs) {
			return fmt.Sprintf("enqueue batch of %d jobs outside 1..%d", len(req.Payloads), maxBatchJobs)
		}
		if why := payloadTooLarge(req); why != "" {
			return why
		}
		if req.Queue == LostAndFound {
			return "Cannot submit jobs to 'lost_and_found' — this is an internal recovery queue."
		}
		if !r.knownQueue(req.Queue) {
			return fmt.Sprintf("unknown queue %q", req.Queue)
		}
		if !r.knownResource(req.Resource) {
			return fmt.Sprintf("unknown resource id %d", req.Resource)
		}
		if req.Kind != JobRegister && (!r.knownHost(req.Host) || req.Host == LostAndFound) {
			return fmt.Sprintf("unknown host %q", req.Host)
		}

	case JobClaim:
		if why := checkWait(req); why != "" {
			return why
		}
		if !r.knownQueue(req.Queue) {
			return fmt.Sprintf("unknown queue %q", req.Queue)
		}
		if req.Host == "" || !r.knownHost(req.Host) {
			return fmt.Sprintf("unknown host %q", req.Host)
		}
		if req.Max < 1 || req.Max > 1000 {
			return fmt.Sprintf("claim batch size %d outside 1..1000", req.Max)
		}
		if len(req.Handles) > 1000 {
			return fmt.Sprintf("claim carrying %d acks, more than 1000", len(req.Handles))
		}
	case JobList:
		if req.Queue != "" && !r.knownQueue(req.Queue) { // "" lists every queue
			return fmt.Sprintf("unknown queue %q", req.Queue)
		}
	case JobDrainLostAndFound:
		switch {
		case req.Cancel && (req.Queue != "" || req.Host != ""):
			return "lost-and-found drain: cancel, or move to a queue and host, not both"
		case req.Cancel:
		case req.Queue == "":
			return "lost-and-found drain: name the queue to move the jobs to, or cancel them"
		case req.Queue == LostAndFound || req.Host == LostAndFound:
			return "lost-and-found drain: the target cannot be 'lost_and_found' itself"
		case !r.knownQueue(req.Queue):
			return fmt.Sprintf("unknown queue %q", req.Queue)
		case !r.knownHost(req.Host):
			return fmt.Sprintf("unknown host %q", req.Host)
		}
	case JobRetry:
		if err := queue.CheckRetryDelay(req.RetryDelay); err != nil {
			return fmt.Sprintf("retry field delay: %v", err)
		}
	case JobAckBatch:
		if len(req.Handles) == 0 || len(req.Handles) > 1000 {
			return fmt.Sprintf("ack batch of %d handles outside 1..1000", len(req.Handles))
		}
	default:
		if !req.Kind.Valid() {
			return fmt.Sprintf("unknown operation %d", req.Kind)
		}
	}
	if req.Kind != JobClaim {
		return checkWait(req)
	}
	return ""
}

// refusedStatus is the status of a record the queue refused: EEXIST for
// an idempotency key reused for another submit, else EINVAL.
func refusedStatus(err error) int32 {
	if errors.Is(err, queue.ErrKeyReused) {
		return StatusEEXIST
	}
	return StatusEINVAL
}

// checkKeys refuses bad idempotency keys: too long, on an operation that
// takes none, a batch's not one per payload or repeated within it.
func checkKeys(req JobRequest) string {
	if req.Kind != JobEnqueue && req.Key != "" || req.Kind != JobEnqueueBatch && len(req.Keys) > 0 {
		return fmt.Sprintf("an idempotency key on a %s: only a submit takes one", req.Kind)
	}
	if err := queue.CheckKey(req.Key); err != nil {
		return err.Error()
	}
	if len(req.Keys) == 0 {
		return ""
	}
	if len(req.Keys) != len(req.Payloads) {
		return fmt.Sprintf("%d idempotency keys for %d payloads: one per payload, or none", len(req.Keys), len(req.Payloads))
	}
	seen := make(map[string]int, len(req.Keys))
	for i, k := range req.Keys {
		if err := queue.CheckKey(k); err != nil {
			return fmt.Sprintf("payload %d: %v", i, err)
		}
		if k == "" {
			continue
		}
		if j, dup := seen[k]; dup {
			return fmt.Sprintf("payloads %d and %d have the same idempotency key %q", j, i, k)
		}
		seen[k] = i
	}
	return ""
}

// maxBatchJobs bounds an enqueue batch (and a record's size with it).
const maxBatchJobs = 1000

// replyWhenDurable emits rep once every record up to lsn is durable and
// replicated (answerable).
func (jl *journal) replyWhenDurable(lsn uint64, rep Reply) {
	if jl.answerable(lsn) {
		jl.emitReply(lsn, rep)
		return
	}
	jl.jobs.waiting = append(jl.jobs.waiting, waitingReply{lsn: lsn, rep: rep})
}

// appendRecord frames rec into the open batch of the current segment and
// starts a write if none is in flight (group commit: records arriving
// during a write share the next one).
func (jl *journal) appendRecord(rec *schema.WalRecord) {
	j := jl.jobs
	if len(j.batches) == 0 || j.batches[len(j.batches)-1].seg != j.seg || j.writing && len(j.batches) == 1 {
		j.batches = append(j.batches, walBatch{seg: j.seg})
	}
	b := &j.batches[len(j.batches)-1]
	rec.Term = jl.el.ha.term
	j.lastTerm = jl.el.ha.term
	if b.n == 0 {
		b.firstLSN = rec.GetLsn()
	}
	data, err := wal.AppendFrame(b.data, rec)
	if err != nil {
		jl.node.die("fatal.wal-encode", fmt.Sprintf("cannot encode WAL record %d: %v", rec.GetLsn(), err))
		return
	}
	b.data, b.lastLSN = data, rec.GetLsn()
	b.n++
	j.segRecords++
	if !j.writing && !j.hold {
		jl.flushWAL()
	}
}

// flushWAL writes the oldest batch: append, fsync (a failure of either is
// fatal: the log's tail is unknown), fsync of the directory when the
// segment is new; then releases the replies it covers.
func (jl *journal) flushWAL() {
	j := jl.jobs
	if j.writing || len(j.batches) == 0 {
		return
	}
	if j.batches[0].n == 0 {
		j.batches = j.batches[1:]
		jl.flushWAL()
		return
	}
	if jl.holdBatch(&j.batches[0]) {
		return // resumeWAL: the commit it waits for, or its group, has come
	}
	b := j.batches[0]
	j.writing = true
	j.group.wrote(b)
	newSeg := !j.liveSegs[b.seg]
	jl.joined.streamBatch(b) // standbys write in parallel with our fsync
	// The job state's operations: a step-down drops their completions.
	prev := jl.ops.own(jl.ops.jobsOwner())
	jl.run(appendOps(b.seg, b.data, newSeg, wal.WALDir), journalStep{kind: journalBatchWritten, j: j, seg: b.seg, first: b.firstLSN, last: b.lastLSN})
	jl.ops.cur = prev
}

// failWaiting answers every waiting request when the node loses the role:
// their outcome is unknown to the client (they may or may not be durable).
func (jl *journal) failWaiting(why string) {
	if jl.jobs == nil {
		return
	}
	for _, w := range jl.jobs.waiting {
		jl.emit(Reply{ID: w.rep.ID, Status: StatusOutcomeUnknown, Error: why, Primary: jl.el.primary})
	}
	for _, r := range jl.jobs.reads { // a read changed nothing: just retry it
		jl.emit(Reply{ID: r.rep.ID, Status: StatusEAGAIN, Error: "Not primary — redirect to primary", Primary: jl.el.primary, NotPrimary: true})
	}
	jl.releasePolls("Not primary — redirect to primary")
	jl.jobs = nil    // a future promotion recovers from disk again
	jl.ops.endJobs() // and its operations in flight complete into nothing
	jl.disk.relearnLog()
}

// relearnLog: a node that leaves the primary role learns its log's
// position from disk again. The operations its promotion left in flight
// run before the rescan's (file I/O is serial), and stop where they are,
// as at a crash, which every durable sequence survives; the rescan makes
// durable what it reads before counting it (an append whose fsync was
// abandoned counts once it is durable). A log it finds clean can then be
// caught up or cut back (truncate.go) instead of replaced by a snapshot.
func (lg *jobLog) relearnLog() {
	lg.logUnknown = true
	lg.sb.installDone()
}

// maintain runs what is due on the primary's own clock: sweep_expired
// when a job expired, a claim lapsed with no attempts left, or a dead job
// passed retention; a scheduler tick when a boundary passed. Each is a
// logged record like a client's, applied the same way.
func (jl *journal) maintain() {
	j := jl.jobs
	if jl.role != RolePrimary || j == nil || !j.recovered {
		return
	}
	if jl.sw.frozen() {
		// A handover writes nothing: the sweeps and ticks wait for its end.
		jl.setTimer(TimerMaintenance, jl.opt.MaintenanceInterval)
		return
	}
	now := max(jl.now.Wall/1e9, j.lastNow)
	if j.q.SweepDue(now) {
		jl.logInternal(JobRequest{Kind: JobSweep}, now)
	}
	if at, ok := j.q.Soonest(); ok && at <= now {
		jl.logInternal(JobRequest{Kind: JobTick}, now)
	}
	jl.sweepPolls()
	jl.setTimer(TimerMaintenance, jl.opt.MaintenanceInterval)
}

// logInternal logs and applies an operation nobody waits for.
func (jl *journal) logInternal(req JobRequest, now int64) {
	j := jl.jobs
	rec, err := buildRecord(j.r, now, req)
	if err != nil {
		jl.log(Error, "jobs.maintenance", fmt.Sprintf("cannot build %s record: %v", req.Kind, err))
		return
	}
	rec.Lsn, rec.Term = j.nextLSN, jl.el.ha.term // applying a claim stamps it with both
	rep, err := applyRecord(j.q, j.r, rec)
	if err != nil {
		jl.log(Error, "jobs.maintenance", fmt.Sprintf("%s refused: %v", req.Kind, err))
		return
	}
	j.nextLSN++
	j.lastNow = now
	jl.log(Debug, "jobs.maintenance", fmt.Sprintf("%s at %d: moved %d, deleted %d, fired %d", req.Kind, now, rep.Moved, rep.Deleted, len(rep.Jobs)))
	jl.appendRecord(rec)
	jl.wakePolls()
}
