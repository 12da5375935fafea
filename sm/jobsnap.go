package sm

import (
	"fmt"
	"io"
	"slices"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// checkpoint is the §13 state: one at a time, requests while one runs are
// coalesced into one more (§13.4).
type checkpoint struct {
	inProgress bool
	again      bool
	removeLSN  uint64 // obsolete segments <= this wait for their writes
}

// CheckpointInProgress is checkpoint_in_progress (seed 002 §6.7).
func (n *Node) CheckpointInProgress() bool { return n.journal.jobs.checkpointing() }

// checkpointing reports a checkpoint in progress (false with no job state).
func (j *jobState) checkpointing() bool { return j != nil && j.ckpt.inProgress }

// maybeCheckpoint starts a checkpoint once the active segment holds more
// than max_wal_records records (a soft trigger, §13.2, §13.5).
func (jl *journal) maybeCheckpoint() {
	prev := jl.ops.own(jl.ops.jobsOwner())
	jl.checkpointIfDue()
	jl.ops.cur = prev
}

func (jl *journal) checkpointIfDue() {
	j := jl.jobs
	if j == nil || !j.recovered {
		return
	}
	if j.ckpt.removeLSN > 0 && !j.writing {
		jl.removeObsolete(j)
	}
	if j.segRecords < jl.opt.MaxWALRecords {
		return
	}
	if j.ckpt.inProgress {
		j.ckpt.again = true
		return
	}
	j.ckpt.inProgress = true
	lsn := j.nextLSN - 1
	// A copy-on-write view of the state: the executor encodes it while we
	// go on serving (issue 9 item 2).
	snap := &SnapshotData{view: j.q.View(), lsn: lsn, term: j.lastTerm}
	// New records go to a new segment; the old ones hold LSNs <= lsn only.
	j.seg, j.segRecords = wal.SegmentPath(j.nextLSN), 0
	path := wal.SnapshotPath(lsn)
	tmp := wal.SnapDir + "/" + wal.SnapshotTempName(lsn)
	jl.log(Info, "wal.checkpoint", fmt.Sprintf("checkpoint: writing %s (%d jobs)", path, snap.view.Len()))
	jl.replaceComputed(Compute{Kind: ComputeEncodeTo, Path: tmp, Snapshot: snap}, path, wal.SnapDir, journalStep{kind: journalSnapshotWritten, j: j, last: lsn})
}

// snapshotWritten: the checkpoint's snapshot is durable, and older
// segments may go once their last writes have landed; or a step of it
// failed, and the WAL keeps everything.
func (jl *journal) snapshotWritten(s journalStep, r result) {
	j := s.j
	if r.failed != "" {
		jl.log(Error, "wal.checkpoint-failed", fmt.Sprintf("checkpoint: %s failed: %s %s — the WAL keeps everything", r.failed, r.Err, r.Detail))
		jl.checkpointDone(j)
		return
	}
	j.ckpt.removeLSN = s.last
	if !j.writing {
		jl.removeObsolete(j)
		return
	}
	jl.checkpointDone(j)
}

// SnapshotData is a checkpoint's contents before encoding: a view of the
// job state and its position. Encode is pure and reads only the view, so
// the executor may run it on its own goroutine.
type SnapshotData struct {
	view      queue.View
	lsn, term uint64
	// compact, instead of a view, is a standby's log to rebuild the
	// state from (compact.go).
	compact *compactInput
}

// Jobs is how many jobs the snapshot holds (for a standby's checkpoint,
// an estimate: compactInput.estimate).
func (s *SnapshotData) Jobs() int {
	if c := s.compact; c != nil {
		return c.jobs
	}
	return s.view.Len()
}

// Build builds the state a standby checkpoint's snapshot holds
// (ComputeBuild): its base or newest snapshot and the records after it,
// as recovery would. A snapshot of a view has nothing to build.
func (s *SnapshotData) Build() error {
	if s.compact == nil {
		return nil
	}
	_, err := s.compact.build()
	return err
}

// Encode is the snapshot file's bytes (wal.EncodeSnapshot).
func (s *SnapshotData) Encode() ([]byte, error) {
	if s.compact != nil {
		return s.compact.encode()
	}
	return encodeView(s.view, s.lsn, s.term)
}

// encodeView streams view into a snapshot file at lsn, term: one
// SnapshotJob message filled for each job in turn, and the file sized
// exactly by a first pass (a checkpoint of 1M jobs holds its file, not a
// copy of every job and message beside it).
func encodeView(v queue.View, lsn, term uint64) ([]byte, error) {
	var sj schema.SnapshotJob
	var st schema.WalStamps
	size := 0
	for jb := range v.Jobs() {
		fillSnapshotJob(&sj, &st, jb)
		size += wal.SnapshotJobSize(&sj)
	}
	return encodeJobs(v, lsn, term, size, nil)
}

// SnapshotPiece is the size of the pieces EncodeTo writes.
const SnapshotPiece = 1 << 20

// EncodeTo writes the snapshot file to w in pieces of about SnapshotPiece
// bytes, holding no more than one (a checkpoint of 1M jobs would hold its
// ~250 MB file while it is written), and returns the file's header: w got
// zeros in its place, which the caller overwrites at offset 0 before the
// file is synced (its checksum and length are known only at the end).
func (s *SnapshotData) EncodeTo(w io.Writer) (head []byte, err error) {
	if c := s.compact; c != nil {
		q, err := c.build()
		if err != nil {
			return nil, err
		}
		return encodeJobs(q.View(), c.upto.lsn, c.upto.term, SnapshotPiece, w)
	}
	return encodeJobs(s.view, s.lsn, s.term, SnapshotPiece, w)
}

// encodeJobs is the snapshot file of v: whole in a buffer of about size
// bytes when w is nil, else streamed to w (its header returned).
func encodeJobs(v queue.View, lsn, term uint64, size int, w io.Writer) ([]byte, error) {
	var sj schema.SnapshotJob
	var st schema.WalStamps
	nextID, nextSeq := v.Next()
	scheds := v.Schedules()
	e := wal.NewSnapshotEncoder(lsn, term, nextID, nextSeq, v.Len(), len(scheds), size+64+len(scheds)*256)
	if w != nil {
		e.Stream(w, size)
	}
	for jb := range v.Jobs() {
		fillSnapshotJob(&sj, &st, jb)
		if err := e.Job(&sj); err != nil {
			return nil, err
		}
	}
	for _, sc := range scheds {
		if err := e.Schedule(snapshotSchedule(sc)); err != nil {
			return nil, err
		}
	}
	var sk schema.SnapshotKey
	for _, k := range v.Keys() {
		fillSnapshotKey(&sk, k)
		if err := e.Key(&sk); err != nil {
			return nil, err
		}
	}
	return e.Finish()
}

func (jl *journal) checkpointDone(j *jobState) {
	j.ckpt.inProgress = false
	if j.ckpt.again {
		j.ckpt.again = false
		jl.maybeCheckpoint()
	}
}

// removeObsolete deletes segments wholly covered by the durable snapshot
// and not retained for a standby (retainedFrom), and snapshots beyond the
// newest two.
func (jl *journal) removeObsolete(j *jobState) {
	lsn := jl.retainedFrom(j, j.ckpt.removeLSN)
	j.ckpt.removeLSN = 0
	jl.run(listOps(wal.WALDir, "fatal.recovery"), journalStep{kind: journalSegmentsListed, j: j, last: lsn})
}

// removeSegments removes the segments wholly covered by the snapshot at
// lsn among segs (those listed), but none a batch is still to be written
// to; then the snapshots beyond the newest two.
func (jl *journal) removeSegments(j *jobState, segs []string, lsn uint64) {
	// The segment the checkpoint rolled to may not exist yet: count it,
	// so the one before it, wholly covered, goes too.
	if next := j.seg[len(wal.WALDir)+1:]; !slices.Contains(segs, next) {
		segs = append(segs, next)
	}
	var paths []string
	for _, s := range wal.Obsolete(segs, lsn) {
		p := wal.WALDir + "/" + s
		if !j.pendingFor(p) {
			paths = append(paths, p)
			delete(j.liveSegs, p)
		}
	}
	jl.run(removeOps(paths, wal.WALDir, "wal.remove-failed", ""), journalStep{kind: journalSegmentsRemoved, j: j})
}

// retainedFrom lowers a checkpoint's removal point to the oldest position
// a standby synced in this promotion has durably reached (a dead one's
// last ack included: it catches up from there when it returns), but
// never more than RetainWALRecords below it.
func (jl *journal) retainedFrom(j *jobState, lsn uint64) uint64 {
	keep, who := j.prog.Slowest(lsn)
	floor := lsn - min(lsn, uint64(jl.opt.RetainWALRecords))
	if keep = max(keep, floor); keep < lsn {
		jl.log(Info, "wal.retained", fmt.Sprintf("checkpoint at lsn %d: keeping the segments after lsn %d for %s to catch up from", lsn, keep, jl.peerName(who)))
	}
	return keep
}

// pendingFor reports whether a batch for segment path is unwritten.
func (j *jobState) pendingFor(path string) bool {
	for _, b := range j.batches {
		if b.seg == path {
			return true
		}
	}
	return false
}

func stateOf(s queue.State) schema.JobState {
	switch s {
	case queue.Processing:
		return schema.JobState_JOB_STATE_PROCESSING
	case queue.Dead:
		return schema.JobState_JOB_STATE_DEAD
	default:
		return schema.JobState_JOB_STATE_PENDING
	}
}

func queueState(s schema.JobState) queue.State {
	switch s {
	case schema.JobState_JOB_STATE_PROCESSING:
		return queue.Processing
	case schema.JobState_JOB_STATE_DEAD:
		return queue.Dead
	default:
		return queue.Pending
	}
}

// exportSnapshot is the queue state at lsn as a snapshot message.
func exportSnapshot(q *queue.Queues, lsn uint64) *schema.Snapshot { return snapshotOf(q.Export(), lsn) }

// snapshotOf is the snapshot file's message for an exported state.
func snapshotOf(s queue.Snapshot, lsn uint64) *schema.Snapshot {
	out := &schema.Snapshot{Lsn: lsn, NextId: s.NextID, NextSeq: s.NextSeq}
	for _, jb := range s.Jobs {
		sj := new(schema.SnapshotJob)
		fillSnapshotJob(sj, new(schema.WalStamps), jb)
		out.Jobs = append(out.Jobs, sj)
	}
	for _, sc := range s.Schedules {
		out.Schedules = append(out.Schedules, snapshotSchedule(sc))
	}
	for _, k := range s.Keys {
		sk := new(schema.SnapshotKey)
		fillSnapshotKey(sk, k)
		out.Keys = append(out.Keys, sk)
	}
	return out
}

// fillSnapshotKey makes dst the snapshot message of k (its digest shares
// k's array: the encoder copies it out before k changes, and k never does).
func fillSnapshotKey(dst *schema.SnapshotKey, k queue.Key) {
	*dst = schema.SnapshotKey{Queue: k.Queue, Key: k.Key, Id: k.ID, Sum: k.Sum[:], ExpiresAt: k.ExpiresAt}
}

// fillSnapshotJob makes dst (with stamps st) the snapshot message of jb.
func fillSnapshotJob(dst *schema.SnapshotJob, st *schema.WalStamps, jb queue.Job) {
	*st = schema.WalStamps{VisibilityTimeoutS: jb.Stamps.VisibilityTimeoutS, MaxAttempts: jb.Stamps.MaxAttempts,
		BackoffBaseS: jb.Stamps.BackoffBaseS, DeadLetterRetentionS: jb.Stamps.DeadLetterRetentionS}
	*dst = schema.SnapshotJob{Id: jb.ID, Queue: jb.Queue, Payload: jb.Payload, Priority: jb.Priority,
		State: stateOf(jb.State), RunAt: jb.RunAt, Seq: jb.Seq, EnqueuedAt: jb.EnqueuedAt, ExpiresAt: jb.ExpiresAt,
		Attempts: jb.Attempts, Stamps: st, Host: jb.Host, Resource: jb.Resource, ClaimedAt: jb.ClaimedAt,
		ClaimExpiresAt: jb.ClaimExpiresAt, LastError: jb.LastError, DiedAt: jb.DiedAt, Claims: jb.Claims, Pin: jb.Pin,
		ClaimTerm: jb.Claim.Term, ClaimLsn: jb.Claim.LSN}
}

func snapshotSchedule(sc queue.Schedule) *schema.SnapshotSchedule {
	return &schema.SnapshotSchedule{Name: sc.Name, Spec: sc.Spec, Queue: sc.Queue, Payload: sc.Payload,
		Stamps: walStamps(sc.Stamps), Fire: &schema.WalFireOpts{Priority: sc.Fire.Priority, ExpiresS: sc.Fire.ExpiresS}, NextFire: sc.Next, Zone: sc.Zone}
}

// SnapshotOf encodes q as the snapshot a primary would send at lsn, whose
// record at lsn has term (tests and tools build logs with it).
func SnapshotOf(q *queue.Queues, lsn, term uint64) *schema.Snapshot {
	s := exportSnapshot(q, lsn)
	s.Term = term
	return s
}
