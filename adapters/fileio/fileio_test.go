package fileio

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

func TestMapErr(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want sm.IOErr
	}{
		{nil, sm.IOOK},
		{syscall.ENOENT, sm.IONotExist},
		{&os.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, sm.IONotExist},
		{fs.ErrNotExist, sm.IONotExist},
		{&os.LinkError{Op: "rename", Old: "a", New: "b", Err: syscall.ENOENT}, sm.IONotExist},
		{&os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, sm.IONoSpace},
		{&os.PathError{Op: "write", Path: "/x", Err: syscall.EDQUOT}, sm.IONoSpace},
		{fmt.Errorf("wrapped: %w", syscall.ENOSPC), sm.IONoSpace},
		{&os.PathError{Op: "fsync", Path: "/x", Err: syscall.EIO}, sm.IOFailed},
		{syscall.EACCES, sm.IOFailed},
		{syscall.EISDIR, sm.IOFailed},
		{syscall.ENOTDIR, sm.IOFailed},
		{syscall.ENOTEMPTY, sm.IOFailed},
		{syscall.EROFS, sm.IOFailed},
		{errors.New("anything else"), sm.IOFailed},
		{fmt.Errorf("x: %w", errTooBig), sm.IOTooBig},
	} {
		if got := MapErr(tc.err); got != tc.want {
			t.Errorf("MapErr(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestCheckPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"conf", true},
		{"conf/current", true},
		{"conf/cluster.bin.0123456789ab.7.tmp", true},
		{"a/b/c", true},
		{"..x", true}, // a name, not a component ".."
		{"x..", true},
		{"", false},
		{"..", false},
		{"../x", false},
		{"a/..", false},
		{"a/../b", false},
		{"a/../../b", false},
		{".", false},
		{"./a", false},
		{"a/./b", false},
		{"/abs", false},
		{"/", false},
		{"a//b", false},
		{"a/", false},
		{"a\x00b", false},
		{strings.Repeat("a", MaxPathLen), true},
		{strings.Repeat("a", MaxPathLen+1), false},
	} {
		if msg := CheckPath(tc.path); (msg == "") != tc.ok {
			t.Errorf("CheckPath(%q) = %q, want ok=%v", tc.path, msg, tc.ok)
		}
	}
}

func TestEscapeRefusedBeforeAnySyscall(t *testing.T) {
	parent := t.TempDir()
	base := filepath.Join(parent, "node")
	if err := os.Mkdir(base, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "victim"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &Executor{Base: base}
	for _, op := range []sm.FileOp{
		{ID: 1, Op: sm.OpWrite, Path: "../victim", Data: []byte("overwritten")},
		{ID: 2, Op: sm.OpRemove, Path: "../victim"},
		{ID: 3, Op: sm.OpRename, Path: "../victim", To: "stolen"},
		{ID: 4, Op: sm.OpRead, Path: "../victim"},
		{ID: 5, Op: sm.OpWrite, Path: filepath.Join(parent, "victim"), Data: []byte("abs")},
		{ID: 6, Op: sm.OpMkdir, Path: "../newdir"},
		{ID: 7, Op: sm.OpList, Path: ".."},
	} {
		d := e.Exec(op)
		if d.Err != sm.IOFailed || d.ID != op.ID || !strings.HasPrefix(d.Detail, ErrPathRefused.Error()) || d.Data != nil || d.Entries != nil {
			t.Errorf("%s %q: %+v, want a refusal", op.Op, op.Path, d)
		}
	}
	if b, err := os.ReadFile(filepath.Join(parent, "victim")); err != nil || string(b) != "keep" {
		t.Errorf("victim = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(parent, "newdir")); !os.IsNotExist(err) {
		t.Errorf("newdir created outside base: %v", err)
	}
	if d := (&Executor{}).Exec(sm.FileOp{Op: sm.OpList, Path: ""}); d.Err != sm.IOFailed {
		t.Errorf("executor without base: %+v", d)
	}
}

func TestMkdirFixesMode(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "conf")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e := &Executor{Base: base}
	if d := e.Exec(sm.FileOp{Op: sm.OpMkdir, Path: "conf"}); d.Err != sm.IOOK {
		t.Fatalf("mkdir existing: %+v", d)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("mode after mkdir = %v, %v; want 0700", st.Mode(), err)
	}
	if d := e.Exec(sm.FileOp{Op: sm.OpMkdir, Path: "data"}); d.Err != sm.IOOK {
		t.Fatalf("mkdir new: %+v", d)
	}
	if st, _ := os.Stat(filepath.Join(base, "data")); st.Mode().Perm()&0o077 != 0 {
		t.Errorf("new dir mode %v", st.Mode())
	}
	if d := e.Exec(sm.FileOp{Op: sm.OpWrite, Path: "data/f", Data: []byte("x")}); d.Err != sm.IOOK {
		t.Fatal(d)
	}
	if st, _ := os.Stat(filepath.Join(base, "data/f")); st.Mode().Perm()&0o077 != 0 {
		t.Errorf("written file mode %v, want 0600", st.Mode())
	}
}

func TestReadTooBigBeforeReading(t *testing.T) {
	base := t.TempDir()
	e := &Executor{Base: base}
	// A sparse 1 GiB file: reading it would be slow and allocate; the size
	// check must refuse it from fstat alone.
	f, err := os.Create(filepath.Join(base, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	d := e.Exec(sm.FileOp{ID: 9, Op: sm.OpRead, Path: "huge", MaxSize: sm.MaxConfigSize})
	if d.Err != sm.IOTooBig || d.Data != nil || d.ID != 9 || d.Detail == "" {
		t.Errorf("huge read: err=%v len=%d detail=%q", d.Err, len(d.Data), d.Detail)
	}
}

func TestReadModTimeAndListMeta(t *testing.T) {
	base := t.TempDir()
	e := &Executor{Base: base}
	e.Exec(sm.FileOp{Op: sm.OpMkdir, Path: "c"})
	e.Exec(sm.FileOp{Op: sm.OpWrite, Path: "c/f", Data: []byte("hello")})
	st, err := os.Stat(filepath.Join(base, "c/f"))
	if err != nil {
		t.Fatal(err)
	}
	d := e.Exec(sm.FileOp{Op: sm.OpRead, Path: "c/f"})
	if d.ModTime != st.ModTime().UnixNano() {
		t.Errorf("ModTime %d, want %d", d.ModTime, st.ModTime().UnixNano())
	}
	l := e.Exec(sm.FileOp{Op: sm.OpList, Path: ""})
	if len(l.Entries) != 1 || l.Entries[0].Name != "c" || l.Entries[0].Size != 0 || l.Entries[0].ModTime == 0 {
		t.Errorf("list base: %+v", l.Entries)
	}
	l = e.Exec(sm.FileOp{Op: sm.OpList, Path: "c"})
	if len(l.Entries) != 1 || l.Entries[0].Size != 5 || l.Entries[0].ModTime != st.ModTime().UnixNano() {
		t.Errorf("list c: %+v", l.Entries)
	}
}

func TestClassifyFS(t *testing.T) {
	for _, tc := range []struct {
		magic uint32
		want  string
	}{
		{0x6969, "nfs"},
		{0x517B, "smb"},
		{0xFF534D42, "cifs"},
		{0xFE534D42, "smb2"},
		{0x65735546, "fuse"},
		{0x01021997, "9p"},
		{0x00C36400, "ceph"},
		{0xEF53, ""},     // ext2/3/4
		{0x58465342, ""}, // xfs
		{0x9123683E, ""}, // btrfs
		{0x01021994, ""}, // tmpfs
		{0x2FC12FC1, ""}, // zfs
		{0x794C7630, ""}, // overlayfs (containers)
	} {
		if got := classifyFS(tc.magic); got != tc.want {
			t.Errorf("classifyFS(0x%X) = %q, want %q", tc.magic, got, tc.want)
		}
	}
}

func TestCheckLocalFS(t *testing.T) {
	dir := t.TempDir()
	magic, err := fsMagic(dir)
	if err != nil {
		t.Fatal(err)
	}
	if name := classifyFS(magic); name != "" {
		// The temp dir itself is on a network file system: then it must be refused.
		if err := CheckLocalFS(dir); !errors.Is(err, ErrNetworkFS) {
			t.Errorf("CheckLocalFS(%s on %s) = %v, want ErrNetworkFS", dir, name, err)
		}
	} else if err := CheckLocalFS(dir); err != nil {
		t.Errorf("CheckLocalFS(%s) = %v", dir, err)
	}
	err = CheckLocalFS(filepath.Join(dir, "missing"))
	if err == nil || errors.Is(err, ErrNetworkFS) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CheckLocalFS(missing) = %v, want a statfs ENOENT error", err)
	}
}

func TestCheckMagic(t *testing.T) {
	err := checkMagic("/w/n", 0x6969)
	if !errors.Is(err, ErrNetworkFS) || !strings.Contains(err.Error(), "/w/n is on nfs (f_type 0x6969)") {
		t.Errorf("nfs: %v", err)
	}
	if err := checkMagic("/w/n", 0xEF53); err != nil {
		t.Errorf("ext4: %v", err)
	}
}

// A FIFO where a file should be is refused at once (it used to hang the
// reader until a writer came, and SIGTERM with it: issue 8 defect 4).
func TestReadRefusesFIFO(t *testing.T) {
	base := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(base, "current"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &Executor{Base: base}
	done := make(chan sm.IODone, 1)
	go func() { done <- e.Exec(sm.FileOp{ID: 3, Op: sm.OpRead, Path: "current", MaxSize: 256}) }()
	select {
	case d := <-done:
		if d.Err != sm.IOFailed || !strings.Contains(d.Detail, "not a regular file") {
			t.Fatalf("FIFO read: err=%v detail=%q", d.Err, d.Detail)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO hung")
	}
}

// A symbolic link where a file should be is refused, not followed (issue
// 20 finding 9): the pointer conf/current linked to a pointer file of the
// right form elsewhere is not read, nor is a linked versioned file.
func TestReadRefusesSymlink(t *testing.T) {
	base := t.TempDir()
	if err := os.WriteFile(filepath.Join(base, "elsewhere"), []byte("cluster.bin.0123456789ab\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("elsewhere", filepath.Join(base, "current")); err != nil {
		t.Fatal(err)
	}
	e := &Executor{Base: base}
	d := e.Exec(sm.FileOp{ID: 4, Op: sm.OpRead, Path: "current", MaxSize: 256})
	if d.Err != sm.IOFailed || !strings.Contains(d.Detail, "is a symbolic link") || len(d.Data) != 0 {
		t.Fatalf("symlink read: err=%v detail=%q data=%q", d.Err, d.Detail, d.Data)
	}
	if d := e.Exec(sm.FileOp{ID: 5, Op: sm.OpRead, Path: "elsewhere", MaxSize: 256}); d.Err != sm.IOOK {
		t.Fatalf("the file itself: %v %s", d.Err, d.Detail)
	}
}

// Large writes go through writeBack in pieces: every size around the piece
// and threshold boundaries lands whole, at the right offset, in both modes.
func TestLargeWritesLandWhole(t *testing.T) {
	dir := t.TempDir()
	o := osFS{base: dir, kept: &kept{}, e: &Executor{}}
	prefix := []byte("head-of-file")
	for _, size := range []int{writeBackMin - 1, writeBackMin, writeBackPiece, writeBackPiece + 1, (writeBackLag+2)*writeBackPiece + 12345} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i>>16 ^ i>>8 ^ i) // no period that a misplaced piece could match
		}
		for _, appendTo := range []bool{false, true} {
			name := fmt.Sprintf("f-%d-%v", size, appendTo)
			want := data
			if appendTo {
				if err := o.Write(name, prefix, false); err != nil {
					t.Fatal(err)
				}
				want = append(append([]byte{}, prefix...), data...)
			}
			if err := o.Write(name, data, appendTo); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: file of %d bytes differs from the %d written", name, len(got), len(want))
			}
		}
	}
}

// A large read allocates the file's buffer once (io.ReadAll's doubling
// allocated about twice the file in ~30 buffers), and returns every byte.
func TestReadLargeFileOneBuffer(t *testing.T) {
	base := t.TempDir()
	e := &Executor{Base: base}
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
	if err := os.WriteFile(filepath.Join(base, "big"), want, 0o600); err != nil {
		t.Fatal(err)
	}
	var d sm.IODone
	allocs := testing.AllocsPerRun(3, func() { d = e.Exec(sm.FileOp{Op: sm.OpRead, Path: "big", MaxSize: 1 << 30}) })
	if d.Err != sm.IOOK || !bytes.Equal(d.Data, want) {
		t.Fatalf("read: err=%v len=%d, want %d bytes", d.Err, len(d.Data), len(want))
	}
	if allocs > 10 {
		t.Errorf("reading 8 MiB took %.0f allocations, want the buffer once (<= 10 in all)", allocs)
	}
}

// readSized grows past the fstat size when the file grew since, and
// returns exactly what the reader holds.
func TestReadSizedGrows(t *testing.T) {
	for _, size := range []int64{0, 1, 100, 4095, 4096} {
		for _, n := range []int{0, 1, 100, 4096, 10000} {
			want := bytes.Repeat([]byte{7}, n)
			got, err := readSized(bytes.NewReader(want), size)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("size %d, %d bytes: got %d bytes, err %v", size, n, len(got), err)
			}
		}
	}
}
