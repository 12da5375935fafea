package sm

import (
	"sort"

	"github.com/xce-hpc/xce/sm/queue"
)

// Read-only views for the daemon's metrics and health endpoints. Each is
// O(queues) at most (never a scan of the jobs) and is called from the goroutine that owns the node,
// between steps.

// QueueDepth is how many jobs one queue holds in each state, when its
// oldest pending job became claimable, and what this primary applied to
// it.
type QueueDepth struct {
	Queue                     string
	Pending, Processing, Dead int
	// OldestPendingAt is the earliest ready time (Unix seconds) of the
	// queue's pending jobs, meaningful when Pending > 0: once passed, when
	// the job that has waited longest to be claimed became claimable
	// (queue.Queues.OldestPending). The caller's clock turns it into an
	// age; sm reads none.
	OldestPendingAt int64
	// Throughput counts the operations this process applied to the queue
	// since it became primary (recovery's replay of the log is not
	// counted): each enqueued, claimed, acked, retried and dead-lettered
	// job.
	Throughput queue.Throughput
}

// QueueDepths lists every queue of the running config, any other queue
// holding jobs (lost_and_found), and any queue this primary counted an
// operation of, sorted by name; nil unless a recovered primary (a standby
// holds the log, not the queues).
func (n *Node) QueueDepths() []QueueDepth {
	j := n.journal.jobs
	if n.role != RolePrimary || j == nil || !j.recovered {
		return nil
	}
	names := j.q.QueueNames()
	held := make(map[string]bool, len(names))
	for _, name := range names {
		held[name] = true
	}
	for _, name := range j.q.ThroughputQueues() {
		if !held[name] {
			held[name] = true
			names = append(names, name)
		}
	}
	for name := range j.r.queues {
		if !held[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names) // map order must not reach the caller
	out := make([]QueueDepth, len(names))
	for i, name := range names {
		p, r, d := j.q.Counts(name)
		at, _ := j.q.OldestPending(name)
		out[i] = QueueDepth{Queue: name, Pending: p, Processing: r, Dead: d, OldestPendingAt: at, Throughput: j.q.Throughput(name)}
	}
	return out
}

// WALRecordsSinceCheckpoint counts toward the next compaction: on a
// primary the records of its active WAL segment (it checkpoints once they
// reach MaxWALRecords, seed 002 §13), on a standby the records appended
// since its last checkpoint began or its log was replaced, across syncs
// (at the same bound it checkpoints).
func (n *Node) WALRecordsSinceCheckpoint() int {
	switch {
	case n.role == RolePrimary && n.journal.jobs != nil && n.journal.jobs.recovered:
		return n.journal.jobs.segRecords
	case n.role == RoleStandby:
		return n.sb.sinceCkpt.records
	}
	return 0
}

// Readiness reports whether the node serves its role, and if not, why: a
// primary that has recovered its job state, or a standby that follows a
// live primary and holds a synced copy of its log (its snapshot installed,
// its last sync not failed).
func (n *Node) Readiness() (ready bool, why string) {
	switch {
	case n.role == RoleStopped:
		return false, "stopped: " + n.fatal
	case !n.conf.serving:
		return false, n.role.String() + ": no config loaded yet"
	case n.role == RolePrimary && (n.journal.jobs == nil || !n.journal.jobs.recovered):
		return false, "primary: recovering its job state"
	case n.role == RolePrimary:
		return true, "primary: serving"
	case n.role != RoleStandby:
		return false, n.role.String() + ": no primary elected"
	case !n.el.followsLivePrimary():
		return false, "standby: lost its primary " + n.peerName(n.el.primary) + " (silent, restarted or stepped down)"
	case n.sb.replFailure != "":
		return false, "standby: replication failing: " + n.sb.replFailure
	case n.sb.srepl == nil || n.sb.srepl.installing || n.sb.srepl.recv != nil:
		return false, "standby: syncing its log from " + n.peerName(n.el.primary)
	}
	return true, "standby: in sync with " + n.peerName(n.el.primary)
}
