package fileio

import (
	"testing"

	"github.com/xce-hpc/xce/sm"
)

// TestAroundLargeWrapsEncodesAndImports: the hook runs around every
// ComputeEncode and ComputeImport, its after once the work is done, and
// never for a file op or a verify.
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
	e.Compute(sm.Compute{Kind: sm.ComputeVerify})
	if before != 0 {
		t.Fatalf("hook ran %d times for a verify", before)
	}
	for i, c := range []sm.Compute{{Kind: sm.ComputeEncode}, {Kind: sm.ComputeImport}} { // nothing to encode or import: refused, but wrapped
		if d := e.Compute(c); d.Err == sm.IOOK {
			t.Fatalf("%s without its input succeeded", c.Kind)
		}
		if before != i+1 || after != i+1 {
			t.Fatalf("around %s: before %d, after %d", c.Kind, before, after)
		}
	}
}
