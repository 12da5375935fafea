package fileio

import (
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// TestPacedWriteTakesItsTime: a large write at WriteRate takes at least
// its bytes over the rate (the pacer never lets it run ahead).
func TestPacedWriteTakesItsTime(t *testing.T) {
	const size, rate = 4 << 20, 32 << 20
	e := &Executor{Base: t.TempDir(), WriteRate: rate}
	defer e.Close()
	t0 := time.Now()
	if d := e.Exec(sm.FileOp{Op: sm.OpWrite, Path: "snap", Data: make([]byte, size)}); d.Err != sm.IOOK {
		t.Fatalf("write: %s %s", d.Err, d.Detail)
	}
	if took, least := time.Since(t0), time.Duration(float64(size)/rate*float64(time.Second)); took < least*9/10 {
		t.Fatalf("a %d-byte write at %d B/s took %v, at least %v expected", size, rate, took, least)
	}
}

// TestPacedAppendAfterAPauseTakesItsTime: a large append to the kept file
// is paced on its own, however long ago the one before it was: the pause
// between two appends is no budget for the next.
func TestPacedAppendAfterAPauseTakesItsTime(t *testing.T) {
	const size, rate = 2 << 20, 32 << 20
	e := &Executor{Base: t.TempDir(), WriteRate: rate}
	defer e.Close()
	if d := e.Exec(sm.FileOp{Op: sm.OpAppend, Path: "snap.tmp", Data: make([]byte, size)}); d.Err != sm.IOOK {
		t.Fatalf("append: %s %s", d.Err, d.Detail)
	}
	time.Sleep(200 * time.Millisecond) // longer than the next append is due to take
	t0 := time.Now()
	if d := e.Exec(sm.FileOp{Op: sm.OpAppend, Path: "snap.tmp", Data: make([]byte, size)}); d.Err != sm.IOOK {
		t.Fatalf("append: %s %s", d.Err, d.Detail)
	}
	if took, least := time.Since(t0), time.Duration(float64(size)/rate*float64(time.Second)); took < least*9/10 {
		t.Fatalf("a %d-byte append at %d B/s after a pause took %v, at least %v expected", size, rate, took, least)
	}
}
