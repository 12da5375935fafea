package sim

import (
	"strconv"
	"strings"

	"github.com/xce-hpc/xce/sm"
)

// The provenance checker (S10): a standby writes to its job log only
// records its own primary sent it. Each batch of records a node receives
// (live or catch-up) is remembered by its bytes (equal bytes, not equal
// hashes of them) with the peers that sent it; each append a standby
// issues to data/wal whose bytes are such a batch must have come from the
// primary the standby follows as it issues the append. A standby taking a batch from another peer (seed mode's
// second primary of a term, which numbers its syncs as its primary
// does) would write two histories into one log. Judged from the
// messages delivered and the effects issued; the node's own state gives
// only its role and the primary it follows.

type provenanceCheck struct {
	sent []map[string]uint64 // per node: a received batch's bytes -> bitmask of the peers that sent it
}

// checkProvenance runs after every step of nd.
func (w *World) checkProvenance(nd *simNode, in sm.Input, effs []sm.Effect) {
	pc := &w.pc
	if pc.sent == nil {
		pc.sent = make([]map[string]uint64, len(w.nodes))
	}
	if r, ok := in.(sm.Recv); ok && r.Msg.Type == sm.MsgReplRecords && len(r.Msg.Bytes) > 0 && r.From < 64 {
		if pc.sent[nd.id] == nil {
			pc.sent[nd.id] = map[string]uint64{}
		}
		pc.sent[nd.id][string(r.Msg.Bytes)] |= 1 << r.From
	}
	if nd.node.Role() != sm.RoleStandby || pc.sent[nd.id] == nil {
		return
	}
	p := nd.node.Primary()
	for _, e := range effs {
		op, ok := e.(sm.FileOp)
		if !ok || op.Op != sm.OpAppend || !strings.HasPrefix(op.Path, "data/wal/") {
			continue
		}
		from, known := pc.sent[nd.id][string(op.Data)]
		if known && (p < 0 || p >= 64 || from&(1<<p) == 0) {
			w.violate("S10", "standby n%d appends to %s a batch of records that n%d did not send it (it follows n%d; senders %s)", nd.id, op.Path, p, p, senders(from))
			return
		}
	}
}

// senders names the peers of bitmask m.
func senders(m uint64) string {
	var b strings.Builder
	for i := 0; i < 64; i++ {
		if m&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString("n" + strconv.Itoa(i))
		}
	}
	return b.String()
}
