package sim

import "github.com/xce-hpc/xce/sm"

// Election safety and leader completeness (Raft §5.2, §5.4), checked the
// moment a node becomes primary rather than when a loss surfaces later:
//   - at most one primary per term, in quorum mode (S4);
//   - in quorum mode the new primary of term T has a durable log at least
//     as fresh as the newest write acknowledged in a term before T (term of
//     its primary, LSN): a primary missing it would lose it (S5). Writes
//     of later terms do not count (Raft §5.4): a candidate of term T whose
//     vote replies arrive late may win T after T+1 committed writes, and
//     can commit nothing, since the majority that elected T+1 refuses T.

type electionCheck struct {
	termPrimary map[uint64]int    // quorum mode: the primary of each term
	acked       map[uint64]uint64 // term -> highest LSN acknowledged by its primary
	lastRole    []sm.Role
	lastTerm    []uint64
}

// noteAckedWrite records an acknowledged mutation from node nd.
func (w *World) noteAckedWrite(nd *simNode, r sm.Reply) {
	if r.Status != sm.StatusOK || r.LSN == 0 || nd.node.Role() != sm.RolePrimary {
		return
	}
	if w.ec.acked == nil {
		w.ec.acked = map[uint64]uint64{}
	}
	t := nd.node.Term()
	w.ec.acked[t] = max(w.ec.acked[t], r.LSN)
}

// checkPromotion runs after every step of nd, before its effects (and
// again after them: a second look finds nothing fresh).
func (w *World) checkPromotion(nd *simNode) {
	ec := &w.ec
	if ec.termPrimary == nil {
		ec.termPrimary = map[uint64]int{}
		ec.lastRole = make([]sm.Role, len(w.nodes))
		ec.lastTerm = make([]uint64, len(w.nodes))
	}
	n := nd.node
	role, term := n.Role(), n.Term()
	fresh := role == sm.RolePrimary && (ec.lastRole[nd.id] != sm.RolePrimary || ec.lastTerm[nd.id] != term)
	ec.lastRole[nd.id], ec.lastTerm[nd.id] = role, term
	if !fresh || !n.QuorumMode() || nd.opts.SeedLiteralP0 || !w.strict() {
		return // a wiped disk forgets its term and vote: amnesia is not checked
	}
	if p, ok := ec.termPrimary[term]; ok && p != nd.id {
		w.violate("S4", "n%d and n%d were both primary in term %d", p, nd.id, term)
		return
	}
	ec.termPrimary[term] = nd.id
	var at, al uint64 // the newest write acknowledged in a term before this one
	for tt, ll := range ec.acked {
		if tt < term && (tt > at || tt == at && ll > al) {
			at, al = tt, ll
		}
	}
	if at == 0 {
		return
	}
	t, l := w.durablePos(nd) // the durable view, as checkDurableClaim reads it
	if t < at || t == at && l < al {
		w.violate("S5", "n%d became primary of term %d with a durable log at (term %d, lsn %d), behind the acknowledged write (term %d, lsn %d)", nd.id, term, t, l, at, al)
	}
}
