package sim

import (
	"strings"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// Every acknowledgement is judged against the sync it belongs to (issue
// 21 item 7b). A standby's sync is one epoch of one primary; its acks
// carry that epoch, and the records of that sync come from that primary.
// The chain's majority count (chain.go) sees an ack counted in the wrong
// sync only when it makes the primary acknowledge a record no majority
// holds, which needs the old ack to claim more than the standby's disk
// holds at that very moment; these checks see the miscount itself:
//
//   - S5 sync acks: a primary counts toward its commit point, for a
//     standby in sync E, at most the highest durable LSN an ack of sync E
//     from that standby delivered to this process claimed (an ack of an
//     earlier sync of the same standby, delayed or duplicated by the
//     network, describes a log that sync E may since have replaced).
//   - S5 sync source: a standby appends only records its own primary sent
//     (in seed mode two primaries of one term number their syncs alike,
//     so an epoch alone does not name a sync).

// syncCheck is the checkers' memory of every node's syncs.
type syncCheck struct {
	nodes []syncNode
}

// syncNode is one process's (one incarnation's) view.
type syncNode struct {
	inc  int
	term uint64 // the promotion acks belongs to (a promotion starts its epochs afresh)
	// acks: per standby, per sync epoch, the highest durable LSN its acks
	// delivered to this process claimed.
	acks map[int]map[uint64]uint64
	// senders: who sent the record batches delivered to this process, by
	// the identity of their bytes (the standby appends a batch's bytes as
	// they came, so the append's data is the message's).
	senders map[bytesKey]int
	// started: as primary, when each sync this promotion began in the
	// liveness phase sent its first message (churn.go).
	started map[int]map[uint64]syncStart
	// last: as standby, the sync it was in after its previous step.
	last lastSync
}

// bytesKey names a byte slice by its backing array and length.
type bytesKey struct {
	p *byte
	n int
}

func keyOf(b []byte) bytesKey { return bytesKey{&b[0], len(b)} }

// maxSenders bounds the batches remembered per process: a standby appends
// what it queued within a few steps, so older entries are of batches it
// dropped (another sync's, duplicates).
const maxSenders = 4096

func (c *syncCheck) node(nd *simNode, n int) *syncNode {
	if c.nodes == nil {
		c.nodes = make([]syncNode, n)
	}
	s := &c.nodes[nd.id]
	if s.inc != nd.inc || s.acks == nil {
		*s = syncNode{inc: nd.inc, acks: map[int]map[uint64]uint64{}, senders: map[bytesKey]int{}, started: map[int]map[uint64]syncStart{}}
	}
	return s
}

// checkSyncs runs after every step of a node, with the input it took and
// the effects it emitted.
func (w *World) checkSyncs(nd *simNode, in sm.Input, effs []sm.Effect) {
	if !nd.up || nd.node == nil {
		return
	}
	r, isRecv := in.(sm.Recv)
	isAck := isRecv && r.Msg.Type == sm.MsgReplAck
	isRecords := isRecv && r.Msg.Type == sm.MsgReplRecords && len(r.Msg.Bytes) > 0
	appends := false
	for _, e := range effs {
		if op, ok := e.(sm.FileOp); ok && op.Op == sm.OpAppend && len(op.Data) > 0 && strings.HasPrefix(op.Path, wal.WALDir+"/") {
			appends = true
			break
		}
	}
	s := w.sx.node(nd, len(w.nodes))
	if w.liveness {
		w.checkCleanSync(nd, s, effs)
	}
	if !isAck && !isRecords && !appends {
		return
	}
	if isRecords {
		if len(s.senders) >= maxSenders {
			clear(s.senders)
		}
		s.senders[keyOf(r.Msg.Bytes)] = r.From
	}
	if t := nd.node.Term(); isAck && nd.node.Role() == sm.RolePrimary && t != s.term {
		s.term = t
		clear(s.acks)
		clear(s.started)
	}
	if isAck && r.Msg.Offset == 0 && r.Msg.ReqID != 0 {
		per := s.acks[r.From]
		if per == nil {
			per = map[uint64]uint64{}
			s.acks[r.From] = per
		}
		per[r.Msg.ReqID] = max(per[r.Msg.ReqID], r.Msg.WALPos)
	}
	if isAck {
		w.checkSyncAcks(nd, s)
	}
	if appends {
		w.checkSyncSource(nd, s, effs)
	}
}

// checkSyncAcks: S5 sync acks (see above).
func (w *World) checkSyncAcks(nd *simNode, s *syncNode) {
	for _, v := range nd.node.SyncViews() {
		if !v.Synced {
			continue
		}
		if got := s.acks[v.Peer][v.Epoch]; v.Acked > got {
			w.violate("S5", "n%d counts n%d's log as durable up to lsn %d in sync %s, but n%d's acks of that sync claimed at most lsn %d: an acknowledgement of another sync was counted toward the commit point", nd.id, v.Peer, v.Acked, sm.SyncName(v.Epoch), v.Peer, got)
			return
		}
	}
}

// checkSyncSource: S5 sync source (see above).
func (w *World) checkSyncSource(nd *simNode, s *syncNode, effs []sm.Effect) {
	if nd.node.Role() != sm.RoleStandby {
		return
	}
	for _, e := range effs {
		op, ok := e.(sm.FileOp)
		if !ok || op.Op != sm.OpAppend || len(op.Data) == 0 || !strings.HasPrefix(op.Path, wal.WALDir+"/") {
			continue
		}
		k := keyOf(op.Data)
		from, known := s.senders[k]
		if !known {
			continue // not a batch as it came (a standby's own rewrite)
		}
		delete(s.senders, k)
		if p := nd.node.Primary(); from != p {
			w.violate("S5", "n%d appends to %s records n%d sent, but it follows n%d: a standby accepted another node's sync", nd.id, op.Path, from, p)
			return
		}
	}
}
