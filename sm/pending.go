package sm

import (
	"fmt"
	"slices"
)

// In-flight file operations belong to the role that started them
// (issue 7 A9). Each pending operation records its owner, a concern in
// one of its generations:
//   - node: the process itself (boot, config, data/term); never ends;
//   - log: a standby's job log files (replicated appends, snapshot
//     installs, truncations, its own checkpoints, rescans); a promotion
//     ends it, for the log's files are recovery's from then on;
//   - sync: one sync with one primary (a snapshot transfer, a catch-up's
//     start, a truncation); a newer sync, or leaving the standby role,
//     ends it;
//   - jobs: the primary's job state of one promotion (recovery, WAL
//     appends, checkpoints, catch-up reads); a step-down ends it.
//
// Ending a generation makes Step drop the completions of every operation
// it had in flight, in one place (complete) — as if the process had
// crashed at that point of the sequence, which every durable sequence is
// built to survive. File operations already issued run before any issued
// later (the I/O lane is serial, host/loop), so an ended owner's file
// operations never touch its files once the next owner starts; a bulk
// read, which runs on a lane of its own, holds back any change of its
// file until it completes (bulkfence.go); only a
// Compute still running on its own lane may (a checkpoint's
// ComputeEncodeTo writing its temporary file, never renamed once its owner
// is gone). A dropped completion's error is still logged, and a failed
// fsync is still fatal.

// concern is what a pending operation belongs to.
type concern uint8

const (
	concernNode concern = iota // the process: boot, config, term
	concernLog                 // a standby's job log files
	concernSync                // one sync with one primary
	concernJobs                // the primary's job state of one promotion
	concerns
)

var concernNames = [concerns]string{"node", "log", "sync", "jobs"}

func (c concern) String() string { return concernNames[c] }

// owner is a concern in one of its generations.
type owner struct {
	concern concern
	gen     uint64
}

// pendingOp is one file operation, or one Compute, in flight.
type pendingOp struct {
	op      FileOp      // a Compute's: its ID and Path
	compute ComputeKind // a Compute's kind; 0 for a file operation
	owner   owner
	next    cont // what resumes when it completes
}

// what names the operation: a file operation's kind, a Compute's.
func (p pendingOp) what() string {
	if p.compute != 0 {
		return p.compute.String()
	}
	return p.op.Op.String()
}

// tag is how traces name the operation: io#ID, compute#ID.
func (p pendingOp) tag() string {
	if p.compute != 0 {
		return fmt.Sprintf("compute#%d", p.op.ID)
	}
	return fmt.Sprintf("io#%d", p.op.ID)
}

// jobsOwner is the current promotion's job state.
func (ot *ioTable) jobsOwner() owner { return owner{concernJobs, ot.gens[concernJobs]} }

// endJobs ends the current job state's generation: its pending
// operations complete into nothing.
func (ot *ioTable) endJobs() { ot.gens[concernJobs]++ }

// logOwner is the standby's log files in their current generation.
func (ot *ioTable) logOwner() owner { return owner{concernLog, ot.gens[concernLog]} }

// endLog ends the log's generation at a promotion: no install,
// truncation, checkpoint, append or rescan of a standby goes on once
// recovery owns the files (their state is a crash's, which recovery
// reads), and the standby's bookkeeping of them goes with it.
func (sl *standbyLog) endLog() {
	sl.ops.gens[concernLog]++
	sl.setSync(nil)
	sl.installBusy, sl.compact, sl.replWriting, sl.ckptBase, sl.sinceCkpt = false, nil, 0, nil, appendedSince{}
}

// setSync makes sr (nil: none) the standby's sync, ending the previous
// sync's generation; sr's operations are owned by the new one.
func (sl *standbyLog) setSync(sr *standbyRepl) {
	sl.ops.gens[concernSync]++
	sl.srepl = sr
	if sr != nil {
		sr.owner = owner{concernSync, sl.ops.gens[concernSync]}
	}
}

// syncLive reports whether sr is still the standby's sync: a log
// operation that serves a sync (an append, an install) goes on with that
// sync's part only then.
func (ot *ioTable) syncLive(sr *standbyRepl) bool { return sr != nil && !ot.abandoned(sr.owner) }

// own makes o the owner of the operations started from now on and returns
// the owner before it, which the caller restores (n.cur = prev) when the
// work it starts for o is issued.
func (ot *ioTable) own(o owner) (prev owner) {
	prev = ot.cur
	ot.cur = o
	return prev
}

func (ot *ioTable) abandoned(o owner) bool { return o.gen != ot.gens[o.concern] }

// complete runs the continuation of a finished operation, or drops it if
// its owner is gone.
func (n *Node) complete(p pendingOp, r result) {
	d := r.IODone
	failedSync := d.Err != IOOK && (p.op.Op == OpFsync || p.op.Op == OpFsyncDir)
	if failedSync {
		n.die("fatal.fsync", fmt.Sprintf("fsync(%s) failed: %s %s — durability cannot be trusted", p.op.Path, d.Err, d.Detail))
		return
	}
	if n.ops.abandoned(p.owner) {
		if d.Err != IOOK && d.Err != IONotExist {
			n.log(Warn, "io.abandoned-failed", fmt.Sprintf("%s %s of an abandoned %s operation failed: %s %s", p.what(), p.op.Path, p.owner.concern, d.Err, d.Detail))
		}
		return
	}
	prev := n.ops.own(p.owner)
	p.next.resume(n, r)
	n.ops.cur = prev
}

// PendingOps describes the file operations and Computes in flight, oldest
// first (for traces and tests): "id op path (owner/generation) →
// continuation".
func (n *Node) PendingOps() []string {
	ids := make([]uint64, 0, len(n.ops.pending))
	for id := range n.ops.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]string, len(ids))
	for i, id := range ids {
		p := n.ops.pending[id]
		state := ""
		if n.ops.abandoned(p.owner) {
			state = ", abandoned"
		}
		if n.ops.isHeld(id) {
			state += ", held for a bulk read"
		}
		out[i] = fmt.Sprintf("%s %s %s (%s/%d%s) → %s", p.tag(), p.what(), p.op.Path, p.owner.concern, p.owner.gen, state, p.next)
	}
	return out
}
