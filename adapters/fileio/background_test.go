package fileio

import (
	"errors"
	"testing"

	"github.com/xce-hpc/xce/sm"
)

func TestBackgroundKinds(t *testing.T) {
	for _, c := range []struct {
		kind sm.ComputeKind
		want bool
	}{
		{sm.ComputeEncode, true},   // a standby's sync snapshot
		{sm.ComputeEncodeTo, true}, // a checkpoint
		{sm.ComputeVerify, true},   // a received snapshot's check
		{sm.ComputeBuild, true},    // a standby checkpoint's state
		{sm.ComputeImport, false},  // a recovery: a promotion waits for it
		{0, false},
	} {
		if got := background(c.kind); got != c.want {
			t.Errorf("background(%s) = %v, want %v", c.kind, got, c.want)
		}
	}
}

// TestBackgroundComputes: with BackgroundNice, the background Computes
// run through inBackground at that nice value and their completion is
// the Compute's own; an import does not, nor does anything with 0. A
// failure to lower the priority reaches BackgroundError and the
// completion is still returned.
func TestBackgroundComputes(t *testing.T) {
	var calls []int
	var fail error
	defer func(orig func(int, func()) error) { runInBackground = orig }(runInBackground)
	runInBackground = func(nice int, f func()) error {
		calls = append(calls, nice)
		f()
		return fail
	}
	var reported []error
	e := &Executor{Base: t.TempDir(), BackgroundNice: 7, BackgroundError: func(err error) { reported = append(reported, err) }}
	defer e.Close()
	for _, nice := range []int{7, 0} {
		e.BackgroundNice = nice
		for _, k := range []sm.ComputeKind{sm.ComputeEncode, sm.ComputeEncodeTo, sm.ComputeVerify, sm.ComputeBuild, sm.ComputeImport} {
			calls = nil
			// Nothing to encode, verify or import: refused, but routed.
			d := e.Compute(sm.Compute{ID: 42, Kind: k})
			if d.ID != 42 || d.Err == sm.IOOK {
				t.Fatalf("nice %d, %s: completion %+v, want ID 42 and a refusal", nice, k, d)
			}
			want := []int(nil)
			if nice > 0 && background(k) {
				want = []int{nice}
			}
			if len(calls) != len(want) || len(want) == 1 && calls[0] != want[0] {
				t.Errorf("nice %d, %s: ran in the background at %v, want %v", nice, k, calls, want)
			}
		}
	}
	if len(reported) != 0 {
		t.Fatalf("errors reported without a failure: %v", reported)
	}
	fail = errors.New("refused")
	e.BackgroundNice = 3
	if d := e.Compute(sm.Compute{ID: 9, Kind: sm.ComputeEncode}); d.ID != 9 || d.Err == sm.IOOK {
		t.Fatalf("completion after a failed setpriority: %+v", d)
	}
	if len(reported) != 1 || !errors.Is(reported[0], fail) {
		t.Fatalf("reported %v, want the failure once", reported)
	}
}

// TestBackgroundReads: with BackgroundNice, a read marked Background (a
// standby checkpoint's, an install's read back) runs through
// inBackground and returns what it read; any other file operation, and a
// background read with 0, do not.
func TestBackgroundReads(t *testing.T) {
	var calls []int
	defer func(orig func(int, func()) error) { runInBackground = orig }(runInBackground)
	runInBackground = func(nice int, f func()) error {
		calls = append(calls, nice)
		f()
		return nil
	}
	e := &Executor{Base: t.TempDir(), BackgroundNice: 5}
	defer e.Close()
	if d := e.Exec(sm.FileOp{Op: sm.OpWrite, Path: "seg", Data: []byte("records")}); d.Err != sm.IOOK {
		t.Fatalf("write: %+v", d)
	}
	e.Exec(sm.FileOp{Op: sm.OpFsync, Path: "seg"})
	if len(calls) != 0 {
		t.Fatalf("a write and an fsync ran in the background: %v", calls)
	}
	for _, c := range []struct {
		background, bulk bool
		nice             int
		want             []int
	}{{false, false, 5, nil}, {false, true, 5, nil}, {true, true, 5, []int{5}}, {true, false, 5, []int{5}}, {true, true, 0, nil}} {
		calls = nil
		e.BackgroundNice = c.nice
		d := e.Exec(sm.FileOp{ID: 3, Op: sm.OpRead, Path: "seg", Bulk: c.bulk, Background: c.background})
		if d.ID != 3 || d.Err != sm.IOOK || string(d.Data) != "records" {
			t.Fatalf("%+v: read %+v", c, d)
		}
		if len(calls) != len(c.want) || len(c.want) == 1 && calls[0] != c.want[0] {
			t.Errorf("%+v: ran in the background at %v", c, calls)
		}
	}
}

// TestAroundReadWrapsBackgroundReads: the hook runs around every
// background read, its after once the read is done, and around nothing
// else; with BackgroundNice 0 too (the heap's goal is not the CPU's
// priority).
func TestAroundReadWrapsBackgroundReads(t *testing.T) {
	var before, after int
	e := &Executor{Base: t.TempDir(), BackgroundNice: 5, AroundRead: func() func() {
		before++
		return func() { after++ }
	}}
	defer e.Close()
	e.Exec(sm.FileOp{Op: sm.OpWrite, Path: "seg", Data: []byte("records")})
	e.Exec(sm.FileOp{Op: sm.OpRead, Path: "seg"})
	e.Exec(sm.FileOp{Op: sm.OpRead, Path: "seg", Bulk: true})
	e.Compute(sm.Compute{Kind: sm.ComputeEncodeTo})
	if before != 0 || after != 0 {
		t.Fatalf("hook ran %d/%d times for other operations", before, after)
	}
	for i, nice := range []int{5, 0} {
		e.BackgroundNice = nice
		if d := e.Exec(sm.FileOp{Op: sm.OpRead, Path: "seg", Background: true}); d.Err != sm.IOOK || string(d.Data) != "records" {
			t.Fatalf("nice %d: read %+v", nice, d)
		}
		if before != i+1 || after != i+1 {
			t.Fatalf("nice %d: before %d, after %d", nice, before, after)
		}
	}
}
