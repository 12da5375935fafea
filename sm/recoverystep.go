package sm

import (
	"fmt"

	"github.com/xce-hpc/xce/sm/wal"
)

// recoveryStep is what resumes when a file operation of a promotion's
// recovery completes (jobrecover.go): the log's directories made, listed,
// the newest snapshot read and imported, each segment read and replayed,
// a torn tail cut, a replaced log's segments removed.
type recoveryStep struct {
	kind recoveryKind
	j    *jobState
	// plan, snaps, segs: the snapshot's steps: the plan and the listings
	// it was made from (an invalid snapshot plans again without it).
	plan  wal.Plan
	snaps []string
	// segs: recoverySegmentsListed: none yet; recoverySegmentRead: the
	// segments left, the one read first; recoveryTailCut: those after it,
	// to remove.
	segs []string
	all  []string // recoverySegmentRead: the plan's segments
	// build: recoveryBuilt: the standby checkpoint's build waited for.
	build *compactInput
	snap  logPos // recoverySegmentRead: the snapshot's position
	// checked, frames: what the boot scan checked of the file handed on
	// (readRecovering): a snapshot's verified head, a segment's prefix
	// whose frames' checksums matched.
	checked *wal.SnapshotHead
	frames  int
}

type recoveryKind uint8

const (
	recoveryDirsMade         recoveryKind = iota // data/wal and data/snap exist: list data/snap
	recoverySnapshotsListed                      // list data/wal
	recoverySegmentsListed                       // plan the recovery
	recoverySnapshotRead                         // import the snapshot
	recoverySnapshotImported                     // replay the segments after it
	recoverySegmentRead                          // replay it, go on with the rest
	recoveryTailCut                              // a torn tail is cut: remove the segments after it
	recoveryRemoved                              // segments removed: finish recovery
	recoveryBuilt                                // a standby checkpoint's build waited for: make the directories
)

var recoveryKindNames = [...]string{
	recoveryDirsMade:         "directories made",
	recoverySnapshotsListed:  "snapshots listed",
	recoverySegmentsListed:   "segments listed",
	recoverySnapshotRead:     "snapshot read",
	recoverySnapshotImported: "snapshot imported",
	recoverySegmentRead:      "segment read",
	recoveryTailCut:          "torn tail cut",
	recoveryRemoved:          "segments removed",
	recoveryBuilt:            "standby checkpoint's state built",
}

func (k recoveryKind) String() string { return recoveryKindNames[k] }

func (s recoveryStep) resume(n *Node, r result) {
	switch s.kind {
	case recoveryDirsMade:
		n.run(listOps(wal.SnapDir, "fatal.recovery"), recoveryStep{kind: recoverySnapshotsListed, j: s.j})
	case recoverySnapshotsListed:
		n.run(listOps(wal.WALDir, "fatal.recovery"), recoveryStep{kind: recoverySegmentsListed, j: s.j, snaps: r.names()})
	case recoverySegmentsListed:
		n.journal.recoverFrom(s.j, s.snaps, r.names())
	case recoverySnapshotRead:
		n.journal.snapshotRead(s, r.IODone)
	case recoverySnapshotImported:
		n.journal.snapshotImported(s, r)
	case recoverySegmentRead:
		n.journal.segmentRead(s, r.IODone)
	case recoveryTailCut:
		if r.failed != "" {
			n.die("fatal.recovery", fmt.Sprintf("%s failed: %s %s", r.failed, r.Err, r.Detail))
			return
		}
		n.journal.removeForRecovery(s.j, s.segs)
	case recoveryRemoved:
		n.journal.finishRecovery(s.j)
	case recoveryBuilt:
		n.journal.stateBuilt(s.j, s.build, r.IODone)
	}
}

func (s recoveryStep) String() string {
	switch s.kind {
	case recoverySnapshotRead, recoverySnapshotImported:
		return fmt.Sprintf("recovery: %s %s/%s (lsn %d), then %d segments", s.kind, wal.SnapDir, s.plan.Snapshot, s.plan.SnapshotLSN, len(s.plan.Segments))
	case recoverySegmentRead:
		return fmt.Sprintf("recovery: %s %s/%s (%d left), after the snapshot at lsn %d", s.kind, wal.WALDir, s.segs[0], len(s.segs)-1, s.snap.lsn)
	case recoveryTailCut:
		return fmt.Sprintf("recovery: %s, then remove %d segments after it", s.kind, len(s.segs))
	}
	return "recovery: " + s.kind.String()
}
