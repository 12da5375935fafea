package sm

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/tracker"
	"github.com/xce-hpc/xce/sm/wal"
)

// maxLogFile bounds one segment or snapshot read.
const maxLogFile = 1 << 31

// startRecovery is persist_recover (seed 002 §6.5, §7): the lost_and_found
// queue and host exist before replay (they are names the router always
// accepts); load the newest valid snapshot, replay the WAL after it,
// truncate a torn tail, refuse corruption before the tail.
//
// kept is the job state this node's last standby checkpoint built (nil:
// none): the state of its log up to at least its newest snapshot, which
// recovery then takes instead of reading and importing the snapshot, if
// the config is the same (compact.go). building, if kept is nil, is a
// standby checkpoint's build still in flight: recovery waits for it and
// takes its state as kept (an import would wait behind it on the compute
// lane, and then replay every record since the snapshot).
func (jl *journal) startRecovery(kept *compactBase, building *stateBuild) {
	j := &jobState{q: queue.New(), r: newRouter(jl.conf.cfgDecoded()), liveSegs: map[string]bool{}, nextLSN: 1, repl: map[int]*replPeer{}, prog: tracker.Set{}, kept: kept}
	jl.jobs = j
	jl.ops.endJobs() // a new generation: this promotion's operations
	prev := jl.ops.own(jl.ops.jobsOwner())
	if p, ok := jl.ops.pending[building.pendingID()]; ok && kept == nil {
		p.owner, p.next = jl.ops.jobsOwner(), recoveryStep{kind: recoveryBuilt, j: j, build: building.in}
		jl.ops.pending[building.id] = p
		jl.log(Info, "wal.recovery-waits", fmt.Sprintf("recovery waits for the state the standby checkpoint at lsn %d is building", building.in.upto.lsn))
	} else {
		jl.beginRecovery(j)
	}
	jl.ops.cur = prev
}

// beginRecovery makes the data directories, then lists and plans.
func (jl *journal) beginRecovery(j *jobState) {
	jl.run(mkdirOps([]string{wal.WALDir, wal.SnapDir}, DataDir), recoveryStep{kind: recoveryDirsMade, j: j})
}

// stateBuilt: the standby checkpoint's build that recovery waited for has
// completed; its state, if it could be built, is recovery's kept state.
func (jl *journal) stateBuilt(j *jobState, in *compactInput, d IODone) {
	if d.Err == IOOK && in.built != nil {
		j.kept = in.built
	} else {
		jl.log(Warn, "wal.recovery-build-failed", fmt.Sprintf("the standby checkpoint's state at lsn %d could not be built (%s %s): recovering from the files", in.upto.lsn, d.Err, d.Detail))
	}
	jl.beginRecovery(j)
}

func (jl *journal) recoverFrom(j *jobState, snaps, segs []string) {
	plan, err := wal.PlanRecovery(snaps, segs)
	if err != nil {
		jl.node.die("fatal.recovery", fmt.Sprintf("WAL recovery impossible: %v", err))
		return
	}
	for _, s := range segs {
		if _, ok := wal.ParseSegmentName(s); ok {
			j.liveSegs[wal.WALDir+"/"+s] = true
		}
	}
	if k := j.kept; k.covers(plan.SnapshotLSN, jl.conf.cfg) {
		// The state the snapshot holds, built when it was written, or the
		// state a standby checkpoint built past it and is still writing:
		// nothing to read or import (a million jobs' import was most of
		// a failover's time to serving).
		j.kept = nil
		j.lastTerm, j.q = k.at.term, k.q
		if k.at.lsn == plan.SnapshotLSN {
			jl.log(Info, "wal.snapshot-loaded", fmt.Sprintf("loaded snapshot %s (lsn %d) from the state its checkpoint kept", wal.SnapDir+"/"+plan.Snapshot, k.at.lsn))
		} else {
			jl.log(Info, "wal.snapshot-loaded", fmt.Sprintf("loaded the state this standby kept at lsn %d, past its newest snapshot (lsn %d)", k.at.lsn, plan.SnapshotLSN))
		}
		jl.replayFrom(j, plan, k.at)
		return
	}
	j.kept = nil // another snapshot, or another config: read it
	if plan.Snapshot == "" {
		jl.replayFrom(j, plan, logPos{})
		return
	}
	jl.readRecovering(wal.SnapDir+"/"+plan.Snapshot, recoveryStep{kind: recoverySnapshotRead, j: j, plan: plan, snaps: snaps, segs: segs})
}

// replayFrom replays the plan's segments after the state at snap,
// without those whose records all precede it (wal.Obsolete: the plan
// drops them for its snapshot, and snap may be past it).
func (jl *journal) replayFrom(j *jobState, plan wal.Plan, snap logPos) {
	j.nextLSN = snap.lsn + 1
	segs := plan.Segments[len(wal.Obsolete(plan.Segments, snap.lsn)):]
	jl.replaySegments(j, segs, plan.Segments, snap)
}

// snapshotRead: the plan's snapshot is read (checked: the head the boot
// scan verified, if it did); the executor builds the state from it
// (jobload.go) while the node goes on answering.
func (jl *journal) snapshotRead(s recoveryStep, d IODone) {
	path := wal.SnapDir + "/" + s.plan.Snapshot
	if err := ioErr(d); err != nil {
		// Unreadable is not invalid: falling back would rebuild less
		// than this node holds (and has told its peers it holds).
		jl.node.die("fatal.recovery", fmt.Sprintf("cannot read snapshot %s: %v — restart to read it again", path, err))
		return
	}
	next := s
	next.kind, next.checked = recoverySnapshotImported, nil
	jl.compute(Compute{Kind: ComputeImport, Path: path, Data: d.Data, Load: newSnapshotLoad(s.j.r, s.checked)}, next)
}

// snapshotImported: the executor built the state from the snapshot, or
// found it invalid (then an older one is tried).
func (jl *journal) snapshotImported(s recoveryStep, r result) {
	j, plan := s.j, s.plan
	path := wal.SnapDir + "/" + plan.Snapshot
	if r.Err != IOOK || r.loaded == nil {
		jl.node.die("fatal.recovery", fmt.Sprintf("cannot import snapshot %s: %s %s — restart to read it again", path, r.Err, r.Detail))
		return
	}
	ld := r.loaded
	for _, w := range ld.warnings {
		jl.logRouteWarning(w, 0, path)
	}
	j.r.routed += ld.routed
	j.lostFound += ld.routed
	if ld.err != nil {
		// The newest valid snapshot wins: drop this one and plan
		// again; the log must still reach its LSN (finishRecovery
		// checks).
		jl.log(Warn, "wal.snapshot-invalid", fmt.Sprintf("snapshot %s unusable (%v) — trying an older one", path, ld.err))
		j.mustReach = max(j.mustReach, plan.SnapshotLSN)
		jl.recoverFrom(j, without(s.snaps, plan.Snapshot), s.segs)
		return
	}
	j.lastTerm = ld.term
	j.q = ld.q
	jl.log(Info, "wal.snapshot-loaded", fmt.Sprintf("loaded snapshot %s (lsn %d)", path, ld.lsn))
	jl.replayFrom(j, plan, logPos{term: j.lastTerm, lsn: ld.lsn})
}

// errDiverged: a segment's record at the snapshot's LSN has another term —
// the segments are the rest of a log the snapshot replaced (a standby died
// installing its primary's snapshot before removing its old segments).
var errDiverged = errors.New("log diverges from the snapshot")

func ioErr(d IODone) error {
	if d.Err == IOOK {
		return nil
	}
	return fmt.Errorf("%s %s", d.Err, d.Detail)
}

// replaySegments replays segs[0] and continues with the rest (all is the
// whole plan); snap is the snapshot's position.
func (jl *journal) replaySegments(j *jobState, segs, all []string, snap logPos) {
	if len(segs) == 0 {
		jl.finishRecovery(j)
		return
	}
	jl.readRecovering(wal.WALDir+"/"+segs[0], recoveryStep{kind: recoverySegmentRead, j: j, segs: segs, all: all, snap: snap})
}

// segmentRead replays the segment s.segs[0] (read: d; its first
// s.frames bytes' frames checked by the boot scan) and goes on with the
// rest: a torn tail is cut, a replaced log's segments are removed,
// corruption before the tail stops the node (unless repairing).
func (jl *journal) segmentRead(s recoveryStep, d IODone) {
	j, segs, snap := s.j, s.segs, s.snap
	snapLSN := snap.lsn
	path := wal.WALDir + "/" + segs[0]
	if d.Err != IOOK {
		jl.node.die("fatal.recovery", fmt.Sprintf("cannot read WAL segment %s: %s %s", path, d.Err, d.Detail))
		return
	}
	at := jl.routeWarnings(j, path) // one for the segment, not one a record
	replayedFrom := j.nextLSN
	validLen, err := wal.WalkChecked(d.Data, s.frames, func(off int, rec *schema.WalRecord) error {
		if rec.GetLsn() == snapLSN && snapLSN > 0 && rec.GetTerm() != snap.term {
			return errDiverged
		}
		if rec.GetLsn() <= snapLSN {
			return nil
		}
		if rec.GetLsn() != j.nextLSN {
			return &wal.CorruptError{Offset: off, Reason: fmt.Sprintf("LSN %d where %d was expected", rec.GetLsn(), j.nextLSN)}
		}
		*at = off
		jl.replayRecord(j, rec, off, path)
		return nil
	})
	j.r.warn = nil
	if j.nextLSN > replayedFrom && err == nil {
		// The last record replayed (its frame ends at the segment's valid
		// end) begins the recent log; the next segment's last replaces
		// it (it does not follow), and the new term's records follow it.
		j.recent.add(bytes.Clone(d.Data[*at:validLen]), j.nextLSN-1, j.nextLSN-1, j.lastTerm, jl.opt.SyncBufferBytes)
	}
	if errors.Is(err, errDiverged) {
		jl.log(Warn, "wal.diverged", fmt.Sprintf("WAL segment %s holds lsn %d of another term than the snapshot (term %d): removing the segments of the replaced log", path, snapLSN, snap.term))
		jl.removeForRecovery(j, s.all)
		return
	}
	var ce *wal.CorruptError
	if errors.As(err, &ce) {
		if !jl.opt.WALRepair {
			jl.node.die("fatal.wal-corrupt", fmt.Sprintf("WAL corruption in %s at offset %d: %s — records before it are intact; restart with --wal-repair to truncate the log there (records after it are lost)", path, ce.Offset, ce.Reason))
			return
		}
		jl.log(Warn, "wal.repair", fmt.Sprintf("--wal-repair: truncating %s at offset %d (%s); later records are discarded", path, ce.Offset, ce.Reason))
		validLen = ce.Offset
	} else if err != nil {
		jl.node.die("fatal.wal-corrupt", fmt.Sprintf("WAL segment %s: %v", path, err))
		return
	}
	rest := segs[1:]
	if validLen < len(d.Data) {
		if len(rest) > 0 && !jl.opt.WALRepair {
			jl.node.die("fatal.wal-corrupt", fmt.Sprintf("WAL segment %s ends in a torn record at offset %d but later segments follow — restart with --wal-repair to truncate there", path, validLen))
			return
		}
		jl.log(Warn, "wal.torn-tail", fmt.Sprintf("WAL segment %s: torn or zeroed tail at offset %d (%d bytes) truncated", path, validLen, len(d.Data)-validLen))
		jl.rewriteFile(j, path, d.Data[:validLen], rest)
		return
	}
	jl.replaySegments(j, rest, s.all, snap)
}

// removeForRecovery removes the segments named (in data/wal), then
// finishes recovery.
func (jl *journal) removeForRecovery(j *jobState, segs []string) {
	jl.run(removeOps(prefixAll(wal.WALDir, segs), wal.WALDir, "wal.remove-failed", ""), recoveryStep{kind: recoveryRemoved, j: j})
}

// readRecovering is recovery's read-then-fsync (readDurablyOps): a file
// the boot scan read and fsync'd, unchanged since, is handed on without
// reading it again, with what the scan checked of it in next's checked
// and frames (scannedFiles, logpos.go).
func (jl *journal) readRecovering(path string, next recoveryStep) {
	if jl.disk.scanned != nil {
		if data, ok := jl.disk.scanned.data[path]; ok {
			next.checked = nil
			if h, ok := jl.disk.scanned.checked[path]; ok {
				next.checked = &h
			}
			next.frames = jl.disk.scanned.frames[path]
			delete(jl.disk.scanned.data, path)
			delete(jl.disk.scanned.checked, path)
			delete(jl.disk.scanned.frames, path)
			jl.node.resumeNow(next, result{IODone: IODone{Err: IOOK, Data: data}})
			return
		}
	}
	next.checked, next.frames = nil, 0
	jl.run(readDurablyOps(path), next)
}

func prefixAll(dir string, names []string) []string {
	out := make([]string, len(names))
	for i, s := range names {
		out[i] = dir + "/" + s
	}
	return out
}

// replayRecord applies one WAL record at offset off of path, routing
// unknown names to lost_and_found with the §6.5 WARN lines (routeWarnings
// set up for this record's offset).
func (jl *journal) replayRecord(j *jobState, rec *schema.WalRecord, off int, path string) {
	before := j.r.routed
	if err := replayApply(j.q, j.r, rec); err != nil {
		jl.log(Warn, "wal.replay-refused", fmt.Sprintf("WAL record %d at offset %d in %s refused on replay: %v — skipped", rec.GetLsn(), off, path, err))
	}
	j.lostFound += j.r.routed - before
	j.nextLSN = rec.GetLsn() + 1
	j.lastNow = max(j.lastNow, rec.GetNow())
	j.lastTerm = rec.GetTerm()
}

// routeWarnings makes the router log the §6.5 WARN lines for the records
// of path, each at the offset the caller stores in *at before applying
// it; the caller sets j.r.warn back to nil after the last.
func (jl *journal) routeWarnings(j *jobState, path string) *int {
	at := new(int)
	j.r.warn = func(what, id string) { jl.logRouteWarning(routeWarning{what, id}, *at, path) }
	return at
}

// logRouteWarning logs one §6.5 WARN line for a record (or snapshot) at
// offset off of path.
func (jl *journal) logRouteWarning(w routeWarning, off int, path string) {
	switch w.what {
	case "queue":
		jl.log(Warn, "wal.unknown-queue", fmt.Sprintf("WAL record references unknown queue '%s' at offset %d in %s — routing job to lost_and_found queue", w.id, off, path))
	case "resource":
		jl.log(Warn, "wal.unknown-resource", fmt.Sprintf("WAL record references unknown resource id=%s at offset %d in %s — clearing resource assignment, job set to PEND", w.id, off, path))
	case "host":
		jl.log(Warn, "wal.unknown-host", fmt.Sprintf("WAL record references unknown host '%s' at offset %d in %s — routing to lost_and_found host", w.id, off, path))
	}
}

func (jl *journal) finishRecovery(j *jobState) {
	j.durableLSN = j.nextLSN - 1
	if j.durableLSN < j.mustReach {
		jl.node.die("fatal.wal-corrupt", fmt.Sprintf("the newest snapshot (lsn %d) is corrupt and the rest of the log ends at lsn %d: records %d..%d are lost — restore this node's data/ or wipe it so it resyncs from the primary", j.mustReach, j.durableLSN, j.durableLSN+1, j.mustReach))
		return
	}
	j.seg = wal.SegmentPath(j.nextLSN)
	if j.lostFound > 0 {
		jl.log(Warn, "wal.lost-and-found", fmt.Sprintf("lost_and_found_job_count=%d: jobs of removed queues were routed to 'lost_and_found' during recovery — inspect and drain them", j.lostFound))
	}
	j.recovered = true
	j.recoveredLSN = j.durableLSN
	// The counters are this process's: what the replay just applied was
	// counted by the primaries that applied it first.
	j.q.ResetThroughput()
	jl.disk.scanned = nil // what recovery did not take (a newer snapshot's fallback, say)
	// Known now, even if a standby's install or rescan was cut short by
	// the promotion (endLog).
	jl.disk.logPos, jl.disk.logUnknown = logPos{term: j.lastTerm, lsn: j.durableLSN}, false
	jl.log(Info, "wal.recovered", fmt.Sprintf("job state recovered: next lsn %d", j.nextLSN))
	// The term's first record: committing it commits everything before,
	// and applying it gives the term's jobs their own id range.
	now := max(jl.now.Wall/1e9, j.lastNow)
	rec := &schema.WalRecord{Lsn: j.nextLSN, Term: jl.el.ha.term, Now: now, Op: &schema.WalRecord_Noop{Noop: &schema.WalNoop{}}}
	if _, err := applyRecord(j.q, j.r, rec); err != nil {
		jl.node.die("fatal.recovery", fmt.Sprintf("cannot apply the no-op of term %d: %v", jl.el.ha.term, err))
		return
	}
	j.nextLSN++
	j.lastNow = now
	jl.appendRecord(rec)
	for _, s := range sortedKeys(jl.joined.standbys) {
		jl.joined.startSync(s) // standbys that joined while we recovered
	}
	if jl.opt.MaintenanceInterval > 0 {
		jl.setTimer(TimerMaintenance, jl.opt.MaintenanceInterval)
	}
}

// rewriteFile replaces path with data crash-safely (a torn tail cut),
// then removes the segments after it (rest) and finishes recovery.
func (jl *journal) rewriteFile(j *jobState, path string, data []byte, rest []string) {
	jl.run(replaceOps(FileOp{Op: OpWrite, Path: path + ".tmp", Data: data}, path, path[:lastSlash(path)]), recoveryStep{kind: recoveryTailCut, j: j, segs: rest})
}

func lastSlash(p string) int {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return i
		}
	}
	return 0
}

// sortedKeys lists a peer-indexed map's keys in order (no map order may
// reach an effect).
func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
