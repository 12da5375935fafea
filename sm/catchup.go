package sm

import (
	"errors"
	"fmt"

	"github.com/xce-hpc/xce/sm/tracker"
	"github.com/xce-hpc/xce/sm/wal"
)

// Catch-up from the log (DESIGN §4.4). A standby whose log is clean asks,
// in its Join, to continue from its position (term of its last record,
// LSN). If the primary's log holds a record at that LSN with that term,
// the two logs agree up to it (one primary per term writes each (term,
// LSN) once: the log matching property), so the primary reads its
// segments from there and streams the records instead of a snapshot. A
// position the primary cannot match — records checkpointed away, a
// divergent suffix, a log ahead of ours — falls back to a snapshot, which
// replaces the standby's log. Seed mode always uses snapshots: two
// primaries there may write the same term.

//
// The records go with flow control, one segment read at a time (issue 9
// item 1: a standby far behind gets records, not a snapshot, as long as
// we keep them): pieces of at most Options.SnapshotChunk bytes, at most
// catchUpWindow of them sent and not yet acknowledged; the next segment
// is read once the last one is handed to the queue. Batches written
// meanwhile are held (at most Options.SyncBufferBytes since the last read
// was issued; past that none: they are read from the log in one more
// round) and follow the last segment's records, after which the standby
// streams live.

// catchUpRead is a catch-up in progress on the primary.
type catchUpRead struct {
	from logPos
	// held: batches written since the read under way (or the last one)
	// was issued, sent after what the reads find, without the LSNs they
	// covered.
	held     heldBatches
	started  bool           // the catch-up's first message went
	sent     uint64         // the last LSN queued (to send) or sent
	queue    []catchUpPiece // read, not yet sent
	inflight []uint64       // the last LSN of each piece sent and not yet acknowledged
	more     bool           // segments after the one read last
	reading  bool           // a round's list or read is under way
}

// catchUpPiece is a run of frames to send and the LSN it ends at.
type catchUpPiece struct {
	data []byte
	last uint64
}

// catchUpWindow bounds the pieces sent and not yet acknowledged: with
// the transport's per-peer queue of 64 messages (oldest dropped), far
// below it.
const catchUpWindow = 8

// newRound: a read is being issued; batches written from now on are not
// in what it reads.
func (cu *catchUpRead) newRound() {
	cu.held, cu.reading = heldBatches{}, true
}

// canCatchUp: the standby's log ends exactly at logPos with nothing after
// it, and nothing will change it but this primary's sync.
func (sl *standbyLog) canCatchUp() bool {
	return sl.quorumMode() && sl.role == RoleStandby && !sl.disk.logUnknown && sl.disk.logClean && !sl.installBusy && sl.replWriting == 0 && !sl.wantSnapshot
}

// joinMsg is a standby's request for a log sync.
func (sl *standbyLog) joinMsg(reqID uint64) Msg {
	return Msg{Type: MsgJoin, ReqID: reqID, CatchUp: sl.canCatchUp()}
}

// noteJoin keeps the position a standby asked to catch up from, for the
// sync that its join starts (now, or when recovery finishes).
func (jp *joinedPeers) noteJoin(from int, m Msg) {
	if jp.joinPos == nil {
		jp.joinPos = map[int]logPos{}
	}
	delete(jp.joinPos, from)
	if m.CatchUp {
		jp.joinPos[from] = logPos{term: m.LogTerm, lsn: m.WALPos}
	}
}

// tryCatchUp starts a catch-up sync of standby s from its stated position,
// or reports that only a snapshot can sync it.
func (jp *joinedPeers) tryCatchUp(s int) bool {
	from, ok := jp.joinPos[s]
	delete(jp.joinPos, s)
	j := jp.journal.jobs
	if !ok || !jp.quorumMode() {
		return false
	}
	rp := &replPeer{Progress: tracker.New(j.newSyncEpoch(jp.el.viewTerm()), from.lsn, int64(jp.now.Mono)), catchUp: &catchUpRead{from: from}}
	j.setPeer(s, rp)
	if from == (logPos{term: j.lastTerm, lsn: j.nextLSN - 1}) {
		rp.catchUp.sent = from.lsn
		jp.finishCatchUp(s, rp) // nothing to read: it has every record
		return true
	}
	prev := jp.ops.own(jp.ops.jobsOwner())
	if recent, ok := j.recent.from(from); ok {
		rp.catchUp.reading = true // as if read: catchUpRead ends it
		jp.catchUpRead(s, rp, recent)
	} else {
		jp.readForCatchUp(j, s, rp)
	}
	jp.ops.cur = prev
	return true
}

// readForCatchUp lists our segments and reads those after the standby's
// position.
func (jp *joinedPeers) readForCatchUp(j *jobState, s int, rp *replPeer) {
	cu := rp.catchUp
	cu.reading = true
	jp.io(FileOp{Op: OpList, Path: wal.WALDir}, catchUpStep{kind: catchUpListed, j: j, s: s, rp: rp, cu: cu})
}

// live reports whether the catch-up the step serves is still standby
// s's (a step-down drops its completions; a resync replaces it).
func (c catchUpStep) live() bool { return c.j.repl[c.s] == c.rp && c.rp.catchUp == c.cu }

// catchUpListed: the first round's listing is in; read the segments that
// may hold the standby's position and the records before it.
func (jp *joinedPeers) catchUpListed(c catchUpStep, d IODone) {
	s, rp, cu := c.s, c.rp, c.cu
	from := cu.from
	live := c.live()
	if d.Err != IOOK {
		jp.catchUpRoundIOFailed(s, rp, live, fmt.Sprintf("cannot list %s: %s %s", wal.WALDir, d.Err, d.Detail))
		return
	}
	if !live {
		return // resynced meanwhile
	}
	segs := catchUpSegments(d.Entries, from.lsn)
	if len(segs) == 0 {
		jp.catchUpFailed(s, rp, fmt.Sprintf("the records after lsn %d were checkpointed away", from.lsn))
		return
	}
	// The segments that may hold from.lsn and the records before it
	// (where the logs last agree); the rest are read one by one.
	k := 1
	for k < len(segs) {
		if first, _ := wal.ParseSegmentName(segs[k][len(wal.WALDir)+1:]); first > from.lsn {
			break
		}
		k++
	}
	segs, cu.more = segs[:k], k < len(segs)
	// Issued together, the reads run before any removal issued later.
	g := &catchUpGather{data: make([][]byte, len(segs)), left: len(segs)}
	for i, seg := range segs {
		next := c
		next.kind, next.seg, next.i, next.g = catchUpSegmentRead, seg, i, g
		jp.io(FileOp{Op: OpRead, Path: seg, MaxSize: maxLogFile}, next)
	}
}

// catchUpGather collects the first round's reads, issued together.
type catchUpGather struct {
	data [][]byte // by segment, oldest first
	left int      // reads not yet in
}

// catchUpSegmentRead: one of the first round's reads is in; with the
// last, what they found is checked and sent.
func (jp *joinedPeers) catchUpSegmentRead(c catchUpStep, d IODone) {
	live := c.live() // (a step-down drops this completion)
	if d.Err != IOOK {
		jp.catchUpRoundIOFailed(c.s, c.rp, live, fmt.Sprintf("cannot read %s: %s %s", c.seg, d.Err, d.Detail))
		return
	}
	if !live {
		return
	}
	c.g.data[c.i] = d.Data
	if c.g.left--; c.g.left == 0 {
		jp.catchUpRead(c.s, c.rp, c.g.data)
	}
}

// catchUpSegments lists every segment, oldest first, if they still hold
// the record at lsn (its term must match; where it does not, the records
// before it say where the logs last agree). None if the record at lsn is
// gone (the first segment starts after it).
func catchUpSegments(entries []DirEntry, lsn uint64) []string {
	all := segmentsByLSN(entries)
	if len(all) == 0 {
		return nil
	}
	first, _ := wal.ParseSegmentName(all[0][len(wal.WALDir)+1:])
	if first > max(lsn, 1) || lsn == 0 && first != 1 {
		return nil
	}
	return all
}

// catchUpRead checks what the reads found and sends it: the record at the
// standby's position must carry its term, the records after it must be
// contiguous. A standby whose log diverges from ours (another term at its
// position, or a log longer than ours) is told where to truncate to.
func (jp *joinedPeers) catchUpRead(s int, rp *replPeer, data [][]byte) {
	from := rp.catchUp.from
	var frames []byte
	var hint logPos // our last record at or before from.lsn with a term <= from.term
	var end uint64  // the last LSN walked
	matched, diverged := from.lsn == 0, false
	for _, d := range data {
		var why string
		cut := -1 // offset of the first frame to send from d
		valid, err := wal.WalkPositions(d, func(off int, lsn, term uint64) error {
			if end > 0 && lsn != end+1 {
				why = fmt.Sprintf("our segments skip from lsn %d to %d", end, lsn)
				return errStop
			}
			end = lsn
			if lsn <= from.lsn && term <= from.term {
				hint = logPos{term: term, lsn: lsn}
			}
			switch {
			case lsn == from.lsn:
				matched, diverged = term == from.term, term != from.term
			case lsn > from.lsn && cut < 0:
				cut = off
			}
			return nil
		})
		switch {
		case why != "":
			jp.catchUpFailed(s, rp, why)
			return
		case err != nil:
			jp.catchUpFailed(s, rp, fmt.Sprintf("the primary's own log does not scan: %v", err))
			return
		}
		if cut >= 0 {
			frames = append(frames, d[cut:valid]...) // a torn tail is no record
		}
	}
	switch {
	case matched:
		cu := rp.catchUp
		cu.reading, cu.sent = false, from.lsn
		jp.log(Info, "repl.catch-up", fmt.Sprintf("catching %s up from lsn %d (term %d): records from our log, no snapshot", jp.peerName(s), from.lsn, from.term))
		jp.queueCatchUp(cu, frames, max(end, from.lsn))
		jp.pumpCatchUp(s, rp)
	case !diverged && from.lsn <= max(end, jp.journal.jobs.nextLSN-1):
		// Not a log longer than ours: our log reaches its position, but
		// no segment read holds it (the segments read end with one older
		// than our newest snapshot, which an install cut short left
		// beside it; or the record there is still being written). Its
		// term there is unknown: a snapshot, never a truncation of
		// records a majority may need it to keep.
		jp.catchUpFailed(s, rp, fmt.Sprintf("no record at lsn %d in our segments", from.lsn))
	case hint.lsn == 0:
		jp.catchUpFailed(s, rp, fmt.Sprintf("its log diverges from ours before our oldest record (lsn %d, term %d)", from.lsn, from.term))
	default:
		jp.tellDiverged(s, rp, hint)
	}
}

// tellDiverged tells standby s that its log diverges from ours after
// hint: it truncates its suffix (truncate.go) and joins again. Until then
// it is in no sync (its acks say only that it is alive).
func (jp *joinedPeers) tellDiverged(s int, rp *replPeer, hint logPos) {
	from := rp.catchUp.from
	rp.catchUp, rp.truncating = nil, true
	jp.log(Info, "repl.diverged", fmt.Sprintf("%s's log (lsn %d, term %d) diverges from ours: it truncates to at most lsn %d (term %d) and joins again", jp.peerName(s), from.lsn, from.term, hint.lsn, hint.term))
	jp.el.send(s, Msg{Type: MsgReplRecords, ReqID: rp.Epoch, CatchUp: true, Diverged: true, PrevLSN: hint.lsn, PrevTerm: hint.term})
}

// errStop ends a wal.Walk early.
var errStop = errors.New("stop")

// queueCatchUp queues frames (the records after cu.sent up to end) in
// pieces of at most Options.SnapshotChunk bytes.
func (jp *joinedPeers) queueCatchUp(cu *catchUpRead, frames []byte, end uint64) {
	cu.sent = max(cu.sent, end)
	if len(frames) == 0 {
		return // an empty message is "unusable" to the standby
	}
	for _, c := range splitFrames(frames, jp.opt.SnapshotChunk) {
		cu.queue = append(cu.queue, catchUpPiece{data: c, last: lastLSN(c)})
	}
}

// pumpCatchUp sends queued pieces while fewer than catchUpWindow are
// unacknowledged; with the queue empty it reads the next segment, or
// finishes: the batches held meanwhile follow, and the standby streams
// live.
func (jp *joinedPeers) pumpCatchUp(s int, rp *replPeer) {
	cu := rp.catchUp
	for len(cu.queue) > 0 && len(cu.inflight) < catchUpWindow {
		p := cu.queue[0]
		cu.queue = cu.queue[1:]
		jp.sendCatchUp(s, rp, p.data)
		cu.inflight = append(cu.inflight, p.last)
	}
	switch {
	case len(cu.queue) > 0 || cu.reading:
	case cu.more || cu.held.overflow:
		jp.nextCatchUpRound(s, rp)
	default:
		jp.finishCatchUp(s, rp)
	}
}

// sendCatchUp sends one run of frames: the first message of the
// catch-up says where it starts; those after it are plain records.
func (jp *joinedPeers) sendCatchUp(s int, rp *replPeer, data []byte) {
	cu := rp.catchUp
	if cu.started {
		jp.el.send(s, Msg{Type: MsgReplRecords, ReqID: rp.Epoch, Bytes: data})
		return
	}
	cu.started = true
	jp.el.send(s, Msg{Type: MsgReplRecords, ReqID: rp.Epoch, CatchUp: true, PrevLSN: cu.from.lsn, PrevTerm: cu.from.term, Bytes: data})
}

// catchUpAcked notes the standby's durable LSN: the pieces it covers are
// no longer in flight.
func (jp *joinedPeers) catchUpAcked(s int, rp *replPeer, lsn uint64) {
	cu := rp.catchUp
	if cu == nil {
		return
	}
	k := 0 // none in flight before the log matched

	for k < len(cu.inflight) && cu.inflight[k] <= lsn {
		k++
	}
	if k == 0 {
		return
	}
	cu.inflight = cu.inflight[k:]
	jp.pumpCatchUp(s, rp)
}

// nextCatchUpRound reads the segment holding the record after cu.sent.
func (jp *joinedPeers) nextCatchUpRound(s int, rp *replPeer) {
	j, cu := jp.journal.jobs, rp.catchUp
	cu.newRound()
	prev := jp.ops.own(jp.ops.jobsOwner())
	jp.io(FileOp{Op: OpList, Path: wal.WALDir}, catchUpStep{kind: catchUpRoundListed, j: j, s: s, rp: rp, cu: cu})
	jp.ops.cur = prev
}

// catchUpRoundListed: a later round's listing is in; read the segment
// holding the record after cu.sent.
func (jp *joinedPeers) catchUpRoundListed(c catchUpStep, d IODone) {
	s, rp, cu := c.s, c.rp, c.cu
	if !jp.catchUpRoundGoesOn(c, d, "list "+wal.WALDir) {
		return
	}
	seg, next := segmentAfter(d.Entries, cu.sent)
	if seg == "" {
		jp.catchUpFailed(s, rp, fmt.Sprintf("the records after lsn %d were checkpointed away", cu.sent))
		return
	}
	cu.more = next > 0
	step := c
	step.kind, step.seg, step.next = catchUpRoundRead, seg, next
	jp.io(FileOp{Op: OpRead, Path: seg, MaxSize: maxLogFile}, step)
}

// catchUpRoundRead: a later round's segment is read; its records after
// cu.sent are queued and sent.
func (jp *joinedPeers) catchUpRoundRead(c catchUpStep, d IODone) {
	s, rp, cu := c.s, c.rp, c.cu
	if !jp.catchUpRoundGoesOn(c, d, "read "+c.seg) {
		return
	}
	frames, end, why := framesFrom(d.Data, cu.sent)
	if why == "" && c.next > 0 && c.next != end+1 {
		why = fmt.Sprintf("our segments skip from lsn %d to %d", end, c.next)
	}
	if why != "" {
		jp.catchUpFailed(s, rp, why)
		return
	}
	cu.reading = false
	jp.queueCatchUp(cu, frames, end)
	jp.pumpCatchUp(s, rp)
}

// catchUpRoundIOFailed: an I/O error of a round's list or read (the first
// round's too) falls back
// to a snapshot, or, for a catch-up abandoned meanwhile, is logged (an
// error is never dropped unseen).
// catchUpRoundGoesOn reports whether a later round goes on after the
// operation (what) that resumed it: not if it failed (then the catch-up
// fails, or an abandoned one logs why), nor if the standby resynced
// meanwhile.
func (jp *joinedPeers) catchUpRoundGoesOn(c catchUpStep, d IODone, what string) bool {
	live := c.live()
	if d.Err != IOOK {
		jp.catchUpRoundIOFailed(c.s, c.rp, live, fmt.Sprintf("cannot %s: %s %s", what, d.Err, d.Detail))
		return false
	}
	return live
}

func (jp *joinedPeers) catchUpRoundIOFailed(s int, rp *replPeer, live bool, why string) {
	if !live {
		jp.log(Warn, "repl.catch-up-io", "reading our log for an abandoned catch-up: "+why)
		return
	}
	jp.catchUpIOFailed(s, rp, why)
}

// segmentAfter is the segment holding the record after lsn (the last
// whose first LSN is at most lsn+1), "" if none does, and the first LSN
// of the segment after it (0: none follows).
func segmentAfter(entries []DirEntry, lsn uint64) (seg string, next uint64) {
	for _, p := range segmentsByLSN(entries) {
		first, _ := wal.ParseSegmentName(p[len(wal.WALDir)+1:])
		if first > lsn+1 {
			if seg != "" {
				return seg, first
			}
			break
		}
		seg = p
	}
	return seg, 0
}

// framesFrom is the frames of a segment's bytes after lsn (a torn tail
// is no record) and the last LSN in it; why says what is wrong if the
// records after lsn do not follow it.
func framesFrom(data []byte, lsn uint64) (frames []byte, end uint64, why string) {
	cut := -1
	end = lsn
	valid, err := wal.WalkPositions(data, func(off int, l, _ uint64) error {
		if l <= lsn {
			return nil
		}
		if l != end+1 {
			why = fmt.Sprintf("the records skip from lsn %d to %d", end, l)
			return errStop
		}
		if cut < 0 {
			cut = off
		}
		end = l
		return nil
	})
	switch {
	case why != "":
		return nil, 0, why
	case err != nil:
		return nil, 0, fmt.Sprintf("the primary's own log does not scan: %v", err)
	case cut < 0:
		return nil, lsn, ""
	}
	return data[cut:valid], end, ""
}

// finishCatchUp sends the batches written since the last read was issued
// (the records after cu.sent), then streams live.
func (jp *joinedPeers) finishCatchUp(s int, rp *replPeer) {
	cu := rp.catchUp
	end := cu.sent
	var frames []byte
	for _, b := range cu.held.batches {
		rest, last, why := framesFrom(b, end)
		if why != "" {
			jp.catchUpFailed(s, rp, "records written meanwhile: "+why)
			return
		}
		frames, end = append(frames, rest...), last
	}
	jp.log(Info, "repl.caught-up", fmt.Sprintf("%s caught up from lsn %d (term %d): %d records, no snapshot; streaming live", jp.peerName(s), cu.from.lsn, cu.from.term, end-cu.from.lsn))
	var chunks [][]byte // none when it has every record: an empty one is "unusable" to it
	if len(frames) > 0 {
		chunks = splitFrames(frames, MaxConfigSize)
	}
	if !cu.started { // it had every record: the first message says where it stands
		var first []byte
		if len(chunks) > 0 {
			first, chunks = chunks[0], chunks[1:]
		}
		jp.sendCatchUp(s, rp, first)
	}
	rp.catchUp = nil
	for _, c := range chunks {
		jp.el.send(s, Msg{Type: MsgReplRecords, ReqID: rp.Epoch, Bytes: c})
	}
}

// lastLSN is the LSN of the last of a run of frames.
func lastLSN(frames []byte) (last uint64) {
	_, _ = wal.WalkPositions(frames, func(_ int, lsn, _ uint64) error {
		last = lsn
		return nil
	})
	return last
}

// catchUpFailed falls back to a snapshot: the records are not ours to
// send (Info), or our own log could not be read (a WARN: an I/O error).
func (jp *joinedPeers) catchUpFailed(s int, rp *replPeer, why string) {
	jp.catchUpFallback(s, rp, Info, why)
}

func (jp *joinedPeers) catchUpIOFailed(s int, rp *replPeer, why string) {
	jp.catchUpFallback(s, rp, Warn, why)
}

func (jp *joinedPeers) catchUpFallback(s int, rp *replPeer, level Level, why string) {
	key := "repl.catch-up-refused"
	if level == Warn {
		key = "repl.catch-up-io"
	}
	jp.log(level, key, fmt.Sprintf("cannot catch %s up from lsn %d (%s): sending a snapshot", jp.peerName(s), rp.catchUp.from.lsn, why))
	delete(jp.journal.jobs.repl, s)
	jp.sendSnapshot(s)
}

// onCatchUp is the standby's side of a catch-up sync's first message: it
// starts the sync only if its log still ends at the position it asked
// from; otherwise it asks again.
func (sl *standbyLog) onCatchUp(from int, m Msg) {
	if sl.role != RoleStandby || from != sl.el.primary || m.ReqID <= sl.epochSeen {
		return
	}
	if m.Diverged {
		sl.truncateLog(m)
		return
	}
	if !sl.canCatchUp() || sl.disk.logPos != (logPos{term: m.PrevTerm, lsn: m.PrevLSN}) {
		sl.log(Info, "repl.catch-up-stale", fmt.Sprintf("catch-up from lsn %d (term %d) no longer matches our log (term %d, lsn %d): asking again", m.PrevLSN, m.PrevTerm, sl.disk.logPos.term, sl.disk.logPos.lsn))
		sl.resync()
		return
	}
	sl.epochSeen = m.ReqID
	// installing until the log's directories exist (a node with no log yet).
	sr := &standbyRepl{epoch: m.ReqID, expect: m.PrevLSN + 1, seg: wal.SegmentPath(m.PrevLSN + 1), known: map[string]bool{}, segLimit: sl.firstSegLimit(), installing: true}
	sl.setSync(sr)
	sl.replFailure = ""
	sl.log(Info, "repl.catching-up", fmt.Sprintf("job log catching up from %s after lsn %d", sl.peerName(from), m.PrevLSN))
	if m.Bytes != nil {
		sr.queue = append(sr.queue, m)
	}
	prev := sl.ops.own(sr.owner)
	sl.run(mkdirOps([]string{wal.WALDir, wal.SnapDir}, DataDir), catchUpStep{kind: catchUpDirsMade, sr: sr})
	sl.ops.cur = prev
}

// catchUpDirsMade: the standby's log directories exist; its sync
// acknowledges and writes what it was sent.
func (jp *joinedPeers) catchUpDirsMade(sr *standbyRepl) {
	sr.installing = false
	jp.sb.ackRepl()
	jp.sb.drainRepl()
}
