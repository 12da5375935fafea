package simdisk

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"xce/sm"
)

// TestAppendCrashKeepsSyncedPrefix: a WAL-style file (append, fsync,
// append) may lose or tear only what was appended after the fsync.
func TestAppendCrashKeepsSyncedPrefix(t *testing.T) {
	d := New()
	must := func(op sm.FileOp) {
		t.Helper()
		if r := d.Exec(op, 1); r.Err != sm.IOOK {
			t.Fatalf("%s %s: %v %s", op.Op, op.Path, r.Err, r.Detail)
		}
	}
	synced := bytes.Repeat([]byte{'a'}, 1500)
	more := bytes.Repeat([]byte{'b'}, 3000)
	must(sm.FileOp{Op: sm.OpAppend, Path: "wal", Data: synced})
	must(sm.FileOp{Op: sm.OpFsync, Path: "wal"})
	must(sm.FileOp{Op: sm.OpFsyncDir, Path: ""})
	must(sm.FileOp{Op: sm.OpAppend, Path: "wal", Data: more})
	if r := d.Exec(sm.FileOp{Op: sm.OpRead, Path: "wal"}, 1); len(r.Data) != 4500 {
		t.Fatalf("append: read %d bytes, want 4500", len(r.Data))
	}
	states := d.CrashStates()
	sawTorn := false
	for _, st := range states {
		got := st.Files()["wal"]
		if !bytes.HasPrefix(got, synced) {
			t.Fatalf("crash state lost the fsync'd prefix: %d bytes, prefix ok=%v", len(got), bytes.HasPrefix(got, synced[:min(len(got), len(synced))]))
		}
		if len(got) > len(synced) && len(got) < 4500 {
			sawTorn = true
		}
	}
	if !sawTorn {
		t.Fatalf("no torn append among %d crash states", len(states))
	}
	for seed := uint64(0); seed < 200; seed++ {
		c := d.Clone()
		c.Crash(rand.New(rand.NewPCG(seed, 1)))
		if got := c.Files()["wal"]; !bytes.HasPrefix(got, synced) {
			t.Fatalf("seed %d: random crash lost the fsync'd prefix (%d bytes)", seed, len(got))
		}
	}
}
