package sm

import (
	"fmt"
	"maps"

	"xce/schema"
	"xce/sm/queue"
	"xce/sm/wal"
)

// Loading a snapshot at recovery off the node's Step (issue 9): the node
// reads the file (or takes the boot scan's copy), then hands its bytes to
// the executor in an OpImport with a SnapshotLoad; the executor decodes
// and builds the job state with importSnapshot and returns it in the
// completion (IODone.Loaded), which the node takes over. Meanwhile the
// node is primary and answers as one: its timers fire, heartbeats go
// out, and client operations are told it is recovering.

// SnapshotLoad is what the executor needs to import a snapshot: a router
// of its own, a copy of the promotion's. No part of it is shared with the
// node while the executor runs.
type SnapshotLoad struct{ r *router }

// newSnapshotLoad copies r, the router of this promotion's recovery, for
// an import (its names only: the counter and warnings are the import's).
func newSnapshotLoad(r *router) *SnapshotLoad {
	return &SnapshotLoad{r: &router{queues: maps.Clone(r.queues), hosts: maps.Clone(r.hosts), resources: maps.Clone(r.resources)}}
}

// routeWarning is one §6.5 WARN line a load's router raised (the node logs
// them when it takes the state over).
type routeWarning struct{ what, id string }

// LoadedSnapshot is an OpImport's result, opaque outside sm: the state
// built, its position, or why the bytes are not a usable snapshot; and
// what the routing did (also for a snapshot refused part way: the node
// counts and logs that as recovery always has).
type LoadedSnapshot struct {
	q         *queue.Queues
	lsn, term uint64
	err       error
	routed    int
	warnings  []routeWarning
}

// Import builds the job state from data, a snapshot file's bytes (the
// executor runs it, on its own goroutine: it is pure and touches only
// its own router copy).
func (l *SnapshotLoad) Import(data []byte) *LoadedSnapshot {
	out := &LoadedSnapshot{}
	r := *l.r // the maps are only read: the counter and warnings are this call's
	r.warn = func(what, id string) { out.warnings = append(out.warnings, routeWarning{what, id}) }
	out.q, out.lsn, out.term, out.err = importSnapshot(data, &r)
	out.routed = r.routed
	return out
}

// importSnapshot decodes and rebuilds the queue state of a snapshot file,
// routing names the running config no longer has exactly as replay does
// (seed 002 §6.5). The file is decoded as a stream (wal.ReadSnapshot) into
// the state (queue.Importer): one job message at a time, never the whole
// snapshot, as one message or as a list of jobs, beside the state built
// from it; each job's payload, decoded into a buffer of its own, is the
// one the state keeps.
func importSnapshot(data []byte, r *router) (*queue.Queues, uint64, uint64, error) {
	var (
		head wal.SnapshotHead
		im   *queue.Importer
	)
	err := wal.ReadSnapshot(data, wal.SnapshotVisitor{
		Head: func(h wal.SnapshotHead) error {
			head = h
			var err error
			im, err = queue.NewImporter(h.NextID, h.NextSeq, min(h.Jobs, maxImportHint))
			return err
		},
		Job: func(jb *schema.SnapshotJob) error {
			// A claim was made by a record the snapshot covers.
			if jb.GetClaimLsn() > head.LSN || jb.GetClaimTerm() > head.Term {
				return fmt.Errorf("%w: job %d: claim stamp (term %d, lsn %d) is beyond the snapshot (term %d, lsn %d)",
					queue.ErrBadSnapshot, jb.GetId(), jb.GetClaimTerm(), jb.GetClaimLsn(), head.Term, head.LSN)
			}
			return im.Job(importJob(jb, r))
		},
		Schedule: func(sc *schema.SnapshotSchedule) error {
			return im.Schedule(importSchedule(sc, r))
		},
	})
	if err != nil {
		return nil, 0, 0, err
	}
	return im.Done(), head.LSN, head.Term, nil
}

// maxImportHint bounds the size an import reserves from a snapshot's
// count of job fields before any is checked (a corrupt file's count
// allocates no more than this; a larger valid one grows past it).
const maxImportHint = 1 << 22

// importJob is one snapshot job as the queue holds it, its names routed.
func importJob(jb *schema.SnapshotJob, r *router) queue.Job {
	return queue.Job{ID: jb.GetId(), Queue: r.queue(jb.GetQueue(), true), Payload: jb.GetPayload(), Priority: jb.GetPriority(),
		State: queueState(jb.GetState()), RunAt: jb.GetRunAt(), Seq: jb.GetSeq(), EnqueuedAt: jb.GetEnqueuedAt(), ExpiresAt: jb.GetExpiresAt(),
		Attempts: jb.GetAttempts(), Stamps: stampsOf(jb.GetStamps()), Host: jb.GetHost(), Resource: r.resource(jb.GetResource()), ClaimedAt: jb.GetClaimedAt(),
		ClaimExpiresAt: jb.GetClaimExpiresAt(), LastError: jb.GetLastError(), DiedAt: jb.GetDiedAt(), Claims: jb.GetClaims(), Pin: r.host(jb.GetPin()),
		Claim: queue.ClaimStamp{Term: jb.GetClaimTerm(), LSN: jb.GetClaimLsn()}}
}

// importSchedule is one snapshot schedule as the queue holds it; one of a
// removed queue fires into lost_and_found with its stamps.
func importSchedule(sc *schema.SnapshotSchedule, r *router) queue.Schedule {
	st := stampsOf(sc.GetStamps())
	name := r.queue(sc.GetQueue(), false)
	if name == LostAndFound && sc.GetQueue() != LostAndFound {
		st = lostAndFoundStamps
	}
	return queue.Schedule{Name: sc.GetName(), Spec: sc.GetSpec(), Queue: name, Payload: sc.GetPayload(),
		Stamps: st, Fire: queue.FireOpts{Priority: sc.GetFire().GetPriority(), ExpiresS: sc.GetFire().GetExpiresS()}, Next: sc.GetNextFire()}
}
