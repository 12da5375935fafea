package sm

import (
	"fmt"

	"xce/schema"
	"xce/sm/wal"
)

// scanLogPosition finds the freshness of the job log on disk at boot, the
// way recovery will read it: the newest snapshot, then the records after
// it in the planned segments (up to a torn tail), unless a segment's record
// at the snapshot's LSN has another term (the rest of a replaced log:
// recovery removes those segments). Every file read is fsync'd first: the
// position a node votes with must be durable. then receives the position
// (the caller decides whether it is still the node's) and whether the log
// is clean: it ends exactly there, with no torn tail, unreadable snapshot
// or replaced log's segments after it (only a clean log may be extended
// by a catch-up).
func (n *Node) scanLogPosition(then func(logPos, bool)) {
	n.listForScan(wal.WALDir, func(segs []string) {
		n.listForScan(wal.SnapDir, func(snaps []string) {
			plan, err := wal.PlanRecovery(snaps, segs)
			if err != nil {
				n.log(Warn, "wal.position-unknown", fmt.Sprintf("job log position: %v (recovery will refuse this log)", err))
			}
			clean := err == nil
			if plan.Snapshot == "" {
				n.scanSegments(plan.Segments, logPos{}, clean, then)
				return
			}
			path := wal.SnapDir + "/" + plan.Snapshot
			n.readDurably(path, func(d IODone) {
				if d.Err != IOOK {
					n.dieUnreadable(path, d)
					return
				}
				s, err := wal.DecodeSnapshot(d.Data)
				if err != nil { // corrupt: recovery falls back the same way
					n.log(Warn, "wal.position-unknown", fmt.Sprintf("cannot read the newest snapshot %s: %s %v — log position from the segments only", path, d.Err, err))
					n.scanSegments(plan.Segments, logPos{}, false, then)
					return
				}
				n.scanSegments(plan.Segments, logPos{term: s.GetTerm(), lsn: s.GetLsn()}, clean, then)
			})
		})
	})
}

func (n *Node) listForScan(dir string, k func([]string)) {
	n.io(FileOp{Op: OpList, Path: dir}, func(d IODone) {
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
		n.io(FileOp{Op: OpFsyncDir, Path: dir}, func(IODone) { k(names) })
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
		n.readDurably(path, func(d IODone) {
			if d.Err != IOOK {
				n.dieUnreadable(path, d)
				return
			}
			diverged := false
			valid, err := wal.Walk(d.Data, func(_ int, r *schema.WalRecord) error {
				switch {
				case r.GetLsn() == snap.lsn && snap.lsn > 0 && r.GetTerm() != snap.term:
					diverged = true
					return errDiverged
				case r.GetLsn() > pos.lsn:
					pos = logPos{term: r.GetTerm(), lsn: r.GetLsn()}
				}
				return nil
			})
			if diverged {
				pos = snap
			}
			if err != nil { // corruption or divergence: the log ends here
				then(pos, false)
				return
			}
			if valid < len(d.Data) {
				clean = false // a torn tail: recovery truncates it
			}
			walk(rest[1:])
		})
	}
	walk(segs)
}

// dieUnreadable: a log the node cannot read has an unknown position, and
// taking it as shorter than it is would let this node vote for a
// candidate that lacks records it holds. Restart and read it again.
func (n *Node) dieUnreadable(path string, d IODone) {
	n.die("fatal.wal-unreadable", fmt.Sprintf("cannot read %s to learn the job log's position: %s %s — refusing to vote or stand without it", path, d.Err, d.Detail))
}
