package sim

import (
	"github.com/xce-hpc/xce/sm"
)

// Every log position a node claims to others — in a standby's ack (which
// counts toward commit) and in a candidate's (pre-)vote request (which
// wins votes) — must be durable on its disk: what a power cut now would
// leave is read back here, independently of the node's own bookkeeping.

// snapPos is a snapshot file's position, decoded once per contents.
type snapPos struct {
	data      []byte // the bytes decoded (a name is reused across histories)
	term, lsn uint64
	bad       bool
}

func removeName(names []string, name string) []string {
	out := names[:0:0]
	for _, n := range names {
		if n != name {
			out = append(out, n)
		}
	}
	return out
}

// checkDurableClaim: S5 — a node never claims a log position its disk
// does not durably hold.
func (w *World) checkDurableClaim(nd *simNode, s sm.Send) {
	switch s.Msg.Type {
	case sm.MsgReplAck, sm.MsgVote, sm.MsgPreVote:
	default:
		return
	}
	m := s.Msg
	if m.WALPos == 0 {
		return
	}
	// The durable view only shrinks at a crash (a new incarnation) or when
	// the node removes files, which it does only after its position moved:
	// a claim already checked in this incarnation need not be read again.
	c := claimSeen{inc: nd.inc, term: m.LogTerm, lsn: m.WALPos}
	if nd.lastClaim == c {
		return
	}
	// The durable view, mirrored per fsync (chain.go's durMirror, read
	// the way recovery reads it).
	t, l := w.durablePos(nd)
	nd.lastClaim = c
	if m.LogTerm > t || m.LogTerm == t && m.WALPos > l {
		w.violate("S5", "n%d sent %s claiming log (term %d, lsn %d) but its disk durably holds only (term %d, lsn %d)", nd.id, m.Type, m.LogTerm, m.WALPos, t, l)
	}
}

// claimSeen is the last log position a node claimed, by incarnation.
type claimSeen struct {
	inc       int
	term, lsn uint64
}
