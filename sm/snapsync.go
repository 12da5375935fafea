package sm

import (
	"fmt"
	"io"
	"slices"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/tracker"
	"github.com/xce-hpc/xce/sm/wal"
)

// Snapshot syncs of any size (issue 9). The primary encodes a snapshot of
// its state and sends it in chunks of at most Options.SnapshotChunk bytes, one at a
// time: each chunk goes when the standby reports the bytes before it
// written (flow control: a slow standby is never flooded, and a lost chunk
// or ack is resent at the standby's next periodic ack). The standby
// writes the chunks to a temporary file while its old log stays as it is
// (it keeps its position and its vote); with the last chunk it fsyncs the
// file, reads it back and verifies it (length, CRC32C, contents), and only
// then installs it: rename, fsync, removal of the old log. A newer sync
// supersedes a transfer still receiving; an interrupted transfer restarts
// with the next sync.

// snapSend is the primary's side of a snapshot transfer.
type snapSend struct {
	data []byte
	term uint64 // of the record at the snapshot's LSN
	// early: batches written while the snapshot is encoded, sent after its
	// first chunk (the standby drops records of a sync it has not seen);
	// past the bound the standby catches up from the log after its install.
	early heldRun
}

// snapRecv is the standby's side: the file being written.
type snapRecv struct {
	lsn, term uint64
	total     uint64
	written   uint64 // bytes written to tmp
	writing   bool   // a chunk write is in flight
	ready     bool   // complete, waiting for another install to finish
	tmp       string
}

// awaitingChunk: part of the snapshot is written and the rest must come
// from the network (no write in flight, not complete).
func (rc *snapRecv) awaitingChunk() bool {
	return rc != nil && rc.written > 0 && !rc.writing && !rc.ready && rc.written < rc.total
}

// sendSnapshot starts a snapshot sync of standby s: the executor encodes
// a copy-on-write view of the state (ComputeEncode, off Step), then the chunks
// go one per progress ack.
func (jp *joinedPeers) sendSnapshot(s int) {
	j := jp.journal.jobs
	lsn := j.nextLSN - 1
	rp := &replPeer{Progress: tracker.New(j.newSyncEpoch(jp.el.viewTerm()), lsn, int64(jp.now.Mono)), snap: &snapSend{term: j.lastTerm}}
	j.setPeer(s, rp)
	c := Compute{Kind: ComputeEncode, Snapshot: &SnapshotData{view: j.q.View(), lsn: lsn, term: j.lastTerm}}
	prev := jp.ops.own(jp.ops.jobsOwner())
	jp.compute(c, snapSendStep{j: j, s: s, rp: rp, lsn: lsn})
	jp.ops.cur = prev
}

// snapSendStep is what resumes when the executor has encoded the snapshot
// for standby s (sendSnapshot): its first chunk goes.
type snapSendStep struct {
	j   *jobState
	s   int
	rp  *replPeer
	lsn uint64
}

func (st snapSendStep) String() string {
	return fmt.Sprintf("snapshot send: encoded for node %d at lsn %d: send the first chunk", st.s, st.lsn)
}

func (st snapSendStep) resume(n *Node, r result) {
	n.joined.snapshotEncoded(st.j, st.s, st.rp, st.lsn, r.IODone)
}

// snapshotEncoded sends the first chunk of the snapshot encoded for
// standby s, then the batches written meanwhile.
func (jp *joinedPeers) snapshotEncoded(j *jobState, s int, rp *replPeer, lsn uint64, d IODone) {
	if j.repl[s] != rp || rp.snap == nil {
		return // resynced meanwhile
	}
	if d.Err != IOOK {
		jp.log(Error, "repl.snapshot-encode", fmt.Sprintf("cannot encode the job state for %s: %s %s — it is not synced", jp.peerName(s), d.Err, d.Detail))
		j.dropPeer(s)
		return
	}
	rp.snap.data = d.Data
	jp.log(Info, "repl.snapshot", fmt.Sprintf("syncing %s with a snapshot at lsn %d (%d bytes, %d chunks)", jp.peerName(s), lsn, len(d.Data), (len(d.Data)+jp.opt.SnapshotChunk-1)/jp.opt.SnapshotChunk))
	jp.sendChunk(s, rp, 0)
	// One run of frames, in messages of up to the frame limit (packed
	// as they were written: heldRun): a message per batch would
	// overflow the link's queue (64 messages, oldest dropped) after an
	// encode of seconds.
	early := rp.snap.early
	rp.snap.early = heldRun{}
	if early.overflow {
		jp.log(Info, "repl.sync-buffer-full", fmt.Sprintf("more than %d bytes of records were written while the snapshot for %s was encoded: it catches up on them from the log after its install", jp.opt.SyncBufferBytes, jp.peerName(s)))
		return
	}
	for _, m := range early.messages() {
		jp.el.send(s, Msg{Type: MsgReplRecords, ReqID: rp.Epoch, Bytes: m})
	}
}

// sendChunk sends the chunk of rp's snapshot starting at off.
func (jp *joinedPeers) sendChunk(s int, rp *replPeer, off uint64) {
	data := rp.snap.data
	if off >= uint64(len(data)) {
		return
	}
	end := min(off+uint64(jp.opt.SnapshotChunk), uint64(len(data)))
	jp.el.send(s, Msg{Type: MsgReplSnapshot, ReqID: rp.Epoch, Bytes: data[off:end], Offset: off, Total: uint64(len(data)), PrevLSN: rp.StartLSN, PrevTerm: rp.snap.term})
}

// --- standby side ---

func (sl *standbyLog) onReplSnapshot(from int, m Msg) {
	if sl.quorumMode() && m.Term < sl.el.ha.term {
		return // a deposed primary's (or a late) sync: not ours to write
	}
	if sl.role != RoleStandby || from != sl.el.primary {
		return
	}
	if m.Offset > 0 {
		if sr := sl.srepl; sr != nil && sr.epoch == m.ReqID && sr.recv != nil {
			sl.writeChunk(sr, m)
		}
		return
	}
	if m.ReqID <= sl.epochSeen {
		return // an older sync than one already started (a late message)
	}
	if m.Total < wal.SnapshotHeaderSize || uint64(len(m.Bytes)) > m.Total {
		sl.log(Warn, "repl.bad-snapshot", fmt.Sprintf("snapshot from %s refused: chunk of %d bytes for a file of %d", sl.peerName(from), len(m.Bytes), m.Total))
		return
	}
	// A newer sync supersedes whatever sync was running; the old log stays
	// until this snapshot is complete and verified.
	sl.epochSeen = m.ReqID
	sr := &standbyRepl{epoch: m.ReqID, installing: true, known: map[string]bool{}, segLimit: sl.firstSegLimit(), recv: &snapRecv{
		lsn: m.PrevLSN, term: m.PrevTerm, total: m.Total, tmp: wal.SnapDir + "/" + wal.ReceivedSnapshotTempName(m.PrevLSN),
	}}
	sl.setSync(sr)
	prev := sl.ops.own(sr.owner) // the transfer is this sync's (pending.go)
	sl.run(mkdirOps([]string{wal.WALDir, wal.SnapDir}, DataDir), installStep{kind: installDirsMade, sr: sr, rc: sr.recv, m: m})
	sl.ops.cur = prev
}

// writeChunk writes the next chunk; duplicates, chunks out of order and
// chunks arriving while one is written are dropped (the standby's acks
// say what it needs next).
func (sl *standbyLog) writeChunk(sr *standbyRepl, m Msg) {
	rc := sr.recv
	size := uint64(len(m.Bytes))
	if rc.writing || m.Offset != rc.written || m.Total != rc.total || size == 0 || rc.written+size > rc.total {
		return
	}
	rc.writing = true
	op := OpAppend
	if m.Offset == 0 {
		op = OpWrite // a tmp file left by an interrupted transfer is replaced
	}
	prev := sl.ops.own(sr.owner)
	sl.io(FileOp{Op: op, Path: rc.tmp, Data: m.Bytes}, installStep{kind: installChunkWritten, sr: sr, rc: rc, size: size})
	sl.ops.cur = prev
}

// chunkWritten: a chunk of size bytes is in rc.tmp, or its write failed.
func (sl *standbyLog) chunkWritten(sr *standbyRepl, rc *snapRecv, size uint64, d IODone) {
	rc.writing = false
	if d.Err != IOOK {
		sl.installFailed(sr, "write "+rc.tmp, d)
		return
	}
	rc.written += size
	if rc.written == rc.total {
		sl.finishInstall(sr)
		return
	}
	sl.ackRepl()
}

// installFailed: this sync cannot complete; the standby tells its primary
// why (in its acks) and asks again after a failure timeout.
func (sl *standbyLog) installFailed(sr *standbyRepl, what string, d IODone) {
	sl.log(Warn, "repl.install-failed", fmt.Sprintf("installing the primary's snapshot: %s failed: %s %s", what, d.Err, d.Detail))
	if sl.ops.syncLive(sr) {
		sl.replFailure = fmt.Sprintf("snapshot install: %s: %s", what, d.Err)
		sl.setSync(nil)
	}
}

// finishInstall makes the received snapshot the standby's log: fsync,
// read back and verify, rename, fsync; then the old log's files go. One
// install at a time (they rewrite the same files): a complete transfer
// waits for the one running. The install is the log's (a promotion stops
// it: pending.go); it goes on only while sr is still the sync.
func (sl *standbyLog) finishInstall(sr *standbyRepl) {
	rc := sr.recv
	if sl.installBusy || sl.compact != nil {
		rc.ready = true
		return
	}
	prev := sl.ops.own(sl.ops.logOwner())
	sl.installSnapshot(sr)
	sl.ops.cur = prev
}

func (sl *standbyLog) installSnapshot(sr *standbyRepl) {
	rc := sr.recv
	sl.installBusy = true
	sl.ckptBase, sl.sinceCkpt = nil, appendedSince{installed: true} // the primary's snapshot replaces ours
	// Until the old log is gone, what recovery would rebuild is either
	// log: claim neither (no position in messages, no votes).
	sl.disk.logUnknown = true
	sl.ackRepl()
	sl.io(FileOp{Op: OpFsync, Path: rc.tmp}, installStep{kind: installTmpSynced, sr: sr, rc: rc})
}

// installStopped: a step of the install failed (what); the install ends.
func (sl *standbyLog) installStopped(sr *standbyRepl, what string, d IODone) {
	sl.installFailed(sr, what, d)
	sl.installDone()
}

// verifyTmp has the executor read the durable tmp file back and check it
// (ComputeVerify), off Step, never holding it whole.
func (sl *standbyLog) verifyTmp(sr *standbyRepl, rc *snapRecv) {
	check := &SnapshotCheck{LSN: rc.lsn, Term: rc.term}
	sl.compute(Compute{Kind: ComputeVerify, Path: rc.tmp, MaxSize: maxLogFile, Check: check}, installStep{kind: installVerified, sr: sr, rc: rc})
}

// verified: the received file verified (or not); if the sync is still the
// standby's, the old log goes.
func (sl *standbyLog) verified(sr *standbyRepl, rc *snapRecv, d IODone) {
	if d.Err != IOOK && d.Err != IOCorrupt {
		sl.installStopped(sr, "read back "+rc.tmp, d)
		return
	}
	if d.Err == IOCorrupt {
		sl.log(Warn, "repl.bad-snapshot", fmt.Sprintf("snapshot received from the primary does not verify: %s — asking again", d.Detail))
		if sl.ops.syncLive(sr) {
			sl.replFailure = fmt.Sprintf("snapshot install: received file does not verify: %s", d.Detail)
			sl.setSync(nil)
		}
		sl.installDone()
		return
	}
	if !sl.ops.syncLive(sr) { // superseded: the old log stays, and a rescan confirms it
		sl.installDone()
		return
	}
	sl.run(listOps(wal.WALDir, "fatal.recovery"), installStep{kind: installListedAfter, sr: sr, rc: rc})
}

// renameInstalled removes the old segments wholly after the received
// snapshot, newest first and each durably (every crash state a prefix of
// the old log), then renames the snapshot into place; replaceLog removes
// the rest. Those go first so that a crash part way through replaceLog
// cannot leave one of them with no segment before it: a gap after the
// snapshot, which recovery could only call corruption.
func (sl *standbyLog) renameInstalled(sr *standbyRepl, rc *snapRecv, segs []string) {
	var after []string
	for _, name := range segs {
		if first, ok := wal.ParseSegmentName(name); ok && first > rc.lsn {
			after = append(after, wal.WALDir+"/"+name)
		}
	}
	slices.Sort(after)
	slices.Reverse(after)
	sl.run(removeEachOps(after, wal.WALDir), installStep{kind: installAfterRemoved, sr: sr, rc: rc})
}

// afterRemoved: the segments after the snapshot are gone (or one could
// not be removed: r.failed); the snapshot is renamed into place.
func (sl *standbyLog) afterRemoved(sr *standbyRepl, rc *snapRecv, r result) {
	if r.failed != "" {
		sl.installStopped(sr, r.failed, r.IODone)
		return
	}
	if !sl.ops.syncLive(sr) { // superseded: a prefix of the old log stays, and a rescan confirms it
		sl.installDone()
		return
	}
	sl.io(FileOp{Op: OpRename, Path: rc.tmp, To: wal.SnapshotPath(rc.lsn)}, installStep{kind: installRenamed, sr: sr, rc: rc})
}

// replaceLog removes every file but the installed snapshot: only the
// primary's log may remain (a crash before that leaves segments recovery
// recognises as another log's, errDiverged). A node that left the standby
// role stops here: its files are recovery's now.
func (sl *standbyLog) replaceLog(sr *standbyRepl) {
	rc := sr.recv
	if !sl.ops.syncLive(sr) {
		sl.installDone()
		return
	}
	sl.run(listOps(wal.WALDir, "fatal.recovery"), installStep{kind: installListedSegs, sr: sr, rc: rc})
}

// oldSnapsListed: the old log's segments are gone; its snapshots go.
func (sl *standbyLog) oldSnapsListed(sr *standbyRepl, rc *snapRecv, snaps []string) {
	var old []string
	for _, s := range snaps {
		if s != wal.SnapshotName(rc.lsn) {
			old = append(old, wal.SnapDir+"/"+s)
		}
	}
	sl.run(removeOps(old, wal.SnapDir, "wal.remove-failed", ""), installStep{kind: installSnapsRemoved, sr: sr, rc: rc})
}

// installed: only the received snapshot is left; it is the standby's log.
func (sl *standbyLog) installed(sr *standbyRepl, rc *snapRecv) {
	sr.installing, sr.recv = false, nil
	sr.expect, sr.seg = rc.lsn+1, wal.SegmentPath(rc.lsn+1)
	sl.disk.logPos = logPos{term: rc.term, lsn: rc.lsn}
	sl.disk.logUnknown = false
	sl.disk.logClean, sl.wantSnapshot = true, false
	sl.replFailure = ""
	sl.log(Info, "repl.synced", fmt.Sprintf("job log synced from %s at lsn %d", sl.peerName(sl.el.primary), rc.lsn))
	// Ended before the records queued meanwhile are appended: a
	// gap among them rejoins asking for a catch-up from this
	// clean log (canCatchUp), not for another snapshot.
	sl.installDone()
	sl.ackRepl()
	sl.drainRepl()
}

// installStep is what resumes in a snapshot sync on a standby: the
// directories made, a chunk written, then the install (fsync, read back,
// the old log's files removed, the rename).
type installStep struct {
	kind installKind
	sr   *standbyRepl
	rc   *snapRecv // sr's transfer
	m    Msg       // installDirsMade: the first chunk
	size uint64    // installChunkWritten: its bytes
}

type installKind uint8

const (
	installDirsMade      installKind = iota // data/wal and data/snap made: write the first chunk
	installChunkWritten                     // a chunk written to tmp: ack, or install after the last
	installTmpSynced                        // tmp fsync'd: read it back and verify it
	installVerified                         // tmp verified: list data/wal
	installListedAfter                      // data/wal listed: remove the segments after the snapshot
	installAfterRemoved                     // those removed: rename tmp into place
	installRenamed                          // renamed: fsync data/snap
	installSnapDirSynced                    // data/snap fsync'd: the old log goes (replaceLog)
	installListedSegs                       // data/wal listed: remove every segment
	installSegsRemoved                      // segments removed: list data/snap
	installListedSnaps                      // data/snap listed: remove the other snapshots
	installSnapsRemoved                     // only the snapshot left: installed
)

var installKindNames = [...]string{
	"directories made", "chunk written", "tmp fsync'd", "verified", "data/wal listed for the segments after it",
	"segments after it removed", "renamed", "data/snap fsync'd", "data/wal listed", "segments removed", "data/snap listed", "old snapshots removed",
}

func (s installStep) String() string {
	if s.kind == installChunkWritten {
		return fmt.Sprintf("install of sync %s: chunk of %d bytes written to %s (%d of %d before it)", SyncName(s.sr.epoch), s.size, s.rc.tmp, s.rc.written, s.rc.total)
	}
	return fmt.Sprintf("install of sync %s: %s (snapshot at lsn %d, term %d)", SyncName(s.sr.epoch), installKindNames[s.kind], s.rc.lsn, s.rc.term)
}

func (s installStep) resume(n *Node, r result) {
	sr, rc := s.sr, s.rc
	switch s.kind {
	case installDirsMade:
		n.sb.writeChunk(sr, s.m)
	case installChunkWritten:
		n.sb.chunkWritten(sr, rc, s.size, r.IODone)
	case installTmpSynced:
		n.sb.verifyTmp(sr, rc)
	case installVerified:
		n.sb.verified(sr, rc, r.IODone)
	case installListedAfter:
		n.sb.renameInstalled(sr, rc, r.names())
	case installAfterRemoved:
		n.sb.afterRemoved(sr, rc, r)
	case installRenamed:
		if r.Err != IOOK {
			n.sb.installStopped(sr, "rename "+rc.tmp, r.IODone)
			return
		}
		n.io(FileOp{Op: OpFsyncDir, Path: wal.SnapDir}, installStep{kind: installSnapDirSynced, sr: sr, rc: rc})
	case installSnapDirSynced:
		n.sb.replaceLog(sr)
	case installListedSegs:
		n.run(removeOps(prefixAll(wal.WALDir, r.names()), wal.WALDir, "wal.remove-failed", ""), installStep{kind: installSegsRemoved, sr: sr, rc: rc})
	case installSegsRemoved:
		if !n.ops.syncLive(sr) {
			n.sb.installDone()
			return
		}
		n.run(listOps(wal.SnapDir, "fatal.recovery"), installStep{kind: installListedSnaps, sr: sr, rc: rc})
	case installListedSnaps:
		n.sb.oldSnapsListed(sr, rc, r.names())
	case installSnapsRemoved:
		if !n.ops.syncLive(sr) {
			n.sb.installDone()
			return
		}
		n.sb.installed(sr, rc)
	}
}

// installDone ends an install and starts the complete one that waited.
// An install that stopped half way, or a step-down (relearnLog), leaves
// the log unknown: the rescan of what the disk holds counts as an install
// (no other may change the files it reads).
func (sl *standbyLog) installDone() {
	sl.installBusy = false
	if sl.startReady() || !sl.disk.logUnknown || sl.role == RoleStopped {
		return
	}
	sl.installBusy = true
	prev := sl.ops.own(sl.ops.logOwner())
	sl.disk.scanLogPosition(scanForRescan) // afterRescan
	sl.ops.cur = prev
}

// afterRescan: the rescan of installDone found the log's position.
func (sl *standbyLog) afterRescan(pos logPos, clean bool) {
	sl.installBusy = false
	sl.disk.logPos, sl.disk.logUnknown = pos, false
	sl.disk.logClean = clean
	sl.startReady()
}

// startReady starts the install of a complete snapshot that waited.
func (sl *standbyLog) startReady() bool {
	sr := sl.srepl
	if sr == nil || sr.recv == nil || !sr.recv.ready {
		return false
	}
	sr.recv.ready = false
	sl.finishInstall(sr)
	return true
}

// SnapshotCheck is what a received snapshot must be: a valid snapshot
// file (framing, CRC32C, every job and schedule, streamed one at a time)
// of the position the sync announced.
type SnapshotCheck struct{ LSN, Term uint64 }

// Verify checks a file's bytes against c (the executor runs it for a
// ComputeVerify whose file it cannot stream).
func (c *SnapshotCheck) Verify(data []byte) error {
	return wal.ReadSnapshot(data, c.visitor())
}

// VerifyAt checks a file of size bytes read through r against c, a
// window at a time (wal.ReadSnapshotAt): errors reading r wrap
// wal.ErrSnapshotRead, every other is the file's.
func (c *SnapshotCheck) VerifyAt(r io.ReaderAt, size int64) error {
	return wal.ReadSnapshotAt(r, size, c.visitor())
}

// visitor checks the snapshot's position; the reader checks the rest.
func (c *SnapshotCheck) visitor() wal.SnapshotVisitor {
	return wal.SnapshotVisitor{
		Head: func(h wal.SnapshotHead) error {
			if h.LSN != c.LSN || h.Term != c.Term {
				return fmt.Errorf("it holds lsn %d term %d, the sync announced lsn %d term %d", h.LSN, h.Term, c.LSN, c.Term)
			}
			return nil
		},
		Job:      func(*schema.SnapshotJob) error { return nil }, // the reader checks each
		Schedule: func(*schema.SnapshotSchedule) error { return nil },
	}
}
