package sm

import (
	"errors"
	"fmt"

	"xce/sm/tracker"
	"xce/sm/wal"
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

// catchUpRead is a catch-up in progress on the primary: the standby's
// position, and the batches written meanwhile (sent after what the read
// finds, without the LSNs the read already covered).
type catchUpRead struct {
	from logPos
	buf  [][]byte
}

// canCatchUp: the standby's log ends exactly at logPos with nothing after
// it, and nothing will change it but this primary's sync.
func (n *Node) canCatchUp() bool {
	return n.quorumMode() && n.role == RoleStandby && !n.logUnknown && n.logClean && !n.installBusy && n.replWriting == 0 && !n.wantSnapshot
}

// joinMsg is a standby's request for a log sync.
func (n *Node) joinMsg(reqID uint64) Msg {
	return Msg{Type: MsgJoin, ReqID: reqID, CatchUp: n.canCatchUp()}
}

// noteJoin keeps the position a standby asked to catch up from, for the
// sync that its join starts (now, or when recovery finishes).
func (n *Node) noteJoin(from int, m Msg) {
	if n.joinPos == nil {
		n.joinPos = map[int]logPos{}
	}
	delete(n.joinPos, from)
	if m.CatchUp {
		n.joinPos[from] = logPos{term: m.LogTerm, lsn: m.WALPos}
	}
}

// tryCatchUp starts a catch-up sync of standby s from its stated position,
// or reports that only a snapshot can sync it.
func (n *Node) tryCatchUp(s int) bool {
	from, ok := n.joinPos[s]
	delete(n.joinPos, s)
	j := n.jobs
	if !ok || !n.quorumMode() {
		return false
	}
	j.replEpoch++
	rp := &replPeer{Progress: tracker.New(j.replEpoch, from.lsn, int64(n.now.Mono)), catchUp: &catchUpRead{from: from}}
	j.setPeer(s, rp)
	if from == (logPos{term: j.lastTerm, lsn: j.nextLSN - 1}) {
		n.finishCatchUp(s, rp, nil, from.lsn) // nothing to read: it has every record
		return true
	}
	n.as(n.jobsOwner(), func() { n.readForCatchUp(j, s, rp) })
	return true
}

// readForCatchUp lists our segments and reads those after the standby's
// position.
func (n *Node) readForCatchUp(j *jobState, s int, rp *replPeer) {
	from := rp.catchUp.from
	n.io(FileOp{Op: OpList, Path: wal.WALDir}, func(d IODone) {
		if j.repl[s] != rp {
			return // resynced meanwhile
		}
		if d.Err != IOOK {
			n.catchUpIOFailed(s, rp, fmt.Sprintf("cannot list %s: %s %s", wal.WALDir, d.Err, d.Detail))
			return
		}
		segs := catchUpSegments(d.Entries, from.lsn)
		if len(segs) == 0 {
			n.catchUpFailed(s, rp, fmt.Sprintf("the records after lsn %d were checkpointed away", from.lsn))
			return
		}
		// Issued together, the reads run before any removal issued later.
		data := make([][]byte, len(segs))
		left := len(segs)
		for i, seg := range segs {
			n.io(FileOp{Op: OpRead, Path: seg, MaxSize: maxLogFile}, func(d IODone) {
				live := j.repl[s] == rp && rp.catchUp != nil // (a step-down drops this completion)
				if d.Err != IOOK {
					why := fmt.Sprintf("cannot read %s: %s %s", seg, d.Err, d.Detail)
					if !live {
						n.log(Warn, "repl.catch-up-io", "reading our log for an abandoned catch-up: "+why)
						return
					}
					n.catchUpIOFailed(s, rp, why)
					return
				}
				if !live {
					return
				}
				data[i] = d.Data
				if left--; left == 0 {
					n.catchUpRead(s, rp, data)
				}
			})
		}
	})
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
func (n *Node) catchUpRead(s int, rp *replPeer, data [][]byte) {
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
			n.catchUpFailed(s, rp, why)
			return
		case err != nil:
			n.catchUpFailed(s, rp, fmt.Sprintf("the primary's own log does not scan: %v", err))
			return
		}
		if cut >= 0 {
			frames = append(frames, d[cut:valid]...) // a torn tail is no record
		}
	}
	switch {
	case matched && len(frames) > maxCatchUpBytes:
		n.catchUpFailed(s, rp, fmt.Sprintf("%d bytes of records to send, more than %d (a snapshot, sent with flow control, is the better way)", len(frames), maxCatchUpBytes))
	case matched:
		n.finishCatchUp(s, rp, frames, max(end, from.lsn))
	case !diverged && from.lsn <= end:
		n.catchUpFailed(s, rp, fmt.Sprintf("no record at lsn %d in our segments", from.lsn))
	case hint.lsn == 0:
		n.catchUpFailed(s, rp, fmt.Sprintf("its log diverges from ours before our oldest record (lsn %d, term %d)", from.lsn, from.term))
	default:
		n.tellDiverged(s, rp, hint)
	}
}

// tellDiverged tells standby s that its log diverges from ours after
// hint: it truncates its suffix (truncate.go) and joins again. Until then
// it is in no sync (its acks say only that it is alive).
func (n *Node) tellDiverged(s int, rp *replPeer, hint logPos) {
	from := rp.catchUp.from
	rp.catchUp, rp.truncating = nil, true
	n.log(Info, "repl.diverged", fmt.Sprintf("%s's log (lsn %d, term %d) diverges from ours: it truncates to at most lsn %d (term %d) and joins again", n.peerName(s), from.lsn, from.term, hint.lsn, hint.term))
	n.send(s, Msg{Type: MsgReplRecords, ReqID: rp.Epoch, CatchUp: true, Diverged: true, PrevLSN: hint.lsn, PrevTerm: hint.term})
}

// maxCatchUpBytes bounds a catch-up: its records go at once, and more
// than this would overflow the transport's per-peer queue (64 messages of
// up to 1 MiB, drop-oldest) under load; a snapshot goes chunk by chunk.
const maxCatchUpBytes = 32 << 20

// errStop ends a wal.Walk early.
var errStop = errors.New("stop")

// finishCatchUp sends frames (the records after the standby's position up
// to end) and the batches written meanwhile, then streams live.
func (n *Node) finishCatchUp(s int, rp *replPeer, frames []byte, end uint64) {
	for _, b := range rp.catchUp.buf {
		rest := framesAfter(b, end)
		if len(rest) == 0 {
			continue
		}
		first, last := lsnRange(rest)
		if first != end+1 {
			n.catchUpFailed(s, rp, fmt.Sprintf("records written meanwhile start at lsn %d, after %d", first, end))
			return
		}
		frames = append(frames, rest...)
		end = last
	}
	from := rp.catchUp.from
	rp.catchUp = nil
	n.log(Info, "repl.catch-up", fmt.Sprintf("catching %s up from lsn %d (term %d): %d records, no snapshot", n.peerName(s), from.lsn, from.term, end-from.lsn))
	start := Msg{Type: MsgReplRecords, ReqID: rp.Epoch, CatchUp: true, PrevLSN: from.lsn, PrevTerm: from.term}
	var chunks [][]byte // none when it has every record: an empty one is "unusable" to it
	if len(frames) > 0 {
		chunks = splitFrames(frames, MaxConfigSize)
		start.Bytes, chunks = chunks[0], chunks[1:]
	}
	n.send(s, start)
	for _, c := range chunks {
		n.send(s, Msg{Type: MsgReplRecords, ReqID: rp.Epoch, Bytes: c})
	}
}

// lsnRange is the first and last LSN of a run of frames.
func lsnRange(frames []byte) (first, last uint64) {
	_, _ = wal.WalkPositions(frames, func(_ int, lsn, _ uint64) error {
		if first == 0 {
			first = lsn
		}
		last = lsn
		return nil
	})
	return first, last
}

// catchUpFailed falls back to a snapshot: the records are not ours to
// send (Info), or our own log could not be read (a WARN: an I/O error).
func (n *Node) catchUpFailed(s int, rp *replPeer, why string) { n.catchUpFallback(s, rp, Info, why) }

func (n *Node) catchUpIOFailed(s int, rp *replPeer, why string) { n.catchUpFallback(s, rp, Warn, why) }

func (n *Node) catchUpFallback(s int, rp *replPeer, level Level, why string) {
	key := "repl.catch-up-refused"
	if level == Warn {
		key = "repl.catch-up-io"
	}
	n.log(level, key, fmt.Sprintf("cannot catch %s up from lsn %d (%s): sending a snapshot", n.peerName(s), rp.catchUp.from.lsn, why))
	delete(n.jobs.repl, s)
	n.sendSnapshot(s)
}

// onCatchUp is the standby's side of a catch-up sync's first message: it
// starts the sync only if its log still ends at the position it asked
// from; otherwise it asks again.
func (n *Node) onCatchUp(from int, m Msg) {
	if n.role != RoleStandby || from != n.primary || m.ReqID <= n.epochSeen {
		return
	}
	if m.Diverged {
		n.truncateLog(m)
		return
	}
	if !n.canCatchUp() || n.logPos != (logPos{term: m.PrevTerm, lsn: m.PrevLSN}) {
		n.log(Info, "repl.catch-up-stale", fmt.Sprintf("catch-up from lsn %d (term %d) no longer matches our log (term %d, lsn %d): asking again", m.PrevLSN, m.PrevTerm, n.logPos.term, n.logPos.lsn))
		n.resync()
		return
	}
	n.epochSeen = m.ReqID
	// installing until the log's directories exist (a node with no log yet).
	sr := &standbyRepl{epoch: m.ReqID, expect: m.PrevLSN + 1, seg: wal.SegmentPath(m.PrevLSN + 1), known: map[string]bool{}, segLimit: n.firstSegLimit(), installing: true}
	n.setSync(sr)
	n.replFailure = ""
	n.log(Info, "repl.catching-up", fmt.Sprintf("job log catching up from %s after lsn %d", n.peerName(from), m.PrevLSN))
	if m.Bytes != nil {
		sr.queue = append(sr.queue, m)
	}
	n.as(sr.owner, func() {
		n.mkdirs2([]string{wal.WALDir, wal.SnapDir}, DataDir, func() {
			sr.installing = false
			n.ackRepl()
			n.drainRepl()
		})
	})
}
