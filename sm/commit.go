package sm

import "xce/sm/quorum"

// Commitment (DESIGN §4.4). In quorum mode a record is committed once a
// majority holds it durably: the primary's own fsync and the durable LSNs
// its synced standbys acknowledged. The primary's first record of a term
// is a no-op, so every client record commits only after the no-op, and
// with it every record of earlier terms (Raft §5.4.2). Reads are answered
// once what they observed is committed and a heartbeat round sent after
// they arrived was echoed by a majority (read index, Raft §6.4): no newer
// primary can have committed anything they miss. In seed mode a record
// waits for SyncStandbys live standbys (fewer if fewer are live).

// commitLSN is the highest LSN durable on a majority (quorum mode).
func (n *Node) commitLSN() uint64 {
	return n.jobs.prog.Committed(n.jobs.durableLSN, n.opt.Majority())
}

// startRound sends a numbered heartbeat to every peer.
func (n *Node) startRound() {
	n.hb.round++
	n.hb.roundPending = len(n.opt.Peers) > 1
	n.hb.roundWanted = false
	n.broadcast(Msg{Type: MsgHeartbeat})
}

// confirmedRound is the newest round a majority (us included) has echoed.
func (n *Node) confirmedRound() uint64 {
	pos := []uint64{n.hb.round}
	for p := range n.opt.Peers {
		if p != n.opt.Self {
			pos = append(pos, n.hb.peerRound[p])
		}
	}
	return quorum.Committed(pos, n.opt.Majority())
}

// readRound is the round a read arriving now must see confirmed: one sent
// after it arrived.
func (n *Node) readRound() uint64 {
	if !n.hb.roundPending {
		n.startRound()
		return n.hb.round
	}
	n.hb.roundWanted = true
	return n.hb.round + 1
}

// onRoundEcho notes a standby's echo; a confirmed round lets the next one
// start at once if a read waits for it.
func (n *Node) onRoundEcho(from int, round uint64) {
	if round <= n.hb.peerRound[from] {
		return
	}
	n.hb.peerRound[from] = round
	if n.hb.roundPending && n.confirmedRound() >= n.hb.round {
		n.hb.roundPending = false
		if n.hb.roundWanted {
			n.startRound()
		}
	}
}
