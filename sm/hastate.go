package sm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/xce-hpc/xce/sm/wal"
)

// The node's durable HA state is data/term: its current term and the vote
// it cast in that term ("<term>", or "<term> <peer index>" once it has
// voted, then " crc32c=<8 hex digits>" and a newline: see termFile). In memory the node may already have moved on (a higher term
// seen, a vote granted); every message it sends reveals that state, so
// sends are held until the state is durable (DESIGN §4.4: a node makes the
// highest term it has seen durable before it acts on it). Nothing else
// needs holding: replies to clients and WAL appends follow from messages
// received after the sends that depend on them.

// maxHeld bounds the sends held while data/term is written: sends are best
// effort, so the oldest are dropped (the timers resend what matters).
const maxHeld = 4096

// ParseTermVote parses data/term: the term and the vote in it (-1: none).
func ParseTermVote(b []byte) (uint64, int, error) {
	s := strings.TrimSuffix(string(b), "\n")
	if body, sum, ok := strings.Cut(s, termSumSep); ok {
		// A file this version wrote: the checksum covers the rest, so a
		// flipped bit (a lower term, another vote) is refused, not used.
		if want := fmt.Sprintf("%08x", wal.Checksum([]byte(body))); sum != want {
			return 0, -1, fmt.Errorf("%w '%s': checksum mismatch (%q, computed %s): bit rot or a torn write — restore this node's data/ or wipe it", ErrBadTermFile, TermPath, sum, want)
		}
		s = body
	}
	ts, vs, hasVote := strings.Cut(s, " ")
	t, err := strconv.ParseUint(ts, 10, 64)
	if err != nil {
		return 0, -1, fmt.Errorf("%w '%s': %q is not a decimal term", ErrBadTermFile, TermPath, ts)
	}
	if !hasVote {
		return t, -1, nil
	}
	v, err := strconv.Atoi(vs)
	if err != nil || v < 0 || v > 1<<16 {
		return 0, -1, fmt.Errorf("%w '%s': %q is not a peer index", ErrBadTermFile, TermPath, vs)
	}
	return t, v, nil
}

// termSumSep introduces data/term's checksum.
const termSumSep = " crc32c="

// termFile is what data/term holds for (term, vote): "<term>[ <vote>]"
// then " crc32c=<CRC32C of that, 8 hex digits>" and a newline. Files
// without the checksum (written before it existed) are still read.
func termFile(t uint64, vote int) []byte {
	body := strconv.FormatUint(t, 10)
	if vote >= 0 {
		body += " " + strconv.Itoa(vote)
	}
	return []byte(body + termSumSep + fmt.Sprintf("%08x", wal.Checksum([]byte(body))) + "\n")
}

// dirty: the in-memory term or vote is not durable yet.
func (hs *haState) dirty() bool { return hs.term != hs.durTerm || hs.vote != hs.durVote }

// observeTerm moves to a higher term seen in a message (no vote in it yet)
// and starts making it durable.
func (el *election) observeTerm(t uint64) {
	if t <= el.ha.term {
		return
	}
	el.ha.term, el.ha.vote = t, -1
	if el.role == RoleStandby {
		// A sync belongs to the primary's term it started in: a primary of
		// a newer term (the same peer's new process included) may hold
		// other records at the LSNs we have, so it must sync us afresh
		// before we append or ack anything.
		el.sb.setSync(nil)
		el.sb.epochSeen, el.sb.missedSync = 0, 0
	}
	el.syncHA()
}

// syncHA writes the current (term, vote) if it is not durable and no
// write is in flight; on completion it writes again if the state moved
// meanwhile, else releases the held sends and lets the election proceed.
func (el *election) syncHA() {
	if el.ha.haWriting || !el.ha.dirty() || el.role == RoleStopped {
		return
	}
	t, v := el.ha.term, el.ha.vote
	el.ha.haWriting = true
	prev := el.ops.own(owner{}) // the node's, whatever role asked
	el.replaceDurably(termTmpPath, TermPath, DataDir, termFile(t, v), termWritten{t: t, v: v})
	el.ops.cur = prev
}

// termWritten resumes when a data/term write of (t, v) is durable, or
// failed.
type termWritten struct {
	t uint64
	v int
}

func (w termWritten) String() string { return fmt.Sprintf("ha: term %d vote %d written", w.t, w.v) }

func (w termWritten) resume(n *Node, r result) {
	if r.failed != "" {
		// Not durable: nothing that depends on it goes out. The next
		// timer or message tries again.
		n.el.ha.haWriting = false
		n.log(Error, "ha.term-write", fmt.Sprintf("%s failed: %s %s — term %d not durable, holding messages", r.failed, r.Err, r.Detail, w.t))
		if n.role == RoleCandidate {
			// The election waits for this write: start it over (its
			// timers retry the write).
			n.el.cand.promoting = false
			n.el.startElection(n.el.failover)
		}
		return
	}
	n.el.ha.haWriting = false
	n.el.ha.durTerm, n.el.ha.durVote = w.t, w.v
	if n.el.ha.dirty() {
		n.el.syncHA()
		return
	}
	n.el.releaseHeld()
	n.el.onHADurable()
}

// releaseHeld sends what waited for data/term, in order.
func (el *election) releaseHeld() {
	held := el.ha.held
	el.ha.held = nil
	for _, s := range held {
		el.emit(s)
	}
}

// hold queues a send until the HA state is durable.
func (hs *haState) hold(s Send) {
	if len(hs.held) >= maxHeld {
		hs.held = hs.held[1:]
	}
	hs.held = append(hs.held, s)
}
