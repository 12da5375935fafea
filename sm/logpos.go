package sm

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"xce/sm/wal"
)

// scanLogPosition finds the freshness of the job log on disk at boot, the
// way recovery will read it: the newest snapshot, then the records after
// it in the planned segments (up to a torn tail), unless a segment's record
// at the snapshot's LSN has another term (the rest of a replaced log:
// recovery removes those segments). Every file read is fsync'd first: the
// position a node votes with must be durable. then receives the position
// (the caller decides whether it is still the node's) and whether the log
// is clean: it ends exactly there, with no torn tail, corrupt snapshot or
// replaced log's segments after it (only a clean log may be extended by a
// catch-up). It checks every frame as recovery does but decodes only each
// record's LSN and term (wal.WalkPositions, wal.SnapshotPosition):
// recovery decodes each record, and the snapshot, once.
func (n *Node) scanLogPosition(then func(logPos, bool)) {
	n.listForScan(wal.WALDir, func(segs []string) {
		n.listForScan(wal.SnapDir, func(snaps []string) {
			n.scanPlan(snaps, segs, "", then)
		})
	})
}

// scanPlan scans the plan for snaps and segs. bad names the newest
// snapshot found corrupt so far ("" if none): recovery then falls back to
// an older one but refuses a log that does not reach the corrupt one's LSN,
// so the scan refuses it too, naming the file, rather than claim records
// recovery cannot rebuild.
func (n *Node) scanPlan(snaps, segs []string, bad string, then func(logPos, bool)) {
	plan, err := wal.PlanRecovery(snaps, segs)
	if err != nil {
		if bad != "" {
			n.die("fatal.wal-corrupt", fmt.Sprintf("snapshot %s is corrupt and the log does not continue an older one (%v): restore this node's data/ or wipe it so it resyncs from the primary", bad, err))
			return
		}
		n.log(Warn, "wal.position-unknown", fmt.Sprintf("job log position: %v (recovery will refuse this log)", err))
	}
	then = n.mustReach(bad, then)
	clean := err == nil && bad == ""
	if plan.Snapshot == "" {
		n.scanSegments(plan.Segments, logPos{}, clean, then)
		return
	}
	path := wal.SnapDir + "/" + plan.Snapshot
	n.readScanning(path, func(d IODone) {
		if d.Err != IOOK {
			n.dieUnreadable(path, d)
			return
		}
		head, err := wal.SnapshotPosition(d.Data)
		if err != nil { // corrupt: recovery falls back to an older one, so do we
			n.log(Warn, "wal.position-unknown", fmt.Sprintf("cannot read the newest snapshot %s: %v — trying an older one", path, err))
			if bad == "" {
				bad = path
			}
			n.scanPlan(slices.DeleteFunc(slices.Clone(snaps), func(x string) bool { return x == plan.Snapshot }), segs, bad, then)
			return
		}
		if n.scanned != nil {
			n.scanned.checked[path] = head // these bytes matched their checksum
		}
		n.scanSegments(plan.Segments, logPos{term: head.Term, lsn: head.LSN}, clean, then)
	})
}

// mustReach wraps then: with a corrupt snapshot bad, the position found
// must reach its LSN (recovery's rule), else the node stops.
func (n *Node) mustReach(bad string, then func(logPos, bool)) func(logPos, bool) {
	lsn, ok := wal.ParseSnapshotName(strings.TrimPrefix(bad, wal.SnapDir+"/"))
	if bad == "" || !ok {
		return then
	}
	return func(pos logPos, clean bool) {
		if pos.lsn < lsn {
			n.die("fatal.wal-corrupt", fmt.Sprintf("snapshot %s is corrupt and the rest of the log ends at lsn %d: records %d..%d are lost — restore this node's data/ or wipe it so it resyncs from the primary", bad, pos.lsn, pos.lsn+1, lsn))
			return
		}
		then(pos, clean)
	}
}

func (n *Node) listForScan(dir string, k func([]string)) {
	n.ioFn(FileOp{Op: OpList, Path: dir}, func(d IODone) {
		if d.Err == IONotExist {
			k(nil) // no log yet
			return
		}
		if d.Err != IOOK {
			n.dieUnreadable(dir, d)
			return
		}
		names := make([]string, len(d.Entries))
		for i, e := range d.Entries {
			names[i] = e.Name
		}
		// The names we count must be durable too (a create whose
		// directory fsync never ran may vanish at a power cut).
		n.ioFn(FileOp{Op: OpFsyncDir, Path: dir}, func(IODone) { k(names) })
	})
}

// scanSegments walks segs after the snapshot at snap.
func (n *Node) scanSegments(segs []string, snap logPos, clean bool, then func(logPos, bool)) {
	pos := snap
	var walk func(rest []string)
	walk = func(rest []string) {
		if len(rest) == 0 {
			then(pos, clean)
			return
		}
		path := wal.WALDir + "/" + rest[0]
		n.readScanning(path, func(d IODone) {
			if d.Err != IOOK {
				n.dieUnreadable(path, d)
				return
			}
			diverged := false
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
			if n.scanned != nil {
				n.scanned.frames[path] = validLen // the frames before it matched their checksums
			}
			if diverged {
				pos = snap
			}
			var ce *wal.CorruptError
			if errors.As(err, &ce) && !n.opt.WALRepair {
				// Recovery refuses this log: so does the position. A
				// shorter claim would let this node vote for a candidate
				// lacking records it holds behind the corruption.
				n.die("fatal.wal-corrupt", fmt.Sprintf("WAL corruption in %s at offset %d: %s — records before it are intact; restart with --wal-repair to truncate the log there (records after it are lost)", path, ce.Offset, ce.Reason))
				return
			}
			if err != nil { // divergence, or corruption truncated by --wal-repair: the log ends here
				then(pos, false)
				return
			}
			if validLen < len(d.Data) && len(rest) > 1 {
				// A bad frame ends a segment that later ones follow:
				// recovery refuses it (or, repairing, truncates the log
				// here), so the position cannot count the later segments.
				if !n.opt.WALRepair {
					n.die("fatal.wal-corrupt", fmt.Sprintf("WAL segment %s ends in a bad record at offset %d but later segments follow — restart with --wal-repair to truncate there", path, validLen))
					return
				}
				then(pos, false)
				return
			}
			if validLen < len(d.Data) {
				clean = false // a torn tail: recovery truncates it
			}
			walk(rest[1:])
		})
	}
	walk(segs)
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

// scanBootLog is scanLogPosition at boot: the files it reads are kept
// for the first recovery, which then reads each record once. What the
// scan read is as durable as what recovery reads (both fsync before they
// count it), and it is the file as it is while the node changes nothing
// in data/wal or data/snap: any such change drops the hand-off
// (forgetScanned), as does becoming a standby, which recovers nothing.
func (n *Node) scanBootLog(then func(logPos, bool)) {
	n.scanned = &scannedFiles{data: map[string][]byte{}, checked: map[string]wal.SnapshotHead{}, frames: map[string]int{}}
	n.scanLogPosition(then)
}

// readScanning is the scan's readDurably; at boot it keeps what it read.
func (n *Node) readScanning(path string, k func(IODone)) {
	n.readDurably(path, func(d IODone) {
		if d.Err == IOOK && n.scanned != nil {
			n.scanned.data[path] = d.Data
		}
		k(d)
	})
}

// readForRecovery is recovery's readDurably: a file the boot scan read
// and fsync'd, unchanged since, is handed on without reading it again;
// checked, if not nil, is the head of a snapshot whose checksum the scan
// verified, and frames, of a segment, the length of the prefix whose
// frames' checksums it verified (0: none).
func (n *Node) readForRecovery(path string, k func(d IODone, checked *wal.SnapshotHead, frames int)) {
	if n.scanned != nil {
		if data, ok := n.scanned.data[path]; ok {
			var checked *wal.SnapshotHead
			if h, ok := n.scanned.checked[path]; ok {
				checked = &h
			}
			frames := n.scanned.frames[path]
			delete(n.scanned.data, path)
			delete(n.scanned.checked, path)
			delete(n.scanned.frames, path)
			k(IODone{Err: IOOK, Data: data}, checked, frames)
			return
		}
	}
	n.readDurably(path, func(d IODone) { k(d, nil, 0) })
}

// forgetScanned drops the boot scan's hand-off when op changes a file of
// the job log (n.io runs it on every file effect).
func (n *Node) forgetScanned(op FileOp) {
	switch op.Op {
	case OpWrite, OpAppend, OpRename, OpRemove:
	default:
		return
	}
	for _, p := range []string{op.Path, op.To} {
		if strings.HasPrefix(p, wal.WALDir+"/") || strings.HasPrefix(p, wal.SnapDir+"/") {
			n.scanned = nil
		}
	}
}

// dieUnreadable: a log the node cannot read has an unknown position, and
// taking it as shorter than it is would let this node vote for a
// candidate that lacks records it holds. Restart and read it again.
func (n *Node) dieUnreadable(path string, d IODone) {
	n.die("fatal.wal-unreadable", fmt.Sprintf("cannot read %s to learn the job log's position: %s %s — refusing to vote or stand without it", path, d.Err, d.Detail))
}
