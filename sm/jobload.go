package sm

import (
	"errors"
	"fmt"
	"maps"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// Loading a snapshot at recovery off the node's Step (issue 9): the node
// reads the file (or takes the boot scan's copy), then hands its bytes to
// the executor in a ComputeImport with a SnapshotLoad; the executor
// decodes and builds the job state (Decode, ImportBuild) and returns it in
// the completion (Computed.Loaded), which the node takes over. Meanwhile the
// node is primary and answers as one: its timers fire, heartbeats go
// out, and client operations are told it is recovering.

// SnapshotLoad is what the executor needs to import a snapshot: a router
// of its own, a copy of the promotion's, and, if the bytes are the boot
// scan's, whose checksum it verified, the head it found
// (wal.ReadCheckedSnapshot). No part of it is shared with the node while
// the executor runs.
type SnapshotLoad struct {
	r       *router
	checked *wal.SnapshotHead
}

// newSnapshotLoad copies r, the router of this promotion's recovery, for
// an import (its names only: the counter and warnings are the import's).
func newSnapshotLoad(r *router, checked *wal.SnapshotHead) *SnapshotLoad {
	return &SnapshotLoad{r: &router{queues: maps.Clone(r.queues), hosts: maps.Clone(r.hosts), resources: maps.Clone(r.resources)}, checked: checked}
}

// NewSnapshotLoad is a load routing names by cfg, as a recovery under
// that config does (for an executor's tests and benchmarks: the node
// builds its own from its promotion's router).
func NewSnapshotLoad(cfg *schema.ClusterConfig) *SnapshotLoad {
	return newSnapshotLoad(newRouter(cfg), nil)
}

// routeWarning is one §6.5 WARN line a load's router raised (the node logs
// them when it takes the state over).
type routeWarning struct{ what, id string }

// LoadedSnapshot is a ComputeImport's result, opaque outside sm: the state
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

// Err is why the bytes are not a usable snapshot (nil: the state built).
func (ld *LoadedSnapshot) Err() error { return ld.err }

// An import runs in two stages, so that an executor may run them at once
// on two goroutines (host/fileop does; decoding the file and building
// the state are each about half of a large import): Decode reads the file
// as a stream (wal.ReadSnapshot), checks and converts its jobs and hands
// them on in batches, in file order; an ImportBuild routes the names and
// builds the state (queue.Importer), batch by batch. Each stage is pure
// and touches only its own memory and the batch it holds; the result is
// the same however they interleave: Build stops at the first error in
// file order, whichever stage met it. Import runs them one after the
// other.

// ImportBatch is a run of a snapshot's jobs, and then at most one
// schedule, or a run of its idempotency keys, decoded and checked
// (opaque outside sm). Decode fills it;
// Build takes it over until Add returns, when it may be filled again.
type ImportBatch struct {
	head  *wal.SnapshotHead // the first batch only
	jobs  []queue.Job       // names not yet routed
	sched *schema.SnapshotSchedule
	keys  []queue.Key // names not yet routed
	err   error       // where Decode stopped: the rest of the file is not usable
}

// importBatchJobs is how many jobs a batch holds.
const importBatchJobs = 256

// NewImportBatch is an empty batch for Decode.
func NewImportBatch() *ImportBatch {
	return &ImportBatch{jobs: make([]queue.Job, 0, importBatchJobs)}
}

// errImportStopped: the build stopped taking batches (Decode's own).
var errImportStopped = errors.New("import stopped")

// Decode is an import's first stage. It fills b with the jobs of data,
// decoded, checked and converted; each full batch goes to send, which
// returns the batch to fill next (b again once the build took it, or
// another), or nil to stop (the build met an error: Decode returns nil).
// It returns the last batch, which ends with the first error Decode met
// (none: the snapshot's end), for the build to take.
func (l *SnapshotLoad) Decode(data []byte, b *ImportBatch, send func(*ImportBatch) *ImportBatch) *ImportBatch {
	var head wal.SnapshotHead
	flush := func() error {
		if b = send(b); b == nil {
			return errImportStopped
		}
		clear(b.jobs)
		clear(b.keys)
		b.head, b.jobs, b.sched, b.keys, b.err = nil, b.jobs[:0], nil, b.keys[:0], nil
		return nil
	}
	visit := wal.SnapshotVisitor{
		Head: func(h wal.SnapshotHead) error {
			head = h
			b.head = &head
			return nil
		},
		Job: func(jb *schema.SnapshotJob) error {
			// A claim was made by a record the snapshot covers.
			if jb.GetClaimLsn() > head.LSN || jb.GetClaimTerm() > head.Term {
				return fmt.Errorf("%w: job %d: claim stamp (term %d, lsn %d) is beyond the snapshot (term %d, lsn %d)",
					queue.ErrBadSnapshot, jb.GetId(), jb.GetClaimTerm(), jb.GetClaimLsn(), head.Term, head.LSN)
			}
			b.jobs = append(b.jobs, decodedJob(jb))
			if len(b.jobs) < importBatchJobs {
				return nil
			}
			return flush()
		},
		Schedule: func(sc *schema.SnapshotSchedule) error {
			if len(b.keys) > 0 { // a schedule after keys: the keys go first
				if err := flush(); err != nil {
					return err
				}
			}
			b.sched = proto.Clone(sc).(*schema.SnapshotSchedule)
			return flush()
		},
		Key: func(k *schema.SnapshotKey) error {
			if len(b.jobs) > 0 || b.sched != nil { // keys follow what came before
				if err := flush(); err != nil {
					return err
				}
			}
			b.keys = append(b.keys, decodedKey(k))
			if len(b.keys) < importBatchJobs {
				return nil
			}
			return flush()
		},
	}
	var err error
	if h := l.checked; h != nil {
		err = wal.ReadCheckedSnapshot(data, *h, visit)
	} else {
		err = wal.ReadSnapshot(data, visit)
	}
	if errors.Is(err, errImportStopped) {
		return nil
	}
	b.err = err
	return b
}

// ImportBuild is an import's second stage (opaque outside sm).
type ImportBuild struct {
	r    router
	im   *queue.Importer
	head wal.SnapshotHead
	out  *LoadedSnapshot
}

// NewBuild starts the second stage of an import of l.
func (l *SnapshotLoad) NewBuild() *ImportBuild {
	b := &ImportBuild{r: *l.r, out: &LoadedSnapshot{}} // the maps are only read: the counter and warnings are this build's
	b.r.warn = func(what, id string) { b.out.warnings = append(b.out.warnings, routeWarning{what, id}) }
	return b
}

// Add builds x's jobs and schedule into the state; false: the import has
// failed (Done says why), give it no more.
func (b *ImportBuild) Add(x *ImportBatch) bool {
	if b.out.err != nil {
		return false
	}
	b.out.err = b.add(x)
	return b.out.err == nil
}

// add is Add's work: the first error it meets fails the import.
func (b *ImportBuild) add(x *ImportBatch) error {
	if x.head != nil {
		b.head = *x.head
		im, err := queue.NewImporter(x.head.NextID, x.head.NextSeq, min(x.head.Jobs, maxImportHint))
		if err != nil {
			return err
		}
		b.im = im
	}
	if b.im == nil && (len(x.jobs) > 0 || x.sched != nil || len(x.keys) > 0) { // Decode hands on the head first
		return fmt.Errorf("%w: jobs before the snapshot's head", queue.ErrBadSnapshot)
	}
	for i := range x.jobs {
		if err := b.im.Job(b.route(x.jobs[i])); err != nil {
			return err
		}
	}
	if x.sched != nil {
		if err := b.im.Schedule(importSchedule(x.sched, &b.r)); err != nil {
			return err
		}
	}
	for _, k := range x.keys {
		// A key of a queue the config no longer has is held under
		// lost_and_found, where replay holds it (apply), unwarned and
		// uncounted: its job was routed and counted already.
		if !b.r.knownQueue(k.Queue) {
			k.Queue = LostAndFound
		}
		if err := b.im.Key(k); err != nil {
			return err
		}
	}
	return x.err
}

// Done is the import's result; the build must not be used after it.
func (b *ImportBuild) Done() *LoadedSnapshot {
	out := b.out
	out.routed = b.r.routed
	switch {
	case out.err != nil:
	case b.im == nil:
		out.err = fmt.Errorf("%w: no snapshot decoded", queue.ErrBadSnapshot)
	default:
		out.q, out.lsn, out.term = b.im.Done(), b.head.LSN, b.head.Term
	}
	b.im = nil
	return out
}

// Import builds the job state from data, a snapshot file's bytes, the two
// stages one after the other (an executor may run them at once: Decode).
// Routing names the running config no longer has is done exactly as
// replay does (seed 002 §6.5). The file is decoded as a stream, one job
// message at a time, never the whole snapshot beside the state built from
// it; each job's payload, decoded into a buffer of its own, is the one the
// state keeps.
func (l *SnapshotLoad) Import(data []byte) *LoadedSnapshot {
	b := l.NewBuild()
	last := l.Decode(data, NewImportBatch(), func(x *ImportBatch) *ImportBatch {
		if !b.Add(x) {
			return nil
		}
		return x
	})
	if last != nil {
		b.Add(last)
	}
	return b.Done()
}

// importSnapshot is Import with r itself (a standby's rebuild, tests):
// its counter counts the jobs routed, its warn hears their warnings.
func importSnapshot(data []byte, r *router) (*queue.Queues, uint64, uint64, error) {
	ld := (&SnapshotLoad{r: r}).Import(data)
	r.routed += ld.routed
	if r.warn != nil {
		for _, w := range ld.warnings {
			r.warn(w.what, w.id)
		}
	}
	return ld.q, ld.lsn, ld.term, ld.err
}

// maxImportHint bounds the size an import reserves from a snapshot's
// count of job fields before any is checked (a corrupt file's count
// allocates no more than this; a larger valid one grows past it).
const maxImportHint = 1 << 22

// decodedJob is one snapshot job as the queue holds it, its names not yet
// routed (route).
func decodedJob(jb *schema.SnapshotJob) queue.Job {
	return queue.Job{ID: jb.GetId(), Queue: jb.GetQueue(), Payload: jb.GetPayload(), Priority: jb.GetPriority(),
		State: queueState(jb.GetState()), RunAt: jb.GetRunAt(), Seq: jb.GetSeq(), EnqueuedAt: jb.GetEnqueuedAt(), ExpiresAt: jb.GetExpiresAt(),
		Attempts: jb.GetAttempts(), Stamps: stampsOf(jb.GetStamps()), Host: jb.GetHost(), Resource: jb.GetResource(), ClaimedAt: jb.GetClaimedAt(),
		ClaimExpiresAt: jb.GetClaimExpiresAt(), LastError: jb.GetLastError(), DiedAt: jb.GetDiedAt(), Claims: jb.GetClaims(), Pin: jb.GetPin(),
		Claim: queue.ClaimStamp{Term: jb.GetClaimTerm(), LSN: jb.GetClaimLsn()}}
}

// decodedKey is one snapshot idempotency key as the queue holds it (its
// queue not yet routed); wal checked its digest's length.
func decodedKey(k *schema.SnapshotKey) queue.Key {
	out := queue.Key{Queue: k.GetQueue(), Key: k.GetKey(), ID: k.GetId(), ExpiresAt: k.GetExpiresAt()}
	copy(out.Sum[:], k.GetSum())
	return out
}

// route routes j's names as replay does (the warnings in the order of the
// fields: queue, resource, pin).
func (b *ImportBuild) route(j queue.Job) queue.Job {
	j.Queue = b.r.queue(j.Queue, true)
	j.Resource = b.r.resource(j.Resource)
	j.Pin = b.r.host(j.Pin)
	return j
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
		Stamps: st, Fire: queue.FireOpts{Priority: sc.GetFire().GetPriority(), ExpiresS: sc.GetFire().GetExpiresS()}, Next: sc.GetNextFire(), Zone: sc.GetZone()}
}
