package sim

import "github.com/xce-hpc/xce/sm"

// The round-echo checker (S9): in quorum mode a primary confirms its read
// index and its quorum by the heartbeat rounds its standbys echo back. An
// echo is genuine only if the primary it goes to sent that standby that
// round in that term: a standby that takes rounds from another peer (a
// deposed primary, whose round counter is its own) would confirm reads
// nobody confirmed. Judged on the messages as they are sent, before the
// network touches them, against the rounds each primary's heartbeats
// carried; its own record, not the nodes' state.

type roundCheck struct {
	sent map[roundKey]uint64 // the newest round a primary's heartbeats carried to one peer in one term
}

type roundKey struct {
	primary, standby int
	term             uint64
}

// noteRound judges (or, for a primary's heartbeat, records) message m
// from node from to node to.
func (w *World) noteRound(from, to int, m sm.Msg) {
	if w.sc.SeedMode || m.Round == 0 {
		return // seed mode counts no echoes
	}
	rc := &w.rc
	if rc.sent == nil {
		rc.sent = map[roundKey]uint64{}
	}
	switch m.Role {
	case sm.RolePrimary:
		if m.Type == sm.MsgHeartbeat {
			k := roundKey{primary: from, standby: to, term: m.Term}
			rc.sent[k] = max(rc.sent[k], m.Round)
		}
	case sm.RoleStandby:
		if !w.wasPrimary(to, m.Term) {
			return // the echo counts nowhere: its addressee leads no such term
		}
		if got := rc.sent[roundKey{primary: to, standby: from, term: m.Term}]; m.Round > got {
			w.violate("S9", "n%d echoed heartbeat round %d of term %d to its primary n%d, which sent it rounds up to %d in that term", from, m.Round, m.Term, to, got)
		}
	}
}

// wasPrimary reports whether node i was seen primary of term t.
func (w *World) wasPrimary(i int, t uint64) bool {
	for _, x := range w.hc.primOf[t] {
		if x.node == i {
			return true
		}
	}
	return false
}
