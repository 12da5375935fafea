package sm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/xce-hpc/xce/sm/wal"
)

// scanLogPosition finds the freshness of the job log on disk at boot, the
// way recovery will read it: the newest snapshot, then the records after
// it in the planned segments (up to a torn tail), unless a segment's record
// at the snapshot's LSN has another term (the rest of a replaced log:
// recovery removes those segments). Every file read is fsync'd first: the
// position a node votes with must be durable. who asked receives the
// position (it decides whether it is still the node's: scanDone) and
// whether the log is clean: it ends exactly there, with no torn tail,
// corrupt snapshot or replaced log's segments after it (only a clean log
// may be extended by a catch-up). It checks every frame as recovery does
// but decodes only each record's LSN and term (wal.WalkPositions,
// wal.SnapshotPosition): recovery decodes each record, and the snapshot,
// once.
func (lg *jobLog) scanLogPosition(who scanFor) {
	lg.io(FileOp{Op: OpList, Path: wal.WALDir}, scanStep{kind: scanSegsListed, who: who})
}

// scanFor is who asked for a scan of the log's position, and so what the
// position found goes to (scanDone).
type scanFor uint8

const (
	scanForBoot   scanFor = iota // boot (scanBootLog): afterBootScan
	scanForRescan                // an install that stopped, or a step-down (installDone): afterRescan
)

var scanForNames = [...]string{"boot", "rescan"}

// scanStep is what resumes in a scan of the log's position: the listings
// (each made durable), the newest snapshot's read, then one segment's read
// at a time; its fields are the scan so far.
type scanStep struct {
	kind  scanKind
	who   scanFor
	segs  []string // the listing of data/wal
	snaps []string // the listing of data/snap
	bad   string   // the newest snapshot found corrupt so far ("" if none): scanDone
	path  string   // the file being read
	rest  []string // the plan's segments still to walk, rest[0] the one read
	snap  logPos   // the position of the plan's snapshot
	pos   logPos   // the position so far
	clean bool     // the log ends cleanly so far
}

type scanKind uint8

const (
	scanSegsListed  scanKind = iota // data/wal listed: fsync it
	scanSegsSynced                  // data/wal's listing durable: list data/snap
	scanSnapsListed                 // data/snap listed: fsync it
	scanSnapsSynced                 // data/snap's listing durable: plan
	scanSnapRead                    // the plan's snapshot read durably: its position, then the segments
	scanSegRead                     // a segment read durably: walk it, then the next
)

var scanKindNames = [...]string{"list data/wal", "fsync data/wal", "list data/snap", "fsync data/snap", "read snapshot", "read segment"}

func (s scanStep) String() string {
	var at string
	switch s.kind {
	case scanSnapRead:
		at = " " + s.path
	case scanSegRead:
		at = fmt.Sprintf(" %s (%d left), at lsn %d (term %d)", s.path, len(s.rest)-1, s.pos.lsn, s.pos.term)
	}
	return fmt.Sprintf("scan for %s: %s%s", scanForNames[s.who], scanKindNames[s.kind], at)
}

func (s scanStep) resume(n *Node, r result) {
	switch s.kind {
	case scanSegsListed:
		segs, ok := n.disk.scanListed(wal.WALDir, r)
		if !ok {
			return
		}
		s.segs = segs
		if r.Err == IONotExist { // no log yet
			n.disk.scanListSnaps(s)
			return
		}
		// The names we count must be durable too (a create whose
		// directory fsync never ran may vanish at a power cut).
		s.kind = scanSegsSynced
		n.io(FileOp{Op: OpFsyncDir, Path: wal.WALDir}, s)
	case scanSegsSynced:
		n.disk.scanListSnaps(s)
	case scanSnapsListed:
		snaps, ok := n.disk.scanListed(wal.SnapDir, r)
		if !ok {
			return
		}
		s.snaps = snaps
		if r.Err == IONotExist {
			n.disk.scanPlan(s.snaps, s.segs, "", s.who)
			return
		}
		s.kind = scanSnapsSynced
		n.io(FileOp{Op: OpFsyncDir, Path: wal.SnapDir}, s)
	case scanSnapsSynced:
		n.disk.scanPlan(s.snaps, s.segs, "", s.who)
	case scanSnapRead:
		n.disk.keepScanned(s.path, r)
		n.disk.scannedSnapshot(s, r.IODone)
	case scanSegRead:
		n.disk.keepScanned(s.path, r)
		n.disk.scannedSegment(s, r.IODone)
	}
}

// scanListSnaps lists data/snap once data/wal's listing is known.
func (lg *jobLog) scanListSnaps(s scanStep) {
	s.kind = scanSnapsListed
	lg.io(FileOp{Op: OpList, Path: wal.SnapDir}, s)
}

// scanListed is a listing of dir for the scan: no directory is no log yet
// (nil); one that cannot be listed stops the node (ok false).
func (lg *jobLog) scanListed(dir string, r result) (names []string, ok bool) {
	if r.Err == IONotExist {
		return nil, true
	}
	if r.Err != IOOK {
		lg.dieUnreadable(dir, r.IODone)
		return nil, false
	}
	return r.names(), true
}

// scanPlan scans the plan for snaps and segs. bad names the newest
// snapshot found corrupt so far ("" if none): recovery then falls back to
// an older one but refuses a log that does not reach the corrupt one's LSN,
// so the scan refuses it too, naming the file, rather than claim records
// recovery cannot rebuild (scanDone).
func (lg *jobLog) scanPlan(snaps, segs []string, bad string, who scanFor) {
	plan, err := wal.PlanRecovery(snaps, segs)
	if err != nil {
		if bad != "" {
			lg.node.die("fatal.wal-corrupt", fmt.Sprintf("snapshot %s is corrupt and the log does not continue an older one (%v): restore this node's data/ or wipe it so it resyncs from the primary", bad, err))
			return
		}
		lg.log(Warn, "wal.position-unknown", fmt.Sprintf("job log position: %v (recovery will refuse this log)", err))
	}
	s := scanStep{who: who, segs: segs, snaps: snaps, bad: bad, rest: plan.Segments, clean: err == nil && bad == ""}
	if plan.Snapshot == "" {
		lg.scanSegments(s)
		return
	}
	s.kind, s.path = scanSnapRead, wal.SnapDir+"/"+plan.Snapshot
	lg.readScanning(s)
}

// scannedSnapshot: the plan's snapshot was read (s.path), for its position.
func (lg *jobLog) scannedSnapshot(s scanStep, d IODone) {
	if d.Err != IOOK {
		lg.dieUnreadable(s.path, d)
		return
	}
	head, err := wal.SnapshotPosition(d.Data)
	if err != nil { // corrupt: recovery falls back to an older one, so do we
		lg.log(Warn, "wal.position-unknown", fmt.Sprintf("cannot read the newest snapshot %s: %v — trying an older one", s.path, err))
		bad := s.bad
		if bad == "" {
			bad = s.path
		}
		name := strings.TrimPrefix(s.path, wal.SnapDir+"/")
		lg.scanPlan(without(s.snaps, name), s.segs, bad, s.who)
		return
	}
	if lg.scanned != nil {
		lg.scanned.checked[s.path] = head // these bytes matched their checksum
	}
	s.snap = logPos{term: head.Term, lsn: head.LSN}
	lg.scanSegments(s)
}

// scanSegments walks s.rest after the snapshot at s.snap, one segment at a
// time (scannedSegment).
func (lg *jobLog) scanSegments(s scanStep) {
	s.pos = s.snap
	lg.walkSegments(s)
}

func (lg *jobLog) walkSegments(s scanStep) {
	if len(s.rest) == 0 {
		lg.scanDone(s, s.pos, s.clean)
		return
	}
	s.kind, s.path = scanSegRead, wal.WALDir+"/"+s.rest[0]
	lg.readScanning(s)
}

// scannedSegment: s.rest[0] was read (s.path); its records extend the
// position, then the walk goes on with the next.
func (lg *jobLog) scannedSegment(s scanStep, d IODone) {
	path, snap := s.path, s.snap
	if d.Err != IOOK {
		lg.dieUnreadable(path, d)
		return
	}
	diverged := false
	pos := s.pos
	validLen, err := wal.WalkPositions(d.Data, func(off int, lsn, term uint64) error {
		switch {
		case lsn == snap.lsn && snap.lsn > 0 && term != snap.term:
			diverged = true
			return errDiverged
		case lsn > snap.lsn && lsn != pos.lsn+1:
			// A gap (a segment that does not continue the one
			// before): recovery stops here, so must the position.
			return &wal.CorruptError{Offset: off, Reason: fmt.Sprintf("LSN %d where %d was expected", lsn, pos.lsn+1)}
		case lsn > pos.lsn:
			pos = logPos{term: term, lsn: lsn}
		}
		return nil
	})
	if lg.scanned != nil {
		lg.scanned.frames[path] = validLen // the frames before it matched their checksums
	}
	if diverged {
		pos = snap
	}
	var ce *wal.CorruptError
	if errors.As(err, &ce) && !lg.opt.WALRepair {
		// Recovery refuses this log: so does the position. A
		// shorter claim would let this node vote for a candidate
		// lacking records it holds behind the corruption.
		lg.node.die("fatal.wal-corrupt", fmt.Sprintf("WAL corruption in %s at offset %d: %s — records before it are intact; restart with --wal-repair to truncate the log there (records after it are lost)", path, ce.Offset, ce.Reason))
		return
	}
	if err != nil { // divergence, or corruption truncated by --wal-repair: the log ends here
		lg.scanDone(s, pos, false)
		return
	}
	if validLen < len(d.Data) && len(s.rest) > 1 {
		// A bad frame ends a segment that later ones follow:
		// recovery refuses it (or, repairing, truncates the log
		// here), so the position cannot count the later segments.
		if !lg.opt.WALRepair {
			lg.node.die("fatal.wal-corrupt", fmt.Sprintf("WAL segment %s ends in a bad record at offset %d but later segments follow — restart with --wal-repair to truncate there", path, validLen))
			return
		}
		lg.scanDone(s, pos, false)
		return
	}
	if validLen < len(d.Data) {
		s.clean = false // a torn tail: recovery truncates it
	}
	s.pos, s.rest = pos, s.rest[1:]
	lg.walkSegments(s)
}

// scanDone hands the position found to who asked. With a corrupt snapshot
// s.bad, the position must reach its LSN (recovery's rule), else the node
// stops.
func (lg *jobLog) scanDone(s scanStep, pos logPos, clean bool) {
	if lsn, ok := wal.ParseSnapshotName(strings.TrimPrefix(s.bad, wal.SnapDir+"/")); s.bad != "" && ok && pos.lsn < lsn {
		lg.node.die("fatal.wal-corrupt", fmt.Sprintf("snapshot %s is corrupt and the rest of the log ends at lsn %d: records %d..%d are lost — restore this node's data/ or wipe it so it resyncs from the primary", s.bad, pos.lsn, pos.lsn+1, lsn))
		return
	}
	switch s.who {
	case scanForBoot:
		lg.el.afterBootScan(pos, clean)
	case scanForRescan:
		lg.sb.afterRescan(pos, clean)
	}
}

// scannedFiles is the boot scan's hand-off to recovery (Node.scanned):
// the files it read, the head of each snapshot among them whose checksum
// it verified (wal.SnapshotPosition), so that the import does not pass
// over the same bytes again for either (wal.ReadCheckedSnapshot), and for
// each segment the length of its prefix whose frames' checksums it
// verified (wal.WalkPositions' valid length), which the replay does not
// compute again (wal.WalkChecked).
type scannedFiles struct {
	data    map[string][]byte
	checked map[string]wal.SnapshotHead
	frames  map[string]int
}

// scanBootLog is scanLogPosition at boot (afterBootScan gets the position): the files it reads are kept
// for the first recovery, which then reads each record once. What the
// scan read is as durable as what recovery reads (both fsync before they
// count it), and it is the file as it is while the node changes nothing
// in data/wal or data/snap: any such change drops the hand-off
// (forgetScanned), as does becoming a standby, which recovers nothing.
func (lg *jobLog) scanBootLog() {
	lg.scanned = &scannedFiles{data: map[string][]byte{}, checked: map[string]wal.SnapshotHead{}, frames: map[string]int{}}
	lg.scanLogPosition(scanForBoot)
}

// readScanning is the scan's readDurably of s.path; at boot it keeps what
// it read (keepScanned).
func (lg *jobLog) readScanning(s scanStep) { lg.run(readDurablyOps(s.path), s) }

func (dl *jobLog) keepScanned(path string, r result) {
	if r.Err == IOOK && dl.scanned != nil {
		dl.scanned.data[path] = r.Data
	}
}

// forgetScanned drops the boot scan's hand-off when op changes a file of
// the job log (n.io runs it on every file effect).
func (dl *jobLog) forgetScanned(op FileOp) {
	switch op.Op {
	case OpWrite, OpAppend, OpRename, OpRemove:
	default:
		return
	}
	for _, p := range []string{op.Path, op.To} {
		if strings.HasPrefix(p, wal.WALDir+"/") || strings.HasPrefix(p, wal.SnapDir+"/") {
			dl.scanned = nil
		}
	}
}

// dieUnreadable: a log the node cannot read has an unknown position, and
// taking it as shorter than it is would let this node vote for a
// candidate that lacks records it holds. Restart and read it again.
func (lg *jobLog) dieUnreadable(path string, d IODone) {
	lg.node.die("fatal.wal-unreadable", fmt.Sprintf("cannot read %s to learn the job log's position: %s %s — refusing to vote or stand without it", path, d.Err, d.Detail))
}

// without is names less every copy of name, in a new slice (a snapshot
// found unusable is dropped from the plan, and the plan made again).
func without(names []string, name string) []string {
	out := make([]string, 0, len(names))
	for _, x := range names {
		if x != name {
			out = append(out, x)
		}
	}
	return out
}
