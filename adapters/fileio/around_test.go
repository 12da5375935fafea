package fileio

import (
	"testing"

	"xce/sm"
)

// TestAroundLargeWrapsEncodesAndImports: the hook runs around every
// OpEncode and OpImport, its after once the op is done, and never for a
// file op.
func TestAroundLargeWrapsEncodesAndImports(t *testing.T) {
	var before, after int
	e := &Executor{Base: t.TempDir(), AroundLarge: func() func() {
		before++
		return func() { after++ }
	}}
	defer e.Close()
	e.Exec(sm.FileOp{Op: sm.OpWrite, Path: "f", Data: []byte("x")})
	e.Exec(sm.FileOp{Op: sm.OpFsync, Path: "f"})
	if before != 0 {
		t.Fatalf("hook ran %d times for file ops", before)
	}
	for i, op := range []sm.FileOp{{Op: sm.OpEncode}, {Op: sm.OpImport}} { // nothing to encode or import: refused, but wrapped
		if d := e.Exec(op); d.Err == sm.IOOK {
			t.Fatalf("%s without its input succeeded", op.Op)
		}
		if before != i+1 || after != i+1 {
			t.Fatalf("around %s: before %d, after %d", op.Op, before, after)
		}
	}
}
