package simdisk

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xce-hpc/xce/sm"
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

// appendTo appends data to path, which must succeed.
func appendTo(t *testing.T, d *Disk, path, data string) {
	t.Helper()
	if r := d.Exec(sm.FileOp{Op: sm.OpAppend, Path: path, Data: []byte(data)}, 1); r.Err != sm.IOOK {
		t.Fatalf("append %q to %s: %v %s", data, path, r.Err, r.Detail)
	}
}

// TestAppendFillsSpareCapacity: an append to a file whose data no one
// else extends writes into the spare capacity instead of copying the
// whole file (a log grown by n appends cost O(n^2) bytes copied).
func TestAppendFillsSpareCapacity(t *testing.T) {
	d := New()
	appendTo(t, d, "wal", strings.Repeat("a", 100))
	n, _, _ := d.lookup("open", "wal")
	first := &n.data[0]
	for i := 0; i < 10 && len(n.data)+1 <= cap(n.data); i++ {
		appendTo(t, d, "wal", "b")
		if &n.data[0] != first {
			t.Fatalf("append %d (len %d, cap %d) copied the file", i, len(n.data), cap(n.data))
		}
	}
}

// TestAppendKeepsSharedBytes: an append in place never changes bytes
// another holder of the file's data sees: a clone (which shares the
// array), or a clone taken before a failed fsync dropped the new data
// (after which the file's data is its durable, shorter, slice).
func TestAppendKeepsSharedBytes(t *testing.T) {
	d := New()
	run(t, d, opWrite("f", "abc"), opFsync("f"), opFsyncDir(""))
	c := d.Clone()
	appendTo(t, d, "f", "X")
	appendTo(t, c, "f", "Y")
	if got, _ := fileIn(d, "f"); got != "abcX" {
		t.Fatalf("original after both appended: %q, want abcX", got)
	}
	if got, _ := fileIn(c, "f"); got != "abcY" {
		t.Fatalf("clone after both appended: %q, want abcY", got)
	}

	g := New()
	run(t, g, opWrite("f", "abc"), opFsync("f"), opFsyncDir(""))
	appendTo(t, g, "f", "XZ")
	before := g.Clone() // shares "abcXZ"
	g.SetFaults(Faults{FsyncErr: 1, FsyncGate: true})
	g.SetRand(rand.New(rand.NewPCG(1, 2)))
	if r := g.Exec(opFsync("f"), 1); r.Err == sm.IOOK {
		t.Fatal("fsync with FsyncErr 1 succeeded")
	}
	if got, _ := fileIn(g, "f"); got != "abc" {
		t.Fatalf("after the failed fsync (fsyncgate): %q, want abc", got)
	}
	appendTo(t, g, "f", "W")
	if got, _ := fileIn(g, "f"); got != "abcW" {
		t.Fatalf("append after the dropped data: %q, want abcW", got)
	}
	if got, _ := fileIn(before, "f"); got != "abcXZ" {
		t.Fatalf("clone taken before the failed fsync: %q, want abcXZ", got)
	}
}

// TestDurableDataIsDurableFile: DurableData finds what DurableFile finds,
// path for path (a trailing slash or an empty component finds nothing),
// and shares the disk's bytes instead of copying them.
func TestDurableDataIsDurableFile(t *testing.T) {
	d := New()
	run(t, d, opMkdir("a"), opFsyncDir(""), opWrite("a/f", "synced"), opFsync("a/f"), opFsyncDir("a"))
	appendTo(t, d, "a/f", " and not")
	run(t, d, opWrite("a/g", "never synced"))
	for _, p := range []string{"a/f", "a/g", "a", "a/", "a/f/", "a//f", "", "b", "b/f"} {
		want, wok := d.DurableFile(p)
		got, ok := d.DurableData(p)
		if ok != wok || string(got) != string(want) {
			t.Errorf("%q: DurableData %q %v, DurableFile %q %v", p, got, ok, want, wok)
		}
	}
	a, _ := d.DurableData("a/f")
	b, _ := d.DurableData("a/f")
	if &a[0] != &b[0] {
		t.Error("DurableData copied the bytes")
	}
}
