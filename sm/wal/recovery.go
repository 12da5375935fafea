package wal

import (
	"errors"
	"fmt"
)

// ErrGap: the segments on disk do not continue the chosen snapshot (or, with
// no snapshot, do not start at LSN 1), so records are missing.
var ErrGap = errors.New("wal: log gap")

// Plan is what recovery loads: the snapshot (if any), then the records
// with LSN > SnapshotLSN from Segments, in order.
type Plan struct {
	Snapshot    string   // file name in SnapDir, "" = start from empty state
	SnapshotLSN uint64   // 0 without a snapshot
	Segments    []string // file names in WALDir, by first LSN ascending
	// FirstLSN is the LSN the replay must start with: SnapshotLSN+1. The
	// replayer skips records at or below SnapshotLSN (the first listed
	// segment may start before it) and checks that the LSNs it applies
	// are contiguous from FirstLSN.
	FirstLSN uint64
}

// PlanRecovery chooses what to load from the names listed in SnapDir
// (snapshots) and WALDir (segments). Names the parsers do not accept (temp
// files, strays) are ignored.
//
// The rule, with segments sorted by first LSN f_0 < f_1 < ... < f_k and
// segment i holding LSNs [f_i, f_{i+1}) (the last one open-ended):
//
//   - Snapshot: the one with the highest LSN S (none: S = 0). If it then
//     fails to decode, the caller drops its name from the list and plans
//     again (newest valid snapshot wins).
//   - Segments: every segment that can hold an LSN > S, i.e. segment i
//     with i = k or f_{i+1} > S+1. These are a suffix of the sorted list.
//   - Gap check: if the first chosen segment starts after S+1, the records
//     S+1..f-1 are gone and PlanRecovery returns ErrGap (with the plan
//     filled in, for the error message). No segments at all is no gap:
//     nothing was logged after the snapshot.
func PlanRecovery(snapshots, segments []string) (Plan, error) {
	var p Plan
	if snaps := parseAll(snapshots, ParseSnapshotName); len(snaps) > 0 {
		newest := snaps[len(snaps)-1]
		p.Snapshot, p.SnapshotLSN = newest.name, newest.lsn
	}
	p.FirstLSN = p.SnapshotLSN + 1
	segs := parseAll(segments, ParseSegmentName)
	start := len(segs)
	for i := range segs {
		if i == len(segs)-1 || beyondNext(segs[i+1].lsn, p.SnapshotLSN) {
			start = i
			break
		}
	}
	p.Segments = namesOf(segs[start:])
	if start < len(segs) && beyondNext(segs[start].lsn, p.SnapshotLSN) {
		what := "no snapshot"
		if p.Snapshot != "" {
			what = "snapshot " + p.Snapshot
		}
		return p, fmt.Errorf("%w: %s needs LSN %d next, but the first segment after it, %s, starts at %d",
			ErrGap, what, p.FirstLSN, segs[start].name, segs[start].lsn)
	}
	return p, nil
}

// beyondNext reports lsn > s+1 without overflow.
func beyondNext(lsn, s uint64) bool { return lsn > s && lsn-s > 1 }

// Obsolete returns the segments (by first LSN ascending) whose records all
// have LSN <= snapshotLSN: every segment i but the last with f_{i+1} <=
// snapshotLSN+1. The last segment is never obsolete (it is the one being
// appended to). The node removes these only after the snapshot at
// snapshotLSN is durable (file fsync'd, renamed, directory fsync'd);
// before that, recovery may still need them.
func Obsolete(segments []string, snapshotLSN uint64) []string {
	segs := parseAll(segments, ParseSegmentName)
	var out []string
	for i := 0; i+1 < len(segs) && !beyondNext(segs[i+1].lsn, snapshotLSN); i++ {
		out = append(out, segs[i].name)
	}
	return out
}

// ObsoleteSnapshots returns the snapshots to remove so that the newest
// keep remain (keep < 1 counts as 1: the newest is never obsolete), oldest
// first.
func ObsoleteSnapshots(snapshots []string, keep int) []string {
	keep = max(keep, 1)
	snaps := parseAll(snapshots, ParseSnapshotName)
	if len(snaps) <= keep {
		return nil
	}
	return namesOf(snaps[:len(snaps)-keep])
}
