package sim

import (
	"github.com/xce-hpc/xce/sm"
)

// L4 over the whole fault-free phase (issue 21 item 7c). L4 proper judges
// the syncs begun after the liveness phase's failover; a sync that began
// earlier in the liveness phase, with every fault already off, is as
// clean: no message of it can be lost, duplicated or reordered (a healed
// link delivers in order, and no process of it is killed, paused or
// reset), so its standby may never see a gap or an unusable batch. Before
// this, a bug that broke only such syncs (the standbys rejoining at the
// liveness phase's start, a catch-up of several rounds) went unnoticed:
// the standby resynced and healed, and the churn looked like the faults'.
//
// A sync is judged clean when its primary sent its first message (the
// first snapshot chunk, or the catch-up's first records) in the liveness
// phase, its link to the standby has dropped no message since (the send
// queue's drop-oldest, which the transport does at any time), and its
// snapshot's held records did not overflow (repl.sync-buffer-full: the
// gap after the install is then on purpose, and the records come from the
// log).

// syncStart is a clean sync's first message.
type syncStart struct {
	dropped    int  // the link's dropped messages when it began
	bufferFull bool // the records written during its snapshot's encode overflowed
}

// lastSync is the sync a standby was in.
type lastSync struct {
	primary, primaryInc int
	epoch               uint64
	ok                  bool
}

// checkCleanSync runs in the liveness phase after every step of a node.
func (w *World) checkCleanSync(nd *simNode, s *syncNode, effs []sm.Effect) {
	n := nd.node
	if n.Role() == sm.RolePrimary {
		var first []int // standbys whose sync sent its first message in this step
		full := false
		for _, e := range effs {
			switch x := e.(type) {
			case sm.Send:
				m := x.Msg
				if m.Type == sm.MsgReplSnapshot && m.Offset == 0 || m.Type == sm.MsgReplRecords && m.CatchUp && !m.Diverged {
					per := s.started[x.To]
					if per == nil {
						per = map[uint64]syncStart{}
						s.started[x.To] = per
					}
					if _, seen := per[m.ReqID]; !seen {
						per[m.ReqID] = syncStart{dropped: w.net.l(nd.id, x.To).tx.dropped}
						first = append(first, x.To)
					}
				}
			case sm.Log:
				full = full || x.Key == "repl.sync-buffer-full"
			}
		}
		if full {
			for _, to := range first {
				for ep, st := range s.started[to] {
					st.bufferFull = true
					s.started[to][ep] = st
				}
			}
		}
		s.last = lastSync{}
		return
	}
	before := s.last
	if p, ep, ok := n.StandbySync(); ok {
		s.last = lastSync{primary: p, primaryInc: w.nodes[p].inc, epoch: ep, ok: true}
	} else {
		s.last = lastSync{}
	}
	if !before.ok {
		return
	}
	for _, e := range effs {
		l, ok := e.(sm.Log)
		if !ok || l.Key != "repl.gap" && l.Key != "repl.bad-records" {
			continue
		}
		ps := &w.sx.nodes[before.primary]
		if ps.inc != before.primaryInc || w.nodes[before.primary].inc != before.primaryInc || ps.started == nil {
			return // that primary has restarted since: its sync's messages may be lost
		}
		st, clean := ps.started[nd.id][before.epoch]
		if !clean || st.bufferFull || w.net.l(before.primary, nd.id).tx.dropped != st.dropped {
			return
		}
		w.violate("L4", "n%d: %s in sync %s of n%d, which began in the liveness phase with every fault off: %s", nd.id, l.Key, sm.SyncName(before.epoch), before.primary, l.Text)
		return
	}
}
