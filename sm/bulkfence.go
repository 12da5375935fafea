package sm

// The bulk fence. A bulk read (FileOp.Bulk: a standby checkpoint's reads
// of its closed segments and its newest snapshot) runs on a lane of its
// own, beside the I/O lane, so the I/O lane's order does not keep a change
// of the same file from running while it reads: a read racing a write may
// see any mix of the two. The standby issues no change to a file its own
// checkpoint reads, but a promotion ends the checkpoint's generation
// (pending.go) while its read still runs, and what comes next (recovery,
// or after a step-down an install that removes the old log's segments)
// may change that file. So a change issued while a bulk read of its file
// is in flight, abandoned or not, is held here and issued once the last
// such read completes; one whose owner has ended meanwhile is dropped
// unissued, as its completion would have been.

// changes names the files op changes (none for a read, a list, an fsync).
func changes(op FileOp) []string {
	switch op.Op {
	case OpWrite, OpAppend, OpRemove:
		return []string{op.Path}
	case OpRename:
		return []string{op.Path, op.To}
	}
	return nil
}

// fenced reports whether op changes a file a bulk read in flight reads,
// or names a file a held change names (which it must not overtake).
func (ot *ioTable) fenced(op FileOp) bool {
	if len(ot.bulk) == 0 && len(ot.held) == 0 {
		return false
	}
	for _, p := range changes(op) {
		if ot.bulk[p] > 0 {
			return true
		}
	}
	for _, h := range ot.held {
		if h.ID != op.ID && sharesFile(h, op) {
			return true
		}
	}
	return false
}

// sharesFile reports whether a and b name a file in common.
func sharesFile(a, b FileOp) bool {
	for _, p := range []string{a.Path, a.To} {
		if p != "" && (p == b.Path || p == b.To) {
			return true
		}
	}
	return false
}

// isHeld reports whether the operation id is held by the fence.
func (ot *ioTable) isHeld(id uint64) bool {
	for _, h := range ot.held {
		if h.ID == id {
			return true
		}
	}
	return false
}

// bulkDone notes that a bulk read of path completed, and issues the held
// changes no bulk read in flight fences any more, in the order they were
// issued.
func (n *Node) bulkDone(path string) {
	ot := &n.ops
	if ot.bulk[path]--; ot.bulk[path] <= 0 {
		delete(ot.bulk, path)
	}
	held := ot.held
	ot.held = nil
	for _, op := range held {
		switch p, ok := ot.pending[op.ID]; {
		case ot.fenced(op): // a bulk read, or a change before it still held
			ot.held = append(ot.held, op)
		case !ok || ot.abandoned(p.owner):
			delete(ot.pending, op.ID)
		default:
			n.emit(op)
		}
	}
}
