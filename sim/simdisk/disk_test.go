package simdisk

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/xce-hpc/xce/sm"
)

// base is the fixture most op tests start from: dir "conf" holding file
// "conf/a" ("hello", mtime 7) and empty dir "conf/sub", all durable.
func base(t *testing.T) *Disk {
	t.Helper()
	d := New()
	if err := d.PutDurable("conf/a", []byte("hello"), 7); err != nil {
		t.Fatal(err)
	}
	run(t, d, opMkdir("conf/sub"), opFsyncDir("conf"))
	return d
}

func TestExec(t *testing.T) {
	badPaths := []string{"", "/abs", "a//b", "../x", "conf/../conf/a", "conf/./a", "conf/", "x\x00y", strings.Repeat("x", MaxPathLen+1)}
	type tc struct {
		name    string
		op      sm.FileOp
		wantErr sm.IOErr
		check   func(t *testing.T, d *Disk, r sm.IODone)
	}
	unchanged := func(t *testing.T, d *Disk, _ sm.IODone) {
		t.Helper()
		if want := base(t).Fingerprint(); d.Fingerprint() != want {
			t.Errorf("failed op changed the tree:\n%s", d)
		}
	}
	hasFile := func(path, want string) func(*testing.T, *Disk, sm.IODone) {
		return func(t *testing.T, d *Disk, _ sm.IODone) {
			t.Helper()
			if got, ok := fileIn(d, path); !ok || got != want {
				t.Errorf("%s = %q, %v; want %q", path, got, ok, want)
			}
		}
	}
	noFile := func(path string) func(*testing.T, *Disk, sm.IODone) {
		return func(t *testing.T, d *Disk, _ sm.IODone) {
			t.Helper()
			if _, ok := fileIn(d, path); ok {
				t.Errorf("%s still exists", path)
			}
		}
	}
	cases := []tc{
		{"read ok", opRead("conf/a"), sm.IOOK, func(t *testing.T, _ *Disk, r sm.IODone) {
			if string(r.Data) != "hello" || r.ModTime != 7 {
				t.Errorf("read = %q mtime %d", r.Data, r.ModTime)
			}
		}},
		{"read missing", opRead("conf/nope"), sm.IONotExist, unchanged},
		{"read missing parent", opRead("nodir/a"), sm.IONotExist, unchanged},
		{"read dir", opRead("conf"), sm.IOFailed, unchanged},
		{"read root", opRead(""), sm.IOFailed, unchanged},
		{"read through file", opRead("conf/a/b"), sm.IOFailed, unchanged},
		{"read too big", sm.FileOp{Op: sm.OpRead, Path: "conf/a", MaxSize: 4}, sm.IOTooBig, unchanged},
		{"read at limit", sm.FileOp{Op: sm.OpRead, Path: "conf/a", MaxSize: 5}, sm.IOOK, nil},
		{"write new", opWrite("conf/b", "xyz"), sm.IOOK, hasFile("conf/b", "xyz")},
		{"write truncates", opWrite("conf/a", "hi"), sm.IOOK, hasFile("conf/a", "hi")},
		{"write empty", opWrite("conf/a", ""), sm.IOOK, hasFile("conf/a", "")},
		{"write missing parent", opWrite("nodir/b", "x"), sm.IONotExist, unchanged},
		{"write onto dir", opWrite("conf/sub", "x"), sm.IOFailed, unchanged},
		{"write through file", opWrite("conf/a/b", "x"), sm.IOFailed, unchanged},
		{"fsync file", opFsync("conf/a"), sm.IOOK, unchanged},
		{"fsync missing", opFsync("conf/nope"), sm.IONotExist, unchanged},
		{"fsyncdir root", opFsyncDir(""), sm.IOOK, unchanged},
		{"fsyncdir conf", opFsyncDir("conf"), sm.IOOK, unchanged},
		{"fsyncdir missing", opFsyncDir("nodir"), sm.IONotExist, unchanged},
		{"rename", opRename("conf/a", "conf/b"), sm.IOOK, func(t *testing.T, d *Disk, r sm.IODone) {
			hasFile("conf/b", "hello")(t, d, r)
			noFile("conf/a")(t, d, r)
		}},
		{"rename dir", opRename("conf/sub", "conf/sub2"), sm.IOOK, func(t *testing.T, d *Disk, _ sm.IODone) {
			if got := d.Dirs(); !slices.Equal(got, []string{"conf", "conf/sub2"}) {
				t.Errorf("dirs = %q", got)
			}
		}},
		{"rename same name", opRename("conf/a", "conf/a"), sm.IOOK, unchanged},
		{"rename missing source", opRename("conf/nope", "conf/b"), sm.IONotExist, unchanged},
		{"rename missing target dir", opRename("conf/a", "nodir/b"), sm.IONotExist, unchanged},
		{"rename cross dir", opRename("conf/a", "conf/sub/a"), sm.IOFailed, unchanged},
		{"rename file over dir", opRename("conf/a", "conf/sub"), sm.IOFailed, unchanged},
		{"rename dir over file", opRename("conf/sub", "conf/a"), sm.IOFailed, unchanged},
		{"list root", opList(""), sm.IOOK, func(t *testing.T, _ *Disk, r sm.IODone) {
			if len(r.Entries) != 1 || r.Entries[0].Name != "conf" {
				t.Errorf("entries = %+v", r.Entries)
			}
		}},
		{"list conf", opList("conf"), sm.IOOK, func(t *testing.T, _ *Disk, r sm.IODone) {
			want := []sm.DirEntry{{Name: "a", Size: 5, ModTime: 7}, {Name: "sub", ModTime: 1000}}
			if !slices.Equal(r.Entries, want) {
				t.Errorf("entries = %+v, want %+v", r.Entries, want)
			}
		}},
		{"list empty dir", opList("conf/sub"), sm.IOOK, func(t *testing.T, _ *Disk, r sm.IODone) {
			if r.Entries == nil || len(r.Entries) != 0 {
				t.Errorf("entries = %#v, want empty non-nil", r.Entries)
			}
		}},
		{"list missing", opList("nodir"), sm.IONotExist, unchanged},
		{"list file", opList("conf/a"), sm.IOFailed, unchanged},
		{"remove file", opRemove("conf/a"), sm.IOOK, noFile("conf/a")},
		{"remove empty dir", opRemove("conf/sub"), sm.IOOK, func(t *testing.T, d *Disk, _ sm.IODone) {
			if got := d.Dirs(); !slices.Equal(got, []string{"conf"}) {
				t.Errorf("dirs = %q", got)
			}
		}},
		{"remove non-empty dir", opRemove("conf"), sm.IOFailed, unchanged},
		{"remove missing", opRemove("conf/nope"), sm.IONotExist, unchanged},
		{"mkdir new", opMkdir("data"), sm.IOOK, func(t *testing.T, d *Disk, _ sm.IODone) {
			if got := d.Dirs(); !slices.Equal(got, []string{"conf", "conf/sub", "data"}) {
				t.Errorf("dirs = %q", got)
			}
		}},
		{"mkdir exists", opMkdir("conf"), sm.IOOK, unchanged},
		{"mkdir over file", opMkdir("conf/a"), sm.IOFailed, unchanged},
		{"mkdir missing parent", opMkdir("x/y"), sm.IONotExist, unchanged},
		{"unknown op", sm.FileOp{Op: 99, Path: "conf/a"}, sm.IOFailed, unchanged},
		{"zero op", sm.FileOp{}, sm.IOFailed, unchanged},
	}
	for _, kind := range []sm.OpKind{sm.OpRead, sm.OpWrite, sm.OpFsync, sm.OpRename, sm.OpFsyncDir, sm.OpList, sm.OpRemove, sm.OpMkdir} {
		for _, p := range badPaths {
			if p == "" && (kind == sm.OpFsync || kind == sm.OpFsyncDir || kind == sm.OpList || kind == sm.OpRead) {
				continue // "" is the base directory for these
			}
			op := sm.FileOp{Op: kind, Path: p, To: "conf/z", Data: []byte("x")}
			cases = append(cases, tc{"bad path " + kind.String() + " " + strings.ToValidUTF8(p[:min(len(p), 20)], "?"), op, sm.IOFailed, unchanged})
			if kind == sm.OpRename {
				op = sm.FileOp{Op: kind, Path: "conf/a", To: p}
				cases = append(cases, tc{"bad target " + strings.ToValidUTF8(p[:min(len(p), 20)], "?"), op, sm.IOFailed, unchanged})
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := base(t)
			c.op.ID = 42
			r := d.Exec(c.op, 1000)
			if r.ID != 42 {
				t.Errorf("ID = %d", r.ID)
			}
			if r.Err != c.wantErr {
				t.Fatalf("err = %s (%s), want %s", r.Err, r.Detail, c.wantErr)
			}
			if (r.Err != sm.IOOK) != (r.Detail != "") {
				t.Errorf("detail %q with err %s", r.Detail, r.Err)
			}
			if c.check != nil {
				c.check(t, d, r)
			}
		})
	}
}

func TestRenameReplaces(t *testing.T) {
	d := base(t)
	run(t, d, opWrite("conf/b", "new"), opRename("conf/b", "conf/a"))
	if got, _ := fileIn(d, "conf/a"); got != "new" {
		t.Fatalf("conf/a = %q", got)
	}
	if got := d.Paths(); !slices.Equal(got, []string{"conf/a"}) {
		t.Fatalf("paths = %q", got)
	}
	run(t, d, opMkdir("conf/d2"), opRename("conf/sub", "conf/d2"))
	if got := d.Dirs(); !slices.Equal(got, []string{"conf", "conf/d2"}) {
		t.Fatalf("dirs = %q", got)
	}
	run(t, d, opWrite("conf/d2/x", ""))
	run(t, d, opMkdir("conf/d3"))
	if r := d.Exec(opRename("conf/d3", "conf/d2"), 0); r.Err != sm.IOFailed {
		t.Fatalf("rename over non-empty dir: %s", r.Err)
	}
}

func TestWriteSetsMtimeAndCopies(t *testing.T) {
	d := New()
	buf := []byte("abc")
	if r := d.Exec(sm.FileOp{Op: sm.OpWrite, Path: "f", Data: buf}, 55); r.Err != sm.IOOK {
		t.Fatal(r.Detail)
	}
	buf[0] = 'X'
	r := d.Exec(opRead("f"), 0)
	if string(r.Data) != "abc" || r.ModTime != 55 {
		t.Fatalf("read = %q mtime %d; the disk must copy written data", r.Data, r.ModTime)
	}
	r.Data[1] = 'Y'
	if got, _ := fileIn(d, "f"); got != "abc" {
		t.Fatalf("mutating a read result changed the file: %q", got)
	}
	run(t, d, opWrite("f", ""))
	if r := d.Exec(opRead("f"), 0); r.Data == nil || len(r.Data) != 0 {
		t.Fatalf("read of empty file = %#v, want empty non-nil", r.Data)
	}
}

func TestFaults(t *testing.T) {
	cases := []struct {
		name   string
		faults Faults
		op     sm.FileOp
		want   sm.IOErr
	}{
		{"write err", Faults{WriteErr: 1}, opWrite("conf/a", "new"), sm.IOFailed},
		{"write err new file", Faults{WriteErr: 1}, opWrite("conf/b", "new"), sm.IOFailed},
		{"no space", Faults{NoSpace: 1}, opWrite("conf/b", "new"), sm.IONoSpace},
		{"fsync err", Faults{FsyncErr: 1}, opFsync("conf/a"), sm.IOFailed},
		{"fsyncdir err", Faults{FsyncErr: 1}, opFsyncDir("conf"), sm.IOFailed},
		{"read err", Faults{ReadErr: 1}, opRead("conf/a"), sm.IOFailed},
		{"read err spares missing", Faults{ReadErr: 1}, opRead("conf/nope"), sm.IONotExist},
		{"write err spares read", Faults{WriteErr: 1, NoSpace: 1, FsyncErr: 1}, opRead("conf/a"), sm.IOOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := New()
			if err := d.PutDurable("conf/a", []byte("old"), 1); err != nil {
				t.Fatal(err)
			}
			before := d.Fingerprint()
			d.SetFaults(c.faults)
			d.SetRand(rand.New(rand.NewPCG(1, 2)))
			r := d.Exec(c.op, 9)
			if r.Err != c.want {
				t.Fatalf("err = %s (%s), want %s", r.Err, r.Detail, c.want)
			}
			if r.Err != sm.IOOK && d.Fingerprint() != before {
				t.Fatalf("failed op changed the tree:\n%s", d)
			}
		})
	}

	// A failed fsync makes nothing durable.
	d := New()
	run(t, d, opMkdir("data"), opFsyncDir(""), opWrite("data/x", "v1"))
	d.SetFaults(Faults{FsyncErr: 1})
	d.SetRand(rand.New(rand.NewPCG(3, 4)))
	if r := d.Exec(opFsync("data/x"), 0); r.Err != sm.IOFailed {
		t.Fatalf("fsync err = %s", r.Err)
	}
	if r := d.Exec(opFsyncDir("data"), 0); r.Err != sm.IOFailed {
		t.Fatalf("fsyncdir err = %s", r.Err)
	}
	if got := d.DurableFiles(); len(got) != 0 {
		t.Fatalf("failed fsyncs made %v durable", got)
	}

	// Rates between 0 and 1 fire sometimes, deterministically per seed.
	count := func(seed uint64) int {
		d := New()
		d.SetFaults(Faults{WriteErr: 0.3})
		d.SetRand(rand.New(rand.NewPCG(seed, 0)))
		n := 0
		for range 1000 {
			if d.Exec(opWrite("f", "x"), 0).Err != sm.IOOK {
				n++
			}
		}
		return n
	}
	if a, b := count(5), count(5); a != b || a < 200 || a > 400 {
		t.Fatalf("WriteErr 0.3 fired %d and %d times in 1000 writes", a, b)
	}
}

func TestNoRandNoFaults(t *testing.T) {
	d := New()
	d.SetFaults(Faults{WriteErr: 1, ReadErr: 1})
	run(t, d, opWrite("f", "x"), opRead("f"))
}

func TestPutDurable(t *testing.T) {
	d := New()
	if err := d.PutDurable("a/b/c", []byte("x"), 3); err != nil {
		t.Fatal(err)
	}
	if d.Pending() {
		t.Fatalf("PutDurable left pending state:\n%s", d)
	}
	if got := d.DurableFiles(); len(got) != 1 || string(got["a/b/c"]) != "x" {
		t.Fatalf("durable = %q", got)
	}
	if err := d.PutDurable("a/b/c/d", nil, 3); err == nil {
		t.Fatal("PutDurable through a file succeeded")
	}
	if err := d.PutDurable("a/b", nil, 3); err == nil {
		t.Fatal("PutDurable onto a directory succeeded")
	}
	if err := d.PutDurable("a//b", nil, 3); err == nil {
		t.Fatal("PutDurable with a bad path succeeded")
	}
}

func TestCloneIndependent(t *testing.T) {
	d := base(t)
	run(t, d, opWrite("conf/b", "unsynced"), opRemove("conf/a"))
	c := d.Clone()
	if c.Fingerprint() != d.Fingerprint() || c.String() != d.String() {
		t.Fatalf("clone differs:\n%s\nvs\n%s", c, d)
	}
	fps := func(states []*Disk) [][32]byte {
		var out [][32]byte
		for _, s := range states {
			out = append(out, s.Fingerprint())
		}
		return out
	}
	if !slices.Equal(fps(c.CrashStates()), fps(d.CrashStates())) {
		t.Fatal("clone has different crash states")
	}
	before := d.Fingerprint()
	beforeStr := d.String()
	run(t, c, opWrite("conf/b", "changed"), opFsync("conf/b"), opFsyncDir("conf"), opMkdir("data"))
	c.Crash(rand.New(rand.NewPCG(1, 1)))
	if d.Fingerprint() != before || d.String() != beforeStr {
		t.Fatalf("changing the clone changed the original:\n%s", d)
	}
}

func TestWipe(t *testing.T) {
	d := base(t)
	run(t, d, opWrite("conf/b", "x"))
	d.Wipe()
	if len(d.Files()) != 0 || len(d.Dirs()) != 0 || d.Pending() {
		t.Fatalf("wiped disk not empty:\n%s", d)
	}
	if r := d.Exec(opList(""), 0); r.Err != sm.IOOK || len(r.Entries) != 0 {
		t.Fatalf("list after wipe = %+v", r)
	}
	run(t, d, opMkdir("conf"), opWrite("conf/x", "y"))
}

func TestCorrupt(t *testing.T) {
	d := New()
	if err := d.PutDurable("conf/a", []byte("hello world"), 1); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	if !d.Corrupt("conf/a", r) {
		t.Fatal("Corrupt failed on an existing file")
	}
	got, _ := fileIn(d, "conf/a")
	if len(got) != 11 || bitsDiffer([]byte(got), []byte("hello world")) != 1 {
		t.Fatalf("after Corrupt: %q, want one flipped bit", got)
	}
	if dur := d.DurableFiles()["conf/a"]; string(dur) != got {
		t.Fatalf("durable %q != current %q: bit rot must be at rest", dur, got)
	}
	d.Crash(nil)
	if again, _ := fileIn(d, "conf/a"); again != got {
		t.Fatalf("crash undid corruption: %q", again)
	}
	if d.Corrupt("conf/nope", r) || d.Corrupt("conf", r) || d.Corrupt("", r) {
		t.Fatal("Corrupt of a missing file or a directory reported success")
	}
	run(t, d, opWrite("conf/empty", ""))
	if d.Corrupt("conf/empty", r) {
		t.Fatal("Corrupt of an empty file reported success")
	}
	// Unsynced new data: both versions rot at the same bit.
	run(t, d, opWrite("conf/a", "HELLO WORLD, longer"))
	if !d.Corrupt("conf/a", r) {
		t.Fatal("Corrupt failed")
	}
	cur, _ := fileIn(d, "conf/a")
	if bitsDiffer([]byte(cur), []byte("HELLO WORLD, longer")) != 1 {
		t.Fatalf("current after Corrupt: %q", cur)
	}
	if n := bitsDiffer(d.DurableFiles()["conf/a"], []byte(got)); n > 1 {
		t.Fatalf("durable data changed in %d bits", n)
	}
}

func bitsDiffer(a, b []byte) int {
	if len(a) != len(b) {
		return -1
	}
	n := 0
	for i := range a {
		x := a[i] ^ b[i]
		for ; x != 0; x &= x - 1 {
			n++
		}
	}
	return n
}

func TestPathsAndFiles(t *testing.T) {
	d := base(t)
	run(t, d, opMkdir("data"), opWrite("data/term", "3\n"), opWrite("conf/a.x", "1"))
	if got, want := d.Paths(), []string{"conf/a", "conf/a.x", "data/term"}; !slices.Equal(got, want) {
		t.Fatalf("Paths = %q, want %q", got, want)
	}
	f := d.Files()
	if len(f) != 3 || !bytes.Equal(f["data/term"], []byte("3\n")) {
		t.Fatalf("Files = %q", f)
	}
	f["conf/a"][0] = 'X'
	if got, _ := fileIn(d, "conf/a"); got != "hello" {
		t.Fatal("Files must return copies")
	}
	if got := d.DurableFiles(); len(got) != 1 || string(got["conf/a"]) != "hello" {
		t.Fatalf("DurableFiles = %q", got)
	}
}

// TestRandomOpsNeverPanic throws random, often invalid, operations at a
// disk, crashing now and then.
func TestRandomOpsNeverPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 78))
	names := []string{"", "a", "b", "a/x", "a/y", "b/x", "a/x/z", "..", "a//x", "/a", "a/", "c", "a/b"}
	d := New()
	d.SetRand(rand.New(rand.NewPCG(1, 2)))
	d.SetFaults(Faults{WriteErr: 0.05, NoSpace: 0.05, FsyncErr: 0.05, ReadErr: 0.05})
	for i := range 20000 {
		op := sm.FileOp{
			Op:      sm.OpKind(r.IntN(10)),
			Path:    names[r.IntN(len(names))],
			To:      names[r.IntN(len(names))],
			Data:    bytes.Repeat([]byte{'d'}, r.IntN(1500)),
			MaxSize: int64(r.IntN(2000)) - 100,
		}
		d.Exec(op, int64(i))
		switch r.IntN(200) {
		case 0:
			d.Crash(r)
			if d.Pending() {
				t.Fatalf("state after crash not durable:\n%s", d)
			}
		case 1:
			d.Corrupt(names[r.IntN(len(names))], r)
		case 2:
			d.Wipe()
		}
	}
}

func BenchmarkExecWriteFsync(b *testing.B) {
	d := New()
	run(b, d, opMkdir("data"), opFsyncDir(""))
	w := opWrite("data/term", "12345\n")
	f := opFsync("data/term")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if d.Exec(w, int64(i)).Err != sm.IOOK || d.Exec(f, int64(i)).Err != sm.IOOK {
			b.Fatal("op failed")
		}
	}
}

func TestZeroDisk(t *testing.T) {
	var d Disk
	if r := d.Exec(opList(""), 0); r.Err != sm.IOOK {
		t.Fatalf("list on zero Disk: %s", r.Err)
	}
	var z Disk
	z.Crash(nil)
	if len(z.CrashStates()) != 1 || len(z.Files()) != 0 || z.Clone() == nil {
		t.Fatal("zero Disk misbehaves")
	}
}

// Gen moves with every call that may change the disk, and only with them.
func TestGenCountsChanges(t *testing.T) {
	d := New()
	r := rand.New(rand.NewPCG(1, 2))
	last := d.Gen()
	step := func(what string, change bool, f func()) {
		t.Helper()
		f()
		if moved := d.Gen() != last; moved != change {
			t.Fatalf("%s: Gen moved %v, want %v", what, moved, change)
		}
		last = d.Gen()
	}
	step("Exec", true, func() { d.Exec(sm.FileOp{Op: sm.OpMkdir, Path: "data"}, 1) })
	step("Exec append", true, func() { d.Exec(sm.FileOp{Op: sm.OpAppend, Path: "data/f", Data: []byte("x")}, 1) })
	step("Peek", false, func() { d.Peek("data", false, func(string, []byte) {}) })
	step("DurableData", false, func() { d.DurableData("data/f") })
	step("ReadFile", false, func() { d.ReadFile("data/f") })
	step("Files", false, func() { d.Files() })
	step("Crash", true, func() { d.Crash(r) })
	step("PutDurable", true, func() { _ = d.PutDurable("data/g", []byte("y"), 2) })
	step("Corrupt", true, func() { d.Corrupt("data/g", r) })
	step("Compute", true, func() { d.Compute(sm.Compute{}, 3) })
	step("Wipe", true, func() { d.Wipe() })
}
