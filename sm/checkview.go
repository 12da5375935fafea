package sm

// Read-only views for the simulator's checkers (sim/synccheck.go): facts
// the node's other accessors do not expose, copied out so a checker can
// never change the node.

// SyncView is a primary's record of one standby's sync: the sync epoch
// its messages carry, and the durable LSN the primary counts for it
// toward the commit point (only once Synced).
type SyncView struct {
	Peer   int
	Epoch  uint64
	Acked  uint64
	Synced bool
}

// SyncViews lists the primary's syncs by peer index (nil unless primary
// with job state).
func (n *Node) SyncViews() []SyncView {
	j := n.journal.jobs
	if n.role != RolePrimary || j == nil {
		return nil
	}
	out := make([]SyncView, 0, len(j.prog))
	for _, p := range j.prog.Peers() {
		pr := j.prog[p]
		out = append(out, SyncView{Peer: p, Epoch: pr.Epoch, Acked: pr.Acked, Synced: pr.Synced})
	}
	return out
}

// StandbySync is the sync a standby is in: the primary it follows and
// that sync's epoch; ok is false when it is in none.
func (n *Node) StandbySync() (primary int, epoch uint64, ok bool) {
	if n.role != RoleStandby || n.sb.srepl == nil {
		return -1, 0, false
	}
	return n.el.primary, n.sb.srepl.epoch, true
}
