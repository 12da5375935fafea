package sm

// What every message says about its sender: its role, the term it acts
// in, its log position, its config tag and the heartbeat round; a message
// that would reveal a term or vote not yet durable waits for data/term.

func (el *election) send(to int, m Msg) {
	m.Role, m.Term, m.Priority, m.PeersHash = el.role, el.viewTerm(), el.opt.Self, el.opt.PeersHash
	if !el.disk.logUnknown {
		m.WALPos, m.LogTerm = el.disk.logPos.lsn, el.disk.logPos.term
	}
	if m.Type != MsgReplConfigReply && m.Type != MsgReplConfigPush && m.Type != MsgReplConfig && m.Type != MsgReplConfigPushReply {
		m.ConfigTag = el.conf.runningTag()
	}
	switch {
	case el.role == RolePrimary:
		// Every message a primary sends carries its newest heartbeat
		// round: a candidate tells a late one from a sign of life by it.
		m.Round = el.lead.round
	case el.role == RoleStandby && to == el.primary && el.fol.lastRoundTerm == m.Term:
		// An echo names a round of the term it is sent in: a round kept
		// from an earlier term of the same primary would confirm the new
		// term's rounds before this standby saw them (S9, seed 129).
		m.Round = el.fol.lastRound
	}
	s := Send{To: to, Msg: m}
	if el.ha.dirty() {
		el.ha.hold(s) // it reveals a term or vote not durable yet
		return
	}
	el.emit(s)
}

// viewTerm is the term we advertise: the highest we know of (so a
// restarted node learns it back).
func (el *election) viewTerm() uint64 { return max(el.ha.term, el.pTerm) }

func (el *election) broadcast(m Msg) {
	for i := range el.opt.Peers {
		if i != el.opt.Self {
			el.send(i, m)
		}
	}
}
