package sm

import (
	"fmt"

	"github.com/xce-hpc/xce/sm/wal"
)

// journalStep is what resumes when a write of the primary's job log
// completes: a group commit's append and fsync (jobs.go), or a step of a
// checkpoint (jobsnap.go): its snapshot written, then the obsolete
// segments and snapshots listed and removed.
type journalStep struct {
	kind journalKind
	j    *jobState
	seg  string // journalBatchWritten: the segment appended to
	// first..last: journalBatchWritten: the batch's LSNs; the checkpoint's
	// steps: last is the snapshot's LSN (journalSegmentsListed: the
	// removal point, retainedFrom's).
	first, last uint64
}

type journalKind uint8

const (
	journalBatchWritten     journalKind = iota // append → fsync → [fsync dir] of the oldest batch
	journalSnapshotWritten                     // the checkpoint's snapshot replaced durably
	journalSegmentsListed                      // data/wal listed: remove the obsolete segments
	journalSegmentsRemoved                     // they are gone: list data/snap
	journalSnapshotsListed                     // data/snap listed: remove all but the newest two
	journalSnapshotsRemoved                    // the checkpoint is done
)

var journalKindNames = [...]string{
	journalBatchWritten:     "batch written",
	journalSnapshotWritten:  "checkpoint snapshot written",
	journalSegmentsListed:   "checkpoint segments listed",
	journalSegmentsRemoved:  "checkpoint segments removed",
	journalSnapshotsListed:  "checkpoint snapshots listed",
	journalSnapshotsRemoved: "checkpoint snapshots removed",
}

func (k journalKind) String() string { return journalKindNames[k] }

func (s journalStep) resume(n *Node, r result) {
	switch s.kind {
	case journalBatchWritten:
		n.journal.batchWritten(s, r)
	case journalSnapshotWritten:
		n.journal.snapshotWritten(s, r)
	case journalSegmentsListed:
		n.journal.removeSegments(s.j, r.names(), s.last)
	case journalSegmentsRemoved:
		n.run(listOps(wal.SnapDir, "fatal.recovery"), journalStep{kind: journalSnapshotsListed, j: s.j})
	case journalSnapshotsListed:
		n.run(removeOps(prefixAll(wal.SnapDir, wal.ObsoleteSnapshots(r.names(), 2)), wal.SnapDir, "wal.remove-failed", ""), journalStep{kind: journalSnapshotsRemoved, j: s.j})
	case journalSnapshotsRemoved:
		n.journal.checkpointDone(s.j)
	}
}

func (s journalStep) String() string {
	switch s.kind {
	case journalBatchWritten:
		return fmt.Sprintf("journal: %s (lsn %d..%d to %s): release its replies, write the next", s.kind, s.first, s.last, s.seg)
	case journalSnapshotWritten:
		return fmt.Sprintf("journal: %s (lsn %d): remove what it covers", s.kind, s.last)
	case journalSegmentsListed:
		return fmt.Sprintf("journal: %s: remove those wholly at or below lsn %d", s.kind, s.last)
	}
	return "journal: " + s.kind.String()
}

// batchWritten: the oldest batch is appended and fsync'd (a failed append
// is fatal: the log's tail is unknown; a failed fsync already was).
func (jl *journal) batchWritten(s journalStep, r result) {
	if r.failed != "" {
		jl.node.die("fatal.wal-append", fmt.Sprintf("WAL append to %s failed: %s %s", s.seg, r.Err, r.Detail))
		return
	}
	j := s.j
	j.liveSegs[s.seg] = true
	j.batches = j.batches[1:]
	j.writing = false
	jl.walDurable(s.last)
}

// walDurable: records up to lsn are on disk.
func (jl *journal) walDurable(lsn uint64) {
	j := jl.jobs
	j.durableLSN = max(j.durableLSN, lsn)
	jl.disk.logPos = logPos{term: jl.el.ha.term, lsn: j.durableLSN}
	jl.releaseWaiting()
	jl.maybeCheckpoint()
	jl.flushWAL()
}
