package sim

import "github.com/xce-hpc/xce/sm"

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
		t, v, err := nd.termFile.parse(b)
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

// termParse caches the parse of a node's durable data/term: checkTermClaim
// runs at every send, and the file changes only at a term or vote change.
// The bytes a disk stores never change (simdisk), so the same slice (the
// cache holds it: its array cannot be reused) is the same contents.
type termParse struct {
	b    []byte
	term uint64
	vote int
	err  error
}

// parse is sm.ParseTermVote(b), computed once per stored slice.
func (c *termParse) parse(b []byte) (uint64, int, error) {
	if c.b == nil || len(b) != len(c.b) || len(b) > 0 && &b[0] != &c.b[0] {
		c.term, c.vote, c.err = sm.ParseTermVote(b)
		c.b = b
		if b == nil {
			c.b = []byte{} // an empty file: cached as well
		}
	}
	return c.term, c.vote, c.err
}
