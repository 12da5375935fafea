package sm

import (
	"fmt"
	"slices"

	"xce/sm/wal"
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
func (n *Node) truncateLog(m Msg) {
	n.sb.epochSeen = m.ReqID
	if n.sb.compact != nil {
		n.sb.compact.thenJoin = true // it must not cut what the snapshot covers
		return
	}
	if !n.canCatchUp() {
		n.resync()
		return
	}
	limit := logPos{term: m.PrevTerm, lsn: m.PrevLSN}
	sr := &standbyRepl{epoch: m.ReqID, installing: true, known: map[string]bool{}, segLimit: n.firstSegLimit()}
	n.setSync(sr)
	n.disk.logClean = false // no catch-up from our log until it is cut
	// The cut is this sync's: a newer sync or a promotion stops it where it
	// is, a prefix of our old log (pending.go).
	prev := n.ops.own(sr.owner)
	n.startTruncation(limit)
	n.ops.cur = prev
}

func (n *Node) startTruncation(limit logPos) {
	n.io(FileOp{Op: OpList, Path: wal.SnapDir}, truncateStep{kind: truncateSnapsListed, t: &truncation{limit: limit}})
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
			n.truncateFailed("list "+wal.SnapDir, r.IODone)
			return
		}
		// Our newest snapshot holds every record up to its LSN: the cut
		// cannot go below it.
		for _, e := range r.Entries {
			if lsn, ok := wal.ParseSnapshotName(e.Name); ok {
				t.floor = max(t.floor, lsn)
			}
		}
		n.readSegments(t)
	case truncateSegsListed:
		n.segmentsListed(t, r.IODone)
	case truncateSegRead:
		if r.Err != IOOK {
			n.truncateFailed("read "+s.path, r.IODone)
			return
		}
		t.segs[s.i] = logSegment{path: s.path, data: r.Data}
		if t.left--; t.left == 0 {
			n.planTruncation(t)
		}
	case truncateSuffixRemoved:
		if r.failed != "" {
			n.truncateFailed(r.failed, r.IODone)
			return
		}
		n.rewriteEnd(t)
	case truncateSegRewritten:
		if r.failed != "" {
			n.truncateFailed(r.failed, r.IODone)
			return
		}
		n.truncated(t)
	}
}

// readSegments reads every segment of our log, oldest first.
func (n *Node) readSegments(t *truncation) {
	n.io(FileOp{Op: OpList, Path: wal.WALDir}, truncateStep{kind: truncateSegsListed, t: t})
}

// segmentsListed issues the reads of every segment listed, all at once.
func (n *Node) segmentsListed(t *truncation, d IODone) {
	if d.Err != IOOK {
		n.truncateFailed("list "+wal.WALDir, d)
		return
	}
	paths := segmentsByLSN(d.Entries)
	if len(paths) == 0 {
		n.truncateRefused("our log has no segments")
		return
	}
	t.segs = make([]logSegment, len(paths))
	t.left = len(paths)
	for i, p := range paths {
		n.io(FileOp{Op: OpRead, Path: p, MaxSize: maxLogFile}, truncateStep{kind: truncateSegRead, t: t, i: i, path: p})
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
func (n *Node) planTruncation(t *truncation) {
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
			n.truncateRefused(why)
			return
		case err != nil || valid != len(s.data):
			n.truncateRefused(fmt.Sprintf("%s does not scan to its end (%d of %d bytes valid: %v)", s.path, valid, len(s.data), err))
			return
		}
	}
	switch {
	case last != n.disk.logPos:
		n.truncateRefused(fmt.Sprintf("our segments end at lsn %d (term %d), not where our log was (lsn %d, term %d)", last.lsn, last.term, n.disk.logPos.lsn, n.disk.logPos.term))
		return
	case cut < 0:
		n.truncateRefused(fmt.Sprintf("no record of ours at or before lsn %d has a term <= %d", limit.lsn, limit.term))
		return
	case keep.lsn < floor:
		n.truncateRefused(fmt.Sprintf("the logs agree only before lsn %d, which our snapshot covers", floor))
		return
	case !n.disk.logPos.after(keep):
		n.truncateRefused(fmt.Sprintf("the primary's limit (lsn %d, term %d) does not shorten our log", limit.lsn, limit.term))
		return
	}
	n.log(Info, "repl.truncating", fmt.Sprintf("our log diverges from %s's: cutting it from lsn %d (term %d) back to lsn %d (term %d)", n.peerName(n.el.primary), n.disk.logPos.lsn, n.disk.logPos.term, keep.lsn, keep.term))
	t.from, t.cut, t.keep = n.disk.logPos, cut, keep
	n.disk.logPos = keep
	var drop []string
	for _, s := range segs[cut+1:] {
		drop = append(drop, s.path)
	}
	slices.Reverse(drop) // newest first: every crash state is a prefix of the old log
	n.run(removeEachOps(drop, wal.WALDir), truncateStep{kind: truncateSuffixRemoved, t: t})
}

// rewriteEnd cuts the segment holding the new end there, through a
// temporary file, unless the new end closes it already.
func (n *Node) rewriteEnd(t *truncation) {
	s := t.segs[t.cut]
	end := s.recs[len(s.recs)-1]
	if end.pos == t.keep {
		n.truncated(t) // the new end closes that segment already
		return
	}
	at := 0
	for _, r := range s.recs {
		if r.pos == t.keep {
			at = r.end
		}
	}
	n.replaceDurably(s.path+".tmp", s.path, wal.WALDir, s.data[:at], truncateStep{kind: truncateSegRewritten, t: t})
}

// truncated: our log ends at t.keep; we join again from there.
func (n *Node) truncated(t *truncation) {
	n.setSync(nil)
	n.disk.logClean = true
	n.log(Info, "repl.truncated", fmt.Sprintf("job log cut back from lsn %d to lsn %d (term %d): joining %s again", t.from.lsn, t.keep.lsn, t.keep.term, n.peerName(n.el.primary)))
	n.resync()
}

// truncateRefused: our log cannot be cut to where the primary's agrees
// (its records are not ours to keep); a snapshot replaces it.
func (n *Node) truncateRefused(why string) {
	n.log(Info, "repl.truncate-refused", fmt.Sprintf("cannot cut our log back to where %s's agrees (%s): asking for a snapshot", n.peerName(n.el.primary), why))
	n.disk.logClean = true
	n.truncateEnd()
}

// truncateFailed: an I/O error part way; what is on disk is a prefix of
// our old log, but no longer the one we claim, so only a snapshot can
// sync us (our acks say why meanwhile).
func (n *Node) truncateFailed(what string, d IODone) {
	n.log(Warn, "repl.truncate-failed", fmt.Sprintf("cutting our divergent log suffix: %s failed: %s %s — asking for a snapshot", what, d.Err, d.Detail))
	n.sb.replFailure = fmt.Sprintf("log truncation: %s: %s", what, d.Err)
	n.truncateEnd()
}

func (n *Node) truncateEnd() {
	n.setSync(nil)
	n.sb.wantSnapshot = true
	n.resync()
}
