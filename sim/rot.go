package sim

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// Bit rot in data/ (issue 7 B3). A down node's durable WAL segment,
// snapshot or data/term gets one flipped bit before it restarts. The node
// must detect it (CRC, parse) and stop with a FATAL naming the file, or
// use what is still intact (an older snapshot and the log), and never
// serve rotten state. Rot strikes at most a minority of the nodes of a
// quorum cluster (Scenario.MaxRotted): a majority keeps every committed
// record, so no acknowledged write may be lost cluster-wide.
//
// A FATAL on a rotted node is excused (S7); the node is then a lost node:
// it stays down, as a node would whose operator has not yet restored or
// wiped its data/, and the others must converge without it and keep every
// acknowledged write. Nothing else is waived: the durable-claim, term,
// election and durability checks run on it as on any node.

// rotState is one node's bit rot.
type rotState struct {
	paths []string // files rot was injected in
	lost  bool     // it stopped with a FATAL the rot explains: it stays down
	term  []byte   // data/term as rot left it (nil: not rotted)
	// termIntact is data/term as it was before the flips that made term.
	termIntact []byte
	// before is its durable log just before the first rot: what its
	// acknowledgements stood for (chain.go's majority count).
	before *logView
	// read: the node has read a file the latest rot struck (noteRotRead).
	read bool
}

// rotFatal are the FATALs rot in data/ can explain.
var rotFatal = map[string]bool{
	"fatal.wal-corrupt": true, "fatal.term": true, "fatal.recovery": true, "fatal.wal-unreadable": true,
}

// corruptData flips one bit in a durable data/ file of nd (down, about to
// start), if the cluster's rot budget allows another node.
func (w *World) corruptData(nd *simNode) {
	if len(nd.rot.paths) == 0 {
		n := 0
		for _, o := range w.nodes {
			if len(o.rot.paths) > 0 {
				n++
			}
		}
		if n >= w.sc.MaxRotted() {
			return
		}
	}
	durable := nd.disk.DurableFiles()
	var names []string
	for _, p := range nd.disk.Paths() {
		if _, ok := durable[p]; ok && strings.HasPrefix(p, sm.DataDir+"/") && !strings.HasSuffix(p, ".tmp") && len(durable[p]) > 0 {
			names = append(names, p)
		}
	}
	if len(names) == 0 {
		return
	}
	p := names[w.rng.IntN(len(names))]
	// A flip in the last frame of the newest segment looks exactly like a
	// torn write of an unsynced append (recovery truncates it, rightly for
	// a torn write): undetectable loss of a record the node may have
	// acknowledged, outside what replication can survive. Rot goes before
	// that frame.
	limit := -1
	if p == newestSegment(names) {
		limit = lastFrameOffset(durable[p])
	}
	var before *logView
	if nd.rot.before == nil {
		w.cc.init(len(w.nodes))
		before = w.durableView(nd.id).clone()
	}
	if p == sm.TermPath {
		// The bytes before this flip are intact unless they are what an
		// earlier flip left (the node has not rewritten the file since).
		if pre, _ := nd.disk.ReadFile(p); nd.rot.term == nil || !bytes.Equal(pre, nd.rot.term) {
			nd.rot.termIntact = pre
		}
	}
	if nd.disk.CorruptBefore(p, limit, w.rng) {
		if nd.rot.before == nil {
			nd.rot.before = before
		}
		nd.rot.paths = append(nd.rot.paths, p)
		nd.rot.read = false
		if p == sm.TermPath {
			// The flip went into the file the path names now. Where that
			// is a rename whose directory fsync has not yet come, the
			// durable entry still names the file before it, intact: a
			// power loss brings that one back, and reading it is no rot.
			nd.rot.term, _ = nd.disk.ReadFile(p)
			if bytes.Equal(nd.rot.term, nd.rot.termIntact) {
				// A second flip of the same bit, before the node read the
				// file: the flips cancelled, and the file is intact again
				// (seed 893143).
				nd.rot.term = nil
			}
		}
		w.tr.line(w.now, nd.id, "bit rot in "+p)
	}
}

// noteRotRead notes a read of nd's that reaches a file rot struck: from
// then on the node knows its disk as it is, and chain.go's majority count
// judges that disk instead of the log before the rot.
func (w *World) noteRotRead(nd *simNode, op sm.FileOp) {
	if op.Op == sm.OpRead && !nd.rot.read && slices.Contains(nd.rot.paths, op.Path) {
		nd.rot.read = true
	}
}

// rotExplains reports whether a FATAL of nd is explained by injected rot;
// if so the node is lost (stays down).
func (w *World) rotExplains(nd *simNode, l sm.Log) bool {
	if len(nd.rot.paths) == 0 || l.Level != sm.Fatal || !rotFatal[l.Key] {
		return false
	}
	if !nd.rot.lost {
		nd.rot.lost = true
		w.tr.line(w.now, nd.id, fmt.Sprintf("lost: FATAL %s explained by the bit rot injected in %s; it stays down", l.Key, strings.Join(nd.rot.paths, ", ")))
	}
	return true
}

// lostNodes counts the nodes lost to bit rot.
func (w *World) lostNodes() int {
	n := 0
	for _, nd := range w.nodes {
		if nd.rot.lost {
			n++
		}
	}
	return n
}

// rotStranded reports whether the nodes lost to bit rot held the only
// config: no other disk holds a valid one, so no node can serve (seed 002
// §10.1) until an operator restores the lost node's data/ or installs the
// config elsewhere. L1 is not required then; L3 (never serving without a
// config) still is.
func (w *World) rotStranded() bool {
	if w.lostNodes() == 0 {
		return false
	}
	for _, nd := range w.nodes {
		if !nd.rot.lost && validConfigOn(nd.disk.Files()) != "" {
			return false
		}
	}
	return true
}

// checkRotTerm: S4 — a node that read a data/term bit rot changed must not
// go on with it: a flipped digit can lower the term or change the vote,
// and a node that then votes again in a term it already voted in can
// elect two primaries. It must stop (fatal.term) naming the file.
func (w *World) checkRotTerm(nd *simNode, op sm.FileOp, res sm.IODone) {
	if nd.rot.term == nil || op.Op != sm.OpRead || op.Path != sm.TermPath || res.Err != sm.IOOK || string(res.Data) != string(nd.rot.term) {
		return
	}
	if nd.up && !nd.rot.lost {
		t, v, _ := sm.ParseTermVote(res.Data)
		w.violate("S4", "n%d read %s with a bit flipped by rot (%q, read as term %d vote %d) and went on with it", nd.id, sm.TermPath, res.Data, t, v)
	}
}

// newestSegment is the WAL segment with the highest first LSN among paths.
func newestSegment(paths []string) string {
	best, bestLSN := "", uint64(0)
	for _, p := range paths {
		name, ok := strings.CutPrefix(p, wal.WALDir+"/")
		if !ok {
			continue
		}
		if lsn, ok := wal.ParseSegmentName(name); ok && (best == "" || lsn > bestLSN) {
			best, bestLSN = p, lsn
		}
	}
	return best
}

// lastFrameOffset is where the last whole frame of a segment starts.
func lastFrameOffset(data []byte) int {
	last := 0
	_, _ = wal.Walk(data, func(off int, _ *schema.WalRecord) error {
		last = off
		return nil
	})
	return last
}
