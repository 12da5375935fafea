package sm

import (
	"fmt"
	"slices"

	"github.com/xce-hpc/xce/sm/wal"
)

// Truncating a divergent suffix (issue 7 A4). A primary that finds a
// standby's log diverging from its own (catchup.go) names its last record
// at or before the standby's position whose term is no higher than the
// standby's there: every record of ours after our last record with a term
// no higher than that one is then unlike the primary's, so it goes, and we
// join again from where we end. Each round ends strictly lower (the
// primary's record has a lower term than ours at our position, or a lower
// LSN), so a few rounds reach the point where the logs agree. What goes
// was never committed: the primary's log holds every committed record
// (leader completeness), and ours differs from it there.
//
// The suffix goes newest segment first, each unlink made durable before
// the next, then the segment holding the new end is rewritten through a
// temporary file: a crash at any point leaves a prefix of the old log. We
// claim the shorter log (in votes and messages) from the start: claiming
// less than the disk holds is safe, since what is cut was never committed.

// logRecord is one record of our log as read for a truncation.
type logRecord struct {
	pos logPos
	end int // offset just past its frame in its segment
}

// logSegment is one segment as read for a truncation.
type logSegment struct {
	path string
	data []byte
	recs []logRecord
}

// truncateLog cuts our log back to its last record at or before
// (m.PrevTerm, m.PrevLSN) with a term no higher, then joins again.
func (sl *standbyLog) truncateLog(m Msg) {
	sl.epochSeen = m.ReqID
	if sl.compact != nil {
		sl.compact.thenJoin = true // it must not cut what the snapshot covers
		return
	}
	sl.ckptBase = nil // what it cuts may be what the last checkpoint built on
	if !sl.canCatchUp() {
		sl.resync()
		return
	}
	limit := logPos{term: m.PrevTerm, lsn: m.PrevLSN}
	sr := &standbyRepl{epoch: m.ReqID, installing: true, known: map[string]bool{}, segLimit: sl.firstSegLimit()}
	sl.setSync(sr)
	sl.disk.logClean = false // no catch-up from our log until it is cut
	// The cut is this sync's: a newer sync or a promotion stops it where it
	// is, a prefix of our old log (pending.go).
	prev := sl.ops.own(sr.owner)
	sl.startTruncation(limit)
	sl.ops.cur = prev
}

func (sl *standbyLog) startTruncation(limit logPos) {
	sl.io(FileOp{Op: OpList, Path: wal.SnapDir}, truncateStep{kind: truncateSnapsListed, t: &truncation{limit: limit}})
}

// truncation is a cut of our log in progress: what the primary's limit
// is, what the reads found, and once planned, where the log is cut.
type truncation struct {
	limit logPos
	floor uint64       // our newest snapshot's LSN: the cut cannot go below it
	segs  []logSegment // every segment of our log, oldest first
	left  int          // segment reads still in flight
	cut   int          // the segment holding the new end
	keep  logPos       // the new end
	from  logPos       // where our log ended before
}

// truncateStep is what resumes in a truncation: the listings, each
// segment's read (all in flight at once), the suffix's removal, the
// rewrite of the segment holding the new end.
type truncateStep struct {
	kind truncateKind
	t    *truncation
	i    int    // truncateSegRead: which segment
	path string // truncateSegRead: its path
}

type truncateKind uint8

const (
	truncateSnapsListed   truncateKind = iota // data/snap listed: the floor, then list data/wal
	truncateSegsListed                        // data/wal listed: read every segment
	truncateSegRead                           // one segment read: plan once all are
	truncateSuffixRemoved                     // the segments after the new end removed: rewrite the one holding it
	truncateSegRewritten                      // the segment holding the new end rewritten: truncated
)

var truncateKindNames = [...]string{"data/snap listed", "data/wal listed", "segment read", "suffix removed", "segment rewritten"}

func (s truncateStep) String() string {
	t := s.t
	switch s.kind {
	case truncateSegRead:
		return fmt.Sprintf("truncate to (lsn %d, term %d): %s %s (%d reads in flight)", t.limit.lsn, t.limit.term, truncateKindNames[s.kind], s.path, t.left)
	case truncateSuffixRemoved, truncateSegRewritten:
		return fmt.Sprintf("truncate from lsn %d to lsn %d (term %d): %s", t.from.lsn, t.keep.lsn, t.keep.term, truncateKindNames[s.kind])
	}
	return fmt.Sprintf("truncate to (lsn %d, term %d): %s", t.limit.lsn, t.limit.term, truncateKindNames[s.kind])
}

func (s truncateStep) resume(n *Node, r result) {
	t := s.t
	switch s.kind {
	case truncateSnapsListed:
		if r.Err != IOOK && r.Err != IONotExist { // no directory: no snapshot
			n.sb.truncateFailed("list "+wal.SnapDir, r.IODone)
			return
		}
		// Our newest snapshot holds every record up to its LSN: the cut
		// cannot go below it.
		for _, e := range r.Entries {
			if lsn, ok := wal.ParseSnapshotName(e.Name); ok {
				t.floor = max(t.floor, lsn)
			}
		}
		n.sb.readSegments(t)
	case truncateSegsListed:
		n.sb.segmentsListed(t, r.IODone)
	case truncateSegRead:
		if r.Err != IOOK {
			n.sb.truncateFailed("read "+s.path, r.IODone)
			return
		}
		t.segs[s.i] = logSegment{path: s.path, data: r.Data}
		if t.left--; t.left == 0 {
			n.sb.planTruncation(t)
		}
	case truncateSuffixRemoved:
		if r.failed != "" {
			n.sb.truncateFailed(r.failed, r.IODone)
			return
		}
		n.sb.rewriteEnd(t)
	case truncateSegRewritten:
		if r.failed != "" {
			n.sb.truncateFailed(r.failed, r.IODone)
			return
		}
		n.sb.truncated(t)
	}
}

// readSegments reads every segment of our log, oldest first.
func (sl *standbyLog) readSegments(t *truncation) {
	sl.io(FileOp{Op: OpList, Path: wal.WALDir}, truncateStep{kind: truncateSegsListed, t: t})
}

// segmentsListed issues the reads of every segment listed, all at once.
func (sl *standbyLog) segmentsListed(t *truncation, d IODone) {
	if d.Err != IOOK {
		sl.truncateFailed("list "+wal.WALDir, d)
		return
	}
	paths := segmentsByLSN(d.Entries)
	if len(paths) == 0 {
		sl.truncateRefused("our log has no segments")
		return
	}
	t.segs = make([]logSegment, len(paths))
	t.left = len(paths)
	for i, p := range paths {
		sl.io(FileOp{Op: OpRead, Path: p, MaxSize: maxLogFile}, truncateStep{kind: truncateSegRead, t: t, i: i, path: p})
	}
}

// segmentsByLSN lists the segment paths among entries, oldest first.
func segmentsByLSN(entries []DirEntry) []string {
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name
	}
	return prefixAll(wal.WALDir, wal.SortSegments(names))
}

// planTruncation finds the new end of our log in what the reads found and
// cuts the log back to it.
func (sl *standbyLog) planTruncation(t *truncation) {
	limit, floor, segs := t.limit, t.floor, t.segs
	var last logPos
	cut, keep := -1, logPos{} // the segment holding the new end, and that end
	for i := range segs {
		s := &segs[i]
		var why string
		valid, err := wal.WalkPositions(s.data, func(off int, lsn, term uint64) error {
			pos := logPos{term: term, lsn: lsn}
			if last.lsn > 0 && pos.lsn != last.lsn+1 {
				why = fmt.Sprintf("our segments skip from lsn %d to %d", last.lsn, pos.lsn)
				return errStop
			}
			if k := len(s.recs); k > 0 {
				s.recs[k-1].end = off
			}
			s.recs = append(s.recs, logRecord{pos: pos})
			last = pos
			if pos.lsn <= limit.lsn && pos.term <= limit.term {
				cut, keep = i, pos
			}
			return nil
		})
		if k := len(s.recs); k > 0 {
			s.recs[k-1].end = valid
		}
		switch {
		case why != "":
			sl.truncateRefused(why)
			return
		case err != nil || valid != len(s.data):
			sl.truncateRefused(fmt.Sprintf("%s does not scan to its end (%d of %d bytes valid: %v)", s.path, valid, len(s.data), err))
			return
		}
	}
	switch {
	case last != sl.disk.logPos:
		sl.truncateRefused(fmt.Sprintf("our segments end at lsn %d (term %d), not where our log was (lsn %d, term %d)", last.lsn, last.term, sl.disk.logPos.lsn, sl.disk.logPos.term))
		return
	case cut < 0:
		sl.truncateRefused(fmt.Sprintf("no record of ours at or before lsn %d has a term <= %d", limit.lsn, limit.term))
		return
	case keep.lsn < floor:
		sl.truncateRefused(fmt.Sprintf("the logs agree only before lsn %d, which our snapshot covers", floor))
		return
	case !sl.disk.logPos.after(keep):
		sl.truncateRefused(fmt.Sprintf("the primary's limit (lsn %d, term %d) does not shorten our log", limit.lsn, limit.term))
		return
	}
	sl.log(Info, "repl.truncating", fmt.Sprintf("our log diverges from %s's: cutting it from lsn %d (term %d) back to lsn %d (term %d)", sl.peerName(sl.el.primary), sl.disk.logPos.lsn, sl.disk.logPos.term, keep.lsn, keep.term))
	t.from, t.cut, t.keep = sl.disk.logPos, cut, keep
	sl.disk.logPos = keep
	var drop []string
	for _, s := range segs[cut+1:] {
		drop = append(drop, s.path)
	}
	slices.Reverse(drop) // newest first: every crash state is a prefix of the old log
	sl.run(removeEachOps(drop, wal.WALDir), truncateStep{kind: truncateSuffixRemoved, t: t})
}

// rewriteEnd cuts the segment holding the new end there, through a
// temporary file, unless the new end closes it already.
func (sl *standbyLog) rewriteEnd(t *truncation) {
	s := t.segs[t.cut]
	end := s.recs[len(s.recs)-1]
	if end.pos == t.keep {
		sl.truncated(t) // the new end closes that segment already
		return
	}
	at := 0
	for _, r := range s.recs {
		if r.pos == t.keep {
			at = r.end
		}
	}
	sl.replaceDurably(s.path+".tmp", s.path, wal.WALDir, s.data[:at], truncateStep{kind: truncateSegRewritten, t: t})
}

// truncated: our log ends at t.keep; we join again from there.
func (sl *standbyLog) truncated(t *truncation) {
	sl.setSync(nil)
	sl.disk.logClean = true
	sl.log(Info, "repl.truncated", fmt.Sprintf("job log cut back from lsn %d to lsn %d (term %d): joining %s again", t.from.lsn, t.keep.lsn, t.keep.term, sl.peerName(sl.el.primary)))
	sl.resync()
}

// truncateRefused: our log cannot be cut to where the primary's agrees
// (its records are not ours to keep); a snapshot replaces it.
func (sl *standbyLog) truncateRefused(why string) {
	sl.log(Info, "repl.truncate-refused", fmt.Sprintf("cannot cut our log back to where %s's agrees (%s): asking for a snapshot", sl.peerName(sl.el.primary), why))
	sl.disk.logClean = true
	sl.truncateEnd()
}

// truncateFailed: an I/O error part way; what is on disk is a prefix of
// our old log, but no longer the one we claim, so only a snapshot can
// sync us (our acks say why meanwhile).
func (sl *standbyLog) truncateFailed(what string, d IODone) {
	sl.log(Warn, "repl.truncate-failed", fmt.Sprintf("cutting our divergent log suffix: %s failed: %s %s — asking for a snapshot", what, d.Err, d.Detail))
	sl.replFailure = fmt.Sprintf("log truncation: %s: %s", what, d.Err)
	sl.truncateEnd()
}

func (sl *standbyLog) truncateEnd() {
	sl.setSync(nil)
	sl.wantSnapshot = true
	sl.resync()
}
