package sim

import (
	"strings"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// checkSnapshotTerm: S5 — a primary's checkpoint names the term of the
// record at its LSN (the freshness a node claims from a log that ends at
// its snapshot). The records a primary appended in this incarnation are
// decoded from its appends; a snapshot it writes at an LSN it appended must
// carry that record's term. The memory is one promotion's (incarnation and
// term): a later promotion may rewrite those LSNs after its suffix was cut
// (sm/truncate.go) or replaced.
//
// S7 — the log's files belong to the role that owns them (issue 7 A9): a
// primary puts into data/snap only a file it wrote in this promotion,
// never one a standby sequence (a snapshot install, a standby's
// checkpoint) left in flight when the node was promoted.
func (w *World) checkSnapshotTerm(nd *simNode, op sm.FileOp) {
	if nd.node.Role() != sm.RolePrimary {
		return
	}
	if nd.appendedInc != nd.inc || nd.appendedTerm != nd.node.Term() {
		nd.appended, nd.appendedInc, nd.appendedTerm = map[uint64]uint64{}, nd.inc, nd.node.Term()
		nd.snapWritten = map[string]bool{}
	}
	if strings.HasPrefix(op.Path, wal.SnapDir+"/") && (op.Op == sm.OpWrite || op.Op == sm.OpAppend) {
		nd.snapWritten[op.Path] = true
	}
	if op.Op == sm.OpRename && strings.HasPrefix(op.To, wal.SnapDir+"/") && !nd.snapWritten[op.Path] {
		w.violate("S7", "n%d, primary in term %d, renamed %s to %s, which it did not write in this promotion: a standby's install or checkpoint went on after the promotion", nd.id, nd.node.Term(), op.Path, op.To)
	}
	switch {
	case op.Op == sm.OpAppend && strings.HasPrefix(op.Path, wal.WALDir+"/"):
		// Walk takes the frames Scan takes (its decoder is proto.Unmarshal's
		// for every input), without a fresh record per frame.
		_, _ = w.walker.Walk(op.Data, func(_ int, r *schema.WalRecord) error {
			nd.appended[r.GetLsn()] = r.GetTerm()
			return nil
		})
	case op.Op == sm.OpWrite && strings.HasPrefix(op.Path, wal.SnapDir+"/"):
		s, err := readSnapshotHead(op.Data)
		if err != nil {
			_, err = wal.DecodeSnapshot(op.Data) // its error names the fault
			w.violate("S5", "n%d wrote an undecodable snapshot %s: %v", nd.id, op.Path, err)
			return
		}
		if t, ok := nd.appended[s.LSN]; ok && t != s.Term {
			w.violate("S5", "n%d wrote snapshot %s at lsn %d with term %d, but it logged that record in term %d", nd.id, op.Path, s.LSN, s.Term, t)
		}
	}
}
