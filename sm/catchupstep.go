package sm

import "fmt"

// catchUpStep is what resumes when a file operation of a catch-up
// completes (catchup.go): on the primary, a round's listing of data/wal
// and its segment reads; on the standby, the log's directories made
// before the sync's records are written.
type catchUpStep struct {
	kind catchUpKind
	// The primary's side: the job state, the standby and the catch-up
	// the read serves (live: still its).
	j  *jobState
	s  int
	rp *replPeer
	cu *catchUpRead
	// seg: the read's segment; i, g: a first-round read's place among
	// those issued together, and where they gather; next: a later
	// round's, the first LSN of the segment after seg (0: none).
	seg  string
	i    int
	g    *catchUpGather
	next uint64
	sr   *standbyRepl // catchUpDirsMade: the standby's sync
}

type catchUpKind uint8

const (
	catchUpListed      catchUpKind = iota // first round: read the segments from the standby's position
	catchUpSegmentRead                    // first round: one segment in; with the last, check and send
	catchUpRoundListed                    // later round: read the segment after what was sent
	catchUpRoundRead                      // later round: queue and send its records
	catchUpDirsMade                       // standby: the log's directories exist, write the records
)

var catchUpKindNames = [...]string{
	catchUpListed:      "segments listed",
	catchUpSegmentRead: "segment read",
	catchUpRoundListed: "round's segments listed",
	catchUpRoundRead:   "round's segment read",
	catchUpDirsMade:    "directories made",
}

func (k catchUpKind) String() string { return catchUpKindNames[k] }

func (c catchUpStep) resume(n *Node, r result) {
	switch c.kind {
	case catchUpListed:
		n.joined.catchUpListed(c, r.IODone)
	case catchUpSegmentRead:
		n.joined.catchUpSegmentRead(c, r.IODone)
	case catchUpRoundListed:
		n.joined.catchUpRoundListed(c, r.IODone)
	case catchUpRoundRead:
		n.joined.catchUpRoundRead(c, r.IODone)
	case catchUpDirsMade:
		n.joined.catchUpDirsMade(c.sr)
	}
}

func (c catchUpStep) String() string {
	switch c.kind {
	case catchUpListed:
		return fmt.Sprintf("catch-up: %s for peer %d from lsn %d (term %d)", c.kind, c.s, c.cu.from.lsn, c.cu.from.term)
	case catchUpSegmentRead:
		return fmt.Sprintf("catch-up: %s %s for peer %d (%d of %d, %d left)", c.kind, c.seg, c.s, c.i+1, len(c.g.data), c.g.left)
	case catchUpRoundListed:
		return fmt.Sprintf("catch-up: %s for peer %d after lsn %d", c.kind, c.s, c.cu.sent)
	case catchUpRoundRead:
		return fmt.Sprintf("catch-up: %s %s for peer %d after lsn %d", c.kind, c.seg, c.s, c.cu.sent)
	case catchUpDirsMade:
		return fmt.Sprintf("catch-up: %s for the standby's sync %s after lsn %d", c.kind, SyncName(c.sr.epoch), c.sr.expect-1)
	}
	return "catch-up: " + c.kind.String()
}
