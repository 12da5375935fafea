package sm

import "github.com/xce-hpc/xce/sm/quorum"

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
func (jl *journal) commitLSN() uint64 {
	return jl.jobs.prog.Committed(jl.jobs.durableLSN, jl.opt.Majority())
}

// startRound sends a numbered heartbeat to every peer.
func (el *election) startRound() {
	el.lead.round++
	el.lead.roundPending = len(el.opt.Peers) > 1
	el.lead.roundWanted = false
	el.broadcast(Msg{Type: MsgHeartbeat})
}

// confirmedRound is the newest round a majority (us included) has echoed.
func (el *election) confirmedRound() uint64 {
	pos := []uint64{el.lead.round}
	for p := range el.opt.Peers {
		if p != el.opt.Self {
			pos = append(pos, el.lead.peerRound[p])
		}
	}
	return quorum.Committed(pos, el.opt.Majority())
}

// readRound is the round a read arriving now must see confirmed: one sent
// after it arrived.
func (el *election) readRound() uint64 {
	if !el.lead.roundPending {
		el.startRound()
		return el.lead.round
	}
	el.lead.roundWanted = true
	return el.lead.round + 1
}

// onRoundEcho notes a standby's echo; a confirmed round lets the next one
// start at once if a read waits for it.
func (el *election) onRoundEcho(from int, round uint64) {
	if round <= el.lead.peerRound[from] {
		return
	}
	el.lead.peerRound[from] = round
	if el.lead.roundPending && el.confirmedRound() >= el.lead.round {
		el.lead.roundPending = false
		if el.lead.roundWanted {
			el.startRound()
		}
	}
}

// releaseWaiting emits the replies whose records are durable here and on
// enough standbys, in LSN order; then a switchover may hand over.
func (jl *journal) releaseWaiting() {
	defer jl.sw.tryHandOver() // a handover waits for nothing left to answer
	jl.noteCommit()
	j := jl.jobs
	k := 0
	for k < len(j.waiting) && jl.answerable(j.waiting[k].lsn) {
		jl.emitReply(j.waiting[k].lsn, j.waiting[k].rep)
		k++
	}
	j.waiting = j.waiting[k:]
	if len(j.reads) == 0 {
		return
	}
	conf := jl.el.confirmedRound()
	k = 0
	for k < len(j.reads) && j.reads[k].round <= conf && jl.answerable(j.reads[k].lsn) {
		jl.emit(j.reads[k].rep)
		k++
	}
	j.reads = j.reads[k:]
}

// answerable reports whether the records up to lsn are durable here and
// replicated as a reply that depends on them needs.
func (jl *journal) answerable(lsn uint64) bool {
	return lsn <= jl.jobs.durableLSN && jl.replicated(lsn)
}

// replicated reports whether lsn has the acks a reply needs: from
// SyncStandbys standbys, or every live one if fewer are live. A live
// standby still installing its snapshot counts as live, so a resync holds
// writes up instead of letting them skip replication.
func (jl *journal) replicated(lsn uint64) bool {
	if jl.quorumMode() {
		return lsn <= jl.commitLSN()
	}
	return jl.jobs.prog.Replicated(lsn, jl.opt.SyncStandbys, int64(jl.now.Mono), int64(jl.opt.FailureTimeout))
}
