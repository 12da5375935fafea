package sm

import (
	"slices"
	"testing"
)

// recorded is a continuation that notes its completions.
type recorded struct{ got *[]uint64 }

func (c recorded) resume(_ *Node, r result) { *c.got = append(*c.got, r.ID) }
func (c recorded) String() string           { return "recorded" }

// emittedOps are the FileOps among effs.
func emittedOps(effs []Effect) []FileOp {
	var out []FileOp
	for _, e := range effs {
		if op, ok := e.(FileOp); ok {
			out = append(out, op)
		}
	}
	return out
}

// A change of a file a bulk read is reading (the read abandoned with its
// owner, as a promotion abandons a standby checkpoint) waits for the read
// to complete; what names the file after it waits behind it; changes of
// other files go at once; a held change whose owner ends meanwhile is
// dropped unissued.
func TestBulkFenceHoldsChangesUntilTheReadCompletes(t *testing.T) {
	const seg, other = "data/wal/0000000000000004.wal", "data/wal/0000000000000014.wal"
	n := newNode(Options{Peers: []string{"a"}})
	var done []uint64
	next := recorded{&done}
	n.ops.cur = n.ops.logOwner()
	n.io(FileOp{Op: OpRead, Path: seg, Bulk: true}, next)
	n.ops.gens[concernLog]++ // a promotion: the read is abandoned, still in flight
	n.ops.cur = n.ops.logOwner()
	n.io(FileOp{Op: OpRemove, Path: seg}, next)
	n.io(FileOp{Op: OpFsync, Path: seg}, next)
	n.io(FileOp{Op: OpRemove, Path: other}, next)
	effs := n.out
	n.out = nil
	ops := emittedOps(effs)
	if len(ops) != 2 || ops[0].Op != OpRead || ops[1].Path != other {
		t.Fatalf("issued %v: want the bulk read and the other file's remove only", ops)
	}
	read, otherRemove := ops[0], ops[1]
	pend := n.PendingOps()
	if !slices.ContainsFunc(pend, func(s string) bool { return s == "io#2 remove "+seg+" (log/1, held for a bulk read) → recorded" }) {
		t.Fatalf("pending %q: the remove not shown held", pend)
	}
	ops = emittedOps(n.Step(Clock{}, IODone{ID: otherRemove.ID}))
	if len(ops) != 0 {
		t.Fatalf("another file's completion issued %v", ops)
	}
	ops = emittedOps(n.Step(Clock{}, IODone{ID: read.ID}))
	if len(ops) != 2 || ops[0].Op != OpRemove || ops[0].Path != seg || ops[1].Op != OpFsync {
		t.Fatalf("the read's completion issued %v: want the remove, then the fsync", ops)
	}
	if !slices.Equal(done, []uint64{otherRemove.ID}) {
		t.Fatalf("completions resumed %v: want only the other file's remove (the read's owner ended)", done)
	}

	// A held change whose owner ends before the read completes is dropped.
	n.ops.cur = n.ops.logOwner()
	n.io(FileOp{Op: OpRead, Path: seg, Bulk: true}, next)
	n.io(FileOp{Op: OpAppend, Path: seg, Data: []byte("x")}, next)
	read = emittedOps(n.out)[0]
	n.out = nil
	n.ops.gens[concernLog]++
	if ops := emittedOps(n.Step(Clock{}, IODone{ID: read.ID})); len(ops) != 0 {
		t.Fatalf("issued %v for an owner that ended", ops)
	}
	if len(n.ops.held) != 0 || len(n.ops.bulk) != 0 {
		t.Fatalf("held %v, bulk %v after the read: want none", n.ops.held, n.ops.bulk)
	}
	if len(n.ops.pending) != 2 { // the first remove and fsync, never completed here
		t.Fatalf("pending %v: want the remove and fsync issued earlier only", n.PendingOps())
	}
}
