package sim

import (
	"bytes"
	"path"
	"sort"

	"xce/schema"
	"xce/sm"
	"xce/sm/wal"
)

// Every log position a node claims to others — in a standby's ack (which
// counts toward commit) and in a candidate's (pre-)vote request (which
// wins votes) — must be durable on its disk: what a power cut now would
// leave is read back here, independently of the node's own bookkeeping.

// logCache remembers what durableLogPos parsed of a node's files: a
// snapshot by its bytes, a segment by its
// bytes (segments grow by appends: only the new tail is decoded).
type logCache struct {
	snaps map[string]snapPos
	segs  map[string]*segParse
}

type snapPos struct {
	data      []byte // the bytes decoded (a name is reused across histories)
	term, lsn uint64
	bad       bool
}

type lt struct{ lsn, term uint64 }

type segParse struct {
	data  []byte // the bytes parsed
	valid int    // length of the valid frames
	recs  []lt
}

func (c *logCache) snapshot(name string, data []byte) snapPos {
	if c.snaps == nil {
		c.snaps = map[string]snapPos{}
	}
	if sp, ok := c.snaps[name]; ok && bytes.Equal(sp.data, data) {
		return sp
	}
	sp := snapPos{data: data}
	if s, err := wal.DecodeSnapshot(data); err != nil {
		sp.bad = true
	} else {
		sp.term, sp.lsn = s.GetTerm(), s.GetLsn()
	}
	c.snaps[name] = sp
	return sp
}

func (c *logCache) segment(name string, data []byte) []lt {
	if c.segs == nil {
		c.segs = map[string]*segParse{}
	}
	sp := c.segs[name]
	if sp == nil || len(data) < sp.valid || !bytes.Equal(data[:sp.valid], sp.data[:sp.valid]) {
		sp = &segParse{}
	}
	recs := sp.recs
	valid, _ := wal.Walk(data[sp.valid:], func(_ int, r *schema.WalRecord) error {
		recs = append(recs, lt{lsn: r.GetLsn(), term: r.GetTerm()})
		return nil
	})
	sp.recs, sp.valid, sp.data = recs, sp.valid+valid, data
	c.segs[name] = sp
	return recs
}

// durableLogPos is the position recovery would reach on the durable view
// of a node's files: the newest decodable snapshot, then the contiguous
// records after it (none of another log: a record at the snapshot's LSN
// with another term ends it there).
func durableLogPos(files map[string][]byte, c *logCache) (term, lsn uint64) {
	var snaps, segs []string
	for p := range files {
		switch path.Dir(p) {
		case wal.SnapDir:
			snaps = append(snaps, path.Base(p))
		case wal.WALDir:
			segs = append(segs, path.Base(p))
		}
	}
	sort.Strings(snaps)
	sort.Strings(segs)
	for {
		plan, _ := wal.PlanRecovery(snaps, segs)
		term, lsn = 0, 0
		if plan.Snapshot != "" {
			sp := c.snapshot(plan.Snapshot, files[wal.SnapDir+"/"+plan.Snapshot])
			if sp.bad {
				snaps = removeName(snaps, plan.Snapshot)
				continue
			}
			term, lsn = sp.term, sp.lsn
		}
		snapTerm, snapLSN := term, lsn
		for _, seg := range plan.Segments {
			for _, r := range c.segment(seg, files[wal.WALDir+"/"+seg]) {
				switch {
				case r.lsn == snapLSN && snapLSN > 0 && r.term != snapTerm:
					return snapTerm, snapLSN
				case r.lsn == lsn+1:
					term, lsn = r.term, r.lsn
				case r.lsn > lsn+1:
					return term, lsn
				}
			}
		}
		return term, lsn
	}
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
	// with the same rule as durableLogPos).
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
