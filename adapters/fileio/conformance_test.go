package fileio

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
)

// The conformance tests run the same FileOp sequences against the real
// Executor (in a temp dir) and against simdisk, and require the same
// completions (Err, Data, entry names and sizes; not Detail or mtimes) and
// the same final file tree. Known, deliberate differences are pinned by
// TestConformanceKnownDifferences.

// pair executes every op on both executors.
type pair struct {
	t    *testing.T
	real *Executor
	sim  *simdisk.Disk
	id   uint64
}

func newPair(t *testing.T) *pair {
	t.Helper()
	return &pair{t: t, real: &Executor{Base: t.TempDir()}, sim: simdisk.New()}
}

func wallNow() int64 { return time.Now().UnixNano() }

// do runs op on both sides, reports any difference, and checks the
// real completion against want.
func (p *pair) do(op sm.FileOp, want sm.IOErr) sm.IODone {
	p.t.Helper()
	p.id++
	op.ID = p.id
	r := p.real.Exec(op)
	s := p.sim.Exec(op, wallNow())
	if d := diffDone(r, s); d != "" {
		p.t.Errorf("op %d %s %q -> %q: real and simdisk differ: %s\n  real: %s\n  sim:  %s", op.ID, op.Op, op.Path, op.To, d, fmtDone(r), fmtDone(s))
	}
	if r.ID != op.ID || s.ID != op.ID {
		p.t.Errorf("op %d: completion ids real=%d sim=%d", op.ID, r.ID, s.ID)
	}
	if r.Err != want {
		p.t.Errorf("op %d %s %q: got %v (%s), want %v", op.ID, op.Op, op.Path, r.Err, r.Detail, want)
	}
	if r.Err != sm.IOOK && r.Detail == "" {
		p.t.Errorf("op %d %s %q: failure %v without Detail", op.ID, op.Op, op.Path, r.Err)
	}
	return r
}

func diffDone(a, b sm.IODone) string {
	var d []string
	if a.Err != b.Err {
		d = append(d, fmt.Sprintf("Err %v vs %v", a.Err, b.Err))
	}
	if !bytes.Equal(a.Data, b.Data) {
		d = append(d, fmt.Sprintf("Data %q vs %q", a.Data, b.Data))
	}
	if !reflect.DeepEqual(names(a.Entries), names(b.Entries)) {
		d = append(d, fmt.Sprintf("Entries %v vs %v", names(a.Entries), names(b.Entries)))
	}
	if (a.ModTime == 0) != (b.ModTime == 0) {
		d = append(d, fmt.Sprintf("ModTime set: %v vs %v", a.ModTime != 0, b.ModTime != 0))
	}
	return strings.Join(d, "; ")
}

// names renders entries without mtimes.
func names(es []sm.DirEntry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, fmt.Sprintf("%s:%d", e.Name, e.Size))
	}
	return out
}

func fmtDone(d sm.IODone) string {
	return fmt.Sprintf("err=%v data=%d bytes entries=%v detail=%q", d.Err, len(d.Data), names(d.Entries), d.Detail)
}

// realTree returns the files (path -> contents) and directories under base.
func realTree(t *testing.T, base string) (map[string][]byte, []string) {
	t.Helper()
	files := map[string][]byte{}
	var dirs []string
	err := filepath.WalkDir(base, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(base, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if de.IsDir() {
			dirs = append(dirs, rel)
			return nil
		}
		b, err := os.ReadFile(p)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dirs)
	return files, dirs
}

func (p *pair) compareTrees() {
	p.t.Helper()
	files, dirs := realTree(p.t, p.real.Base)
	simFiles, simDirs := p.sim.Files(), p.sim.Dirs()
	if !reflect.DeepEqual(dirs, simDirs) {
		p.t.Errorf("directories differ:\n  real: %v\n  sim:  %v", dirs, simDirs)
	}
	if len(files) != len(simFiles) {
		p.t.Errorf("file sets differ:\n  real: %v\n  sim:  %v", keys(files), keys(simFiles))
	}
	for k, v := range files {
		if sv, ok := simFiles[k]; !ok || !bytes.Equal(v, sv) {
			p.t.Errorf("file %s: real %q, sim %q (present %v)", k, v, sv, ok)
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func testBlob(t *testing.T, name string, queues int) []byte {
	t.Helper()
	c := &schema.ClusterConfig{ConfigGeneration: 1, ClusterName: name, Port: 7000}
	for q := 0; q < queues; q++ {
		c.Queues = append(c.Queues, &schema.Queue{Id: uint32(q + 1), Name: fmt.Sprintf("q%d", q), VisibilityTimeoutS: 30, MaxAttempts: 5})
	}
	b, err := schema.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// saveSeq is the seed 002 §3.2 write procedure as the state machine issues
// it (sm/confsave.go), temp names with operation id op.
func (p *pair) saveSeq(blob []byte, op uint64) string {
	p.t.Helper()
	name := sm.VersionName(sha256.Sum256(blob))
	tmp := fmt.Sprintf("conf/%s.%d.tmp", name, op)
	ptrTmp := fmt.Sprintf("conf/current.%d.tmp", op)
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: sm.ConfDir}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpWrite, Path: tmp, Data: blob}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpFsync, Path: tmp}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRename, Path: tmp, To: "conf/" + name}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpFsyncDir, Path: sm.ConfDir}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpWrite, Path: ptrTmp, Data: sm.PointerContents(name)}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpFsync, Path: ptrTmp}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRename, Path: ptrTmp, To: sm.PointerPath}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpFsyncDir, Path: sm.ConfDir}, sm.IOOK)
	return name
}

func TestConformanceBootDirs(t *testing.T) {
	p := newPair(t)
	p.do(sm.FileOp{Op: sm.OpList, Path: ""}, sm.IOOK) // empty base
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: sm.ConfDir}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: sm.DataDir}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: sm.ConfDir}, sm.IOOK) // EEXIST is success
	p.do(sm.FileOp{Op: sm.OpFsyncDir, Path: ""}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpFsync, Path: ""}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRead, Path: sm.TermPath, MaxSize: 64}, sm.IONotExist)
	p.do(sm.FileOp{Op: sm.OpRead, Path: sm.PointerPath, MaxSize: 256}, sm.IONotExist)
	p.do(sm.FileOp{Op: sm.OpRead, Path: "nodir/file"}, sm.IONotExist)
	p.do(sm.FileOp{Op: sm.OpList, Path: ""}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpList, Path: sm.ConfDir}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: "nodir/sub"}, sm.IONotExist)
	p.compareTrees()
}

func TestConformanceConfigSave(t *testing.T) {
	p := newPair(t)
	old := testBlob(t, "old", 2)
	cur := testBlob(t, "cur", 5)
	oldName := p.saveSeq(old, 1)
	curName := p.saveSeq(cur, 7) // rename over the existing conf/current
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "conf/current.99.tmp", Data: []byte("stale")}, sm.IOOK)

	d := p.do(sm.FileOp{Op: sm.OpRead, Path: sm.PointerPath, MaxSize: 256}, sm.IOOK)
	if name, err := sm.ParsePointer(d.Data); err != nil || name != curName {
		t.Errorf("pointer names %q (%v), want %q", name, err, curName)
	}
	d = p.do(sm.FileOp{Op: sm.OpRead, Path: "conf/" + curName, MaxSize: sm.MaxConfigSize}, sm.IOOK)
	if !bytes.Equal(d.Data, cur) || d.ModTime == 0 {
		t.Errorf("read back %d bytes mtime %d, want the %d-byte blob", len(d.Data), d.ModTime, len(cur))
	}
	// The trim pass: read the pointer, list, remove what TrimPlan says, fsync.
	l := p.do(sm.FileOp{Op: sm.OpList, Path: sm.ConfDir}, sm.IOOK)
	want := []string{"cluster.bin." + oldName[len("cluster.bin."):], curName, "current", "current.99.tmp"}
	var got []string
	for _, e := range l.Entries {
		got = append(got, e.Name)
	}
	slices.Sort(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("conf/ lists %v, want %v", got, want)
	}
	for _, name := range sm.TrimPlan(l.Entries, curName, 1, nil) {
		p.do(sm.FileOp{Op: sm.OpRemove, Path: "conf/" + name}, sm.IOOK)
	}
	p.do(sm.FileOp{Op: sm.OpFsyncDir, Path: sm.ConfDir}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpList, Path: sm.ConfDir}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRead, Path: "conf/" + oldName}, sm.IONotExist)
	p.compareTrees()
	files, _ := realTree(t, p.real.Base)
	if len(files) != 2 || !bytes.Equal(files[sm.PointerPath], sm.PointerContents(curName)) {
		t.Errorf("after trim: %v", keys(files))
	}
}

func TestConformanceReads(t *testing.T) {
	p := newPair(t)
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: "d"}, sm.IOOK)
	big := bytes.Repeat([]byte("x"), 5000)
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "d/big", Data: big}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRead, Path: "d/big", MaxSize: 4999}, sm.IOTooBig)
	p.do(sm.FileOp{Op: sm.OpRead, Path: "d/big", MaxSize: 5000}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRead, Path: "d/big"}, sm.IOOK) // MaxSize 0: no limit
	p.do(sm.FileOp{Op: sm.OpRead, Path: "d/big", MaxSize: 1}, sm.IOTooBig)
	// Read after write, without fsync, and after overwrite (O_TRUNC).
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "d/f", Data: []byte("first, longer contents")}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRead, Path: "d/f"}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "d/f", Data: []byte("second")}, sm.IOOK)
	if d := p.do(sm.FileOp{Op: sm.OpRead, Path: "d/f", MaxSize: 100}, sm.IOOK); string(d.Data) != "second" {
		t.Errorf("read after overwrite = %q", d.Data)
	}
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "d/empty"}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRead, Path: "d/empty", MaxSize: 10}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRead, Path: "d", MaxSize: 10}, sm.IOFailed)            // a directory
	p.do(sm.FileOp{Op: sm.OpRead, Path: ""}, sm.IOFailed)                          // the base directory
	p.do(sm.FileOp{Op: sm.OpRead, Path: "d/f/x"}, sm.IOFailed)                     // through a file
	p.do(sm.FileOp{Op: sm.OpList, Path: "d"}, sm.IOOK)                             // sizes 5000, 0, 6
	p.do(sm.FileOp{Op: sm.OpList, Path: "d/f"}, sm.IOFailed)                       // not a directory
	p.do(sm.FileOp{Op: sm.OpList, Path: "missing"}, sm.IONotExist)                 //
	p.do(sm.FileOp{Op: sm.OpFsync, Path: "d/missing"}, sm.IONotExist)              //
	p.do(sm.FileOp{Op: sm.OpFsyncDir, Path: "missing"}, sm.IONotExist)             //
	p.do(sm.FileOp{Op: sm.OpFsync, Path: "d"}, sm.IOOK)                            // fsync of a dir
	p.do(sm.FileOp{Op: sm.OpFsyncDir, Path: "d/f"}, sm.IOOK)                       // and of a file
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "d", Data: []byte("x")}, sm.IOFailed)     // a directory
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "d/f/x", Data: []byte("x")}, sm.IOFailed) // through a file
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "nodir/x", Data: []byte("x")}, sm.IONotExist)
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: "d/f"}, sm.IOFailed) // exists, not a directory
	p.compareTrees()
}

func TestConformanceAppend(t *testing.T) {
	p := newPair(t)
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: "wal"}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpAppend, Path: "wal/seg", Data: []byte("rec1|")}, sm.IOOK) // creates
	p.do(sm.FileOp{Op: sm.OpAppend, Path: "wal/seg", Data: []byte("rec2|")}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpAppend, Path: "wal/seg"}, sm.IOOK) // empty append
	if d := p.do(sm.FileOp{Op: sm.OpRead, Path: "wal/seg"}, sm.IOOK); string(d.Data) != "rec1|rec2|" {
		t.Errorf("after appends: %q", d.Data)
	}
	p.do(sm.FileOp{Op: sm.OpFsync, Path: "wal/seg"}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpAppend, Path: "wal/seg", Data: bytes.Repeat([]byte("z"), 10000)}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRead, Path: "wal/seg", MaxSize: 10009}, sm.IOTooBig)
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "wal/seg", Data: []byte("reset")}, sm.IOOK) // write truncates
	p.do(sm.FileOp{Op: sm.OpAppend, Path: "wal/seg", Data: []byte("+")}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpList, Path: "wal"}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpAppend, Path: "wal", Data: []byte("x")}, sm.IOFailed)       // a directory
	p.do(sm.FileOp{Op: sm.OpAppend, Path: "nodir/x", Data: []byte("x")}, sm.IONotExist) //
	p.do(sm.FileOp{Op: sm.OpAppend, Path: "wal/seg/x", Data: []byte("x")}, sm.IOFailed) // through a file
	p.do(sm.FileOp{Op: sm.OpAppend, Path: "", Data: []byte("x")}, sm.IOFailed)
	p.do(sm.FileOp{Op: sm.OpAppend, Path: "../x", Data: []byte("x")}, sm.IOFailed)
	p.compareTrees()
}

func TestConformanceRenameRemove(t *testing.T) {
	p := newPair(t)
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: "c"}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "c/a", Data: []byte("aaa")}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "c/b", Data: []byte("bb")}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRename, Path: "c/a", To: "c/b"}, sm.IOOK) // over an existing file
	if d := p.do(sm.FileOp{Op: sm.OpRead, Path: "c/b"}, sm.IOOK); string(d.Data) != "aaa" {
		t.Errorf("rename over: c/b = %q", d.Data)
	}
	p.do(sm.FileOp{Op: sm.OpRead, Path: "c/a"}, sm.IONotExist)
	p.do(sm.FileOp{Op: sm.OpRename, Path: "c/b", To: "c/b"}, sm.IOOK) // same name: no-op
	p.do(sm.FileOp{Op: sm.OpRename, Path: "c/a", To: "c/z"}, sm.IONotExist)
	p.do(sm.FileOp{Op: sm.OpRename, Path: "c/b", To: "nodir/z"}, sm.IONotExist)
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: "c/sub"}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: "c/sub2"}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRename, Path: "c/b", To: "c/sub"}, sm.IOFailed) // file over dir
	p.do(sm.FileOp{Op: sm.OpRename, Path: "c/sub", To: "c/b"}, sm.IOFailed) // dir over file
	p.do(sm.FileOp{Op: sm.OpRename, Path: "c/sub2", To: "c/sub"}, sm.IOOK)  // dir over empty dir
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "c/sub/x", Data: []byte("x")}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: "c/sub3"}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRename, Path: "c/sub3", To: "c/sub"}, sm.IOFailed) // over non-empty dir
	p.do(sm.FileOp{Op: sm.OpRemove, Path: "c/sub"}, sm.IOFailed)               // not empty
	p.do(sm.FileOp{Op: sm.OpRemove, Path: "c/sub3"}, sm.IOOK)                  // empty dir
	p.do(sm.FileOp{Op: sm.OpRemove, Path: "c/sub/x"}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpRemove, Path: "c/sub/x"}, sm.IONotExist)
	p.do(sm.FileOp{Op: sm.OpRemove, Path: "nodir/x"}, sm.IONotExist)
	p.do(sm.FileOp{Op: sm.OpFsyncDir, Path: "c"}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpList, Path: "c"}, sm.IOOK)
	p.compareTrees()
}

func TestConformanceRefusedPaths(t *testing.T) {
	p := newPair(t)
	p.do(sm.FileOp{Op: sm.OpMkdir, Path: "c"}, sm.IOOK)
	p.do(sm.FileOp{Op: sm.OpWrite, Path: "c/f", Data: []byte("f")}, sm.IOOK)
	bad := []string{"../x", "c/../../x", "c/../f", "/etc/passwd", "./c", "c/.", "c//f", "c/", "/", "a\x00b", strings.Repeat("a", MaxPathLen+1)}
	for _, path := range bad {
		for _, op := range []sm.OpKind{sm.OpRead, sm.OpWrite, sm.OpAppend, sm.OpFsync, sm.OpFsyncDir, sm.OpList, sm.OpRemove, sm.OpMkdir} {
			p.do(sm.FileOp{Op: op, Path: path, Data: []byte("x")}, sm.IOFailed)
		}
		p.do(sm.FileOp{Op: sm.OpRename, Path: "c/f", To: path}, sm.IOFailed)
		p.do(sm.FileOp{Op: sm.OpRename, Path: path, To: "c/g"}, sm.IOFailed)
	}
	// "" names the base directory only where simdisk accepts it.
	for _, op := range []sm.OpKind{sm.OpWrite, sm.OpAppend, sm.OpRemove, sm.OpMkdir} {
		p.do(sm.FileOp{Op: op, Path: ""}, sm.IOFailed)
	}
	p.do(sm.FileOp{Op: sm.OpRename, Path: "c/f", To: ""}, sm.IOFailed)
	p.do(sm.FileOp{Op: sm.OpRename, Path: "", To: "c/g"}, sm.IOFailed)
	p.do(sm.FileOp{Op: sm.OpKind(200), Path: "c/f"}, sm.IOFailed)
	p.compareTrees()
}

// TestConformanceKnownDifferences pins where the real file system and
// simdisk deliberately differ, so a change on either side is noticed.
func TestConformanceKnownDifferences(t *testing.T) {
	real := &Executor{Base: t.TempDir()}
	sim := simdisk.New()
	wall := wallNow()
	for _, op := range []sm.FileOp{
		{Op: sm.OpMkdir, Path: "a"}, {Op: sm.OpMkdir, Path: "b"},
		{Op: sm.OpWrite, Path: "a/f", Data: []byte("x")},
	} {
		if r, s := real.Exec(op), sim.Exec(op, wall); r.Err != sm.IOOK || s.Err != sm.IOOK {
			t.Fatalf("setup %v: real %v sim %v", op, r.Err, s.Err)
		}
	}
	// 1. A cross-directory rename works on the real file system; simdisk
	// refuses it (it does not model a rename's two directories). The state
	// machine never issues one.
	op := sm.FileOp{Op: sm.OpRename, Path: "a/f", To: "b/f"}
	if r, s := real.Exec(op), sim.Exec(op, wall); r.Err != sm.IOOK || s.Err != sm.IOFailed {
		t.Errorf("cross-directory rename: real %v (%s), sim %v (%s); want ok / I/O error", r.Err, r.Detail, s.Err, s.Detail)
	}
	// 2. simdisk bounds only the whole path (MaxPathLen), not one name:
	// a component over NAME_MAX (255 bytes) is ENAMETOOLONG for real. The
	// state machine's names are at most ~40 bytes.
	op = sm.FileOp{Op: sm.OpWrite, Path: "a/" + strings.Repeat("n", 256), Data: []byte("x")}
	if r, s := real.Exec(op), sim.Exec(op, wall); r.Err != sm.IOFailed || s.Err != sm.IOOK {
		t.Errorf("256-byte name: real %v (%s), sim %v (%s); want I/O error / ok", r.Err, r.Detail, s.Err, s.Detail)
	}
	// 3. A directory's mtime: the real one moves when entries are added or
	// removed; simdisk keeps the mkdir time. (mtimes are not compared
	// elsewhere; the state machine only uses files' mtimes.)
	time.Sleep(10 * time.Millisecond)
	listBase := sm.FileOp{Op: sm.OpList, Path: ""}
	before := map[string]int64{}
	for _, e := range sim.Exec(listBase, wall).Entries {
		before[e.Name] = e.ModTime
	}
	op = sm.FileOp{Op: sm.OpWrite, Path: "b/new", Data: []byte("x")}
	sim.Exec(op, wallNow())
	for _, e := range sim.Exec(listBase, wallNow()).Entries {
		if e.Name == "b" && e.ModTime != before["b"] {
			t.Errorf("simdisk now updates directory mtimes (b: %d -> %d): drop this pin", before["b"], e.ModTime)
		}
	}
}

// TestConformanceNodeBoot drives two identical state machines in lockstep,
// one on the real executor and one on simdisk, through a boot with a
// provisioned config (to primary) and one without (FATAL): every effect
// and every completion must match.
func TestConformanceNodeBoot(t *testing.T) {
	for _, provisioned := range []bool{true, false} {
		t.Run(fmt.Sprintf("provisioned=%v", provisioned), func(t *testing.T) {
			p := newPair(t)
			if provisioned {
				p.saveSeq(testBlob(t, "boot", 3), 1)
			}
			opts := sm.DefaultOptions(0, []string{"n0"})
			nr, err := sm.NewNode(opts)
			if err != nil {
				t.Fatal(err)
			}
			ns, _ := sm.NewNode(opts)
			clk := sm.Clock{Mono: time.Second, Wall: wallNow()}
			var inR, inS []sm.Input = []sm.Input{sm.Boot{Seed: 42}}, []sm.Input{sm.Boot{Seed: 42}}
			for steps := 0; len(inR) > 0; steps++ {
				if steps > 1000 {
					t.Fatal("no quiescence after 1000 steps")
				}
				er, es := nr.Step(clk, inR[0]), ns.Step(clk, inS[0])
				inR, inS = inR[1:], inS[1:]
				if !reflect.DeepEqual(er, es) {
					t.Fatalf("step %d: effects differ:\n  real: %+v\n  sim:  %+v", steps, er, es)
				}
				for i, e := range er {
					op, ok := e.(sm.FileOp)
					if !ok {
						continue
					}
					r, s := p.real.Exec(op), p.sim.Exec(es[i].(sm.FileOp), clk.Wall)
					if d := diffDone(r, s); d != "" {
						t.Fatalf("%s %s: %s\n  real: %s\n  sim:  %s", op.Op, op.Path, d, fmtDone(r), fmtDone(s))
					}
					// Feed identical completions so the machines stay comparable.
					r.Detail, s.Detail = "", ""
					r.ModTime, s.ModTime = clk.Wall, clk.Wall
					inR, inS = append(inR, r), append(inS, s)
				}
			}
			if nr.Role() != ns.Role() || nr.Term() != ns.Term() || nr.ConfigTag() != ns.ConfigTag() {
				t.Errorf("real %v/%d/%x, sim %v/%d/%x", nr.Role(), nr.Term(), nr.ConfigTag(), ns.Role(), ns.Term(), ns.ConfigTag())
			}
			wantRole := sm.RoleStopped
			if provisioned {
				wantRole = sm.RolePrimary
			}
			if nr.Role() != wantRole {
				t.Errorf("role %v, want %v (fatal %q)", nr.Role(), wantRole, nr.FatalReason())
			}
			p.compareTrees()
		})
	}
}
