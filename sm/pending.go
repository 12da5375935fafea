package sm

import (
	"fmt"
	"sort"
)

// In-flight file operations belong to the role that started them
// (issue 7 A9). Each pending operation records its owner: the node itself
// (boot, config, data/term, a standby's log) or the primary's job state of
// one promotion (recovery, WAL appends, checkpoints, catch-up reads).
// Leaving the role ends that owner's generation, and Step drops the
// completions of every operation it had in flight, in one place — as if
// the process had crashed at that point of the sequence, which every
// durable sequence is built to survive. A dropped completion's error is
// still logged, and a failed fsync is still fatal.

// concern is what a pending operation belongs to.
type concern uint8

const (
	concernNode concern = iota // the process: boot, config, term, standby log
	concernJobs                // the primary's job state of one promotion
	concerns
)

func (c concern) String() string {
	if c == concernJobs {
		return "jobs"
	}
	return "node"
}

// owner is a concern in one of its generations.
type owner struct {
	concern concern
	gen     uint64
}

// pendingOp is one file operation in flight.
type pendingOp struct {
	op    FileOp
	owner owner
	k     func(IODone)
}

// jobsOwner is the current promotion's job state.
func (n *Node) jobsOwner() owner { return owner{concernJobs, n.gens[concernJobs]} }

// endJobs ends the current job state's generation: its pending
// operations complete into nothing.
func (n *Node) endJobs() { n.gens[concernJobs]++ }

// as runs f with o as the owner of the operations it starts.
func (n *Node) as(o owner, f func()) {
	prev := n.cur
	n.cur = o
	f()
	n.cur = prev
}

func (n *Node) abandoned(o owner) bool { return o.gen != n.gens[o.concern] }

// complete runs the continuation of a finished operation, or drops it if
// its owner is gone.
func (n *Node) complete(p pendingOp, d IODone) {
	failedSync := d.Err != IOOK && (p.op.Op == OpFsync || p.op.Op == OpFsyncDir)
	if failedSync {
		n.die("fatal.fsync", fmt.Sprintf("fsync(%s) failed: %s %s — durability cannot be trusted", p.op.Path, d.Err, d.Detail))
		return
	}
	if n.abandoned(p.owner) {
		if d.Err != IOOK && d.Err != IONotExist {
			n.log(Warn, "io.abandoned-failed", fmt.Sprintf("%s %s of an abandoned %s operation failed: %s %s", p.op.Op, p.op.Path, p.owner.concern, d.Err, d.Detail))
		}
		return
	}
	n.as(p.owner, func() { p.k(d) })
}

// PendingOps describes the file operations in flight, oldest first (for
// traces): "id op path (owner/generation)".
func (n *Node) PendingOps() []string {
	ids := make([]uint64, 0, len(n.pending))
	for id := range n.pending {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	out := make([]string, len(ids))
	for i, id := range ids {
		p := n.pending[id]
		state := ""
		if n.abandoned(p.owner) {
			state = ", abandoned"
		}
		out[i] = fmt.Sprintf("io#%d %s %s (%s/%d%s)", id, p.op.Op, p.op.Path, p.owner.concern, p.owner.gen, state)
	}
	return out
}
