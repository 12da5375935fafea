package sm

// StandbyStatus is a primary's view of one peer's copy of the job log.
type StandbyStatus struct {
	Peer   int
	State  string // not joined, syncing, failing: why, in sync, lagging, silent
	Acked  uint64 // its acknowledged durable LSN
	Behind uint64 // records of the primary's durable log it lacks
}

// ReplicationStatus describes every other peer's replication (primary
// only; nil otherwise), by peer index.
func (n *Node) ReplicationStatus() []StandbyStatus {
	j := n.journal.jobs
	if n.role != RolePrimary || j == nil || !j.recovered {
		return nil
	}
	var out []StandbyStatus
	for p := range n.opt.Peers {
		if p == n.opt.Self {
			continue
		}
		st := StandbyStatus{Peer: p, State: "not joined"}
		if pr := j.prog[p]; pr != nil {
			st.Acked = pr.Acked
			st.State, st.Behind = pr.State(int64(n.now.Mono), int64(n.opt.FailureTimeout), j.durableLSN)
		}
		out = append(out, st)
	}
	return out
}

// SnapshotSyncing reports whether this primary is syncing some standby
// by snapshot (encoding it, or sending its chunks): it holds the whole
// state's encoding meanwhile (300 MB at 1M jobs), and the daemon gives
// the collector room for that while it lasts.
func (n *Node) SnapshotSyncing() bool {
	j := n.journal.jobs
	if n.role != RolePrimary || j == nil {
		return false
	}
	for _, rp := range j.repl { // unordered: whether any standby syncs by snapshot
		if rp.snap != nil {
			return true
		}
	}
	return false
}

// DurableLSN and CommitLSN are the primary's own durable LSN and, in
// quorum mode, the LSN durable on a majority (0 when not a recovered
// primary).
func (n *Node) DurableLSN() uint64 {
	if n.role != RolePrimary || n.journal.jobs == nil || !n.journal.jobs.recovered {
		return 0
	}
	return n.journal.jobs.durableLSN
}

// CommitLSN: see DurableLSN.
func (n *Node) CommitLSN() uint64 {
	if n.role != RolePrimary || n.journal.jobs == nil || !n.journal.jobs.recovered || !n.quorumMode() {
		return 0
	}
	return n.journal.commitLSN()
}

// AckedWithoutStandby counts the writes this process acknowledged in seed
// mode while no standby held them: each can be lost by a failover. The
// node is degraded once it is non-zero.
func (n *Node) AckedWithoutStandby() uint64 { return n.joined.ackedAlone }

// emitReply sends a reply whose records up to lsn are as durable as the
// mode requires; in seed mode it counts a write no standby holds.
func (jl *journal) emitReply(lsn uint64, rep Reply) {
	if !jl.quorumMode() && len(jl.opt.Peers) > 1 && rep.LSN > 0 && !jl.heldByStandby(lsn) {
		jl.joined.ackedAlone++ // on our disk only: a failover can lose it
	}
	jl.emit(rep)
}

// heldByStandby reports whether some synced standby acknowledged lsn.
func (jl *journal) heldByStandby(lsn uint64) bool { return jl.jobs.prog.HeldByAny(lsn) }
