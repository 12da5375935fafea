package sim

import "xce/sm"

// checkTermClaim: S4 — every message a node sends reveals only a term
// (and, for votes, a vote) that its disk durably holds in data/term: a
// power cut after the send must not let it forget the term and vote again.
func (w *World) checkTermClaim(nd *simNode, s sm.Send) {
	if nd.opts.SeedLiteralP0 {
		return // the seed's hole, kept to be shown
	}
	m := s.Msg
	var term uint64
	vote := -1
	if b, ok := nd.disk.DurableData(sm.TermPath); ok {
		t, v, err := sm.ParseTermVote(b)
		if err != nil && nd.rot.term != nil && string(b) == string(nd.rot.term) {
			return // injected rot: the node stops when it reads it (rot.go)
		}
		if err != nil {
			w.violate("S7", "n%d: durable %s unreadable: %v", nd.id, sm.TermPath, err)
			return
		}
		term, vote = t, v
	}
	switch {
	case m.Term > term:
		w.violate("S4", "n%d sent %s in term %d while data/term durably holds term %d", nd.id, m.Type, m.Term, term)
	case m.Type == sm.MsgVoteReply && m.Accepted && term == m.Term && vote != s.To:
		// (a durable higher term also rules out a second vote in m.Term)
		w.violate("S4", "n%d granted n%d its vote of term %d while data/term durably holds term %d vote %d", nd.id, s.To, m.Term, term, vote)
	case m.Type == sm.MsgVote && term == m.Term && vote != nd.id:
		w.violate("S4", "n%d asked for votes in term %d while data/term durably holds term %d vote %d", nd.id, m.Term, term, vote)
	}
}
