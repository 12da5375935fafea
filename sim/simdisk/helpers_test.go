package simdisk

import (
	"strconv"
	"testing"

	"github.com/xce-hpc/xce/sm"
)

func opWrite(path, data string) sm.FileOp {
	return sm.FileOp{Op: sm.OpWrite, Path: path, Data: []byte(data)}
}
func opFsync(path string) sm.FileOp    { return sm.FileOp{Op: sm.OpFsync, Path: path} }
func opFsyncDir(path string) sm.FileOp { return sm.FileOp{Op: sm.OpFsyncDir, Path: path} }
func opRename(from, to string) sm.FileOp {
	return sm.FileOp{Op: sm.OpRename, Path: from, To: to}
}
func opMkdir(path string) sm.FileOp  { return sm.FileOp{Op: sm.OpMkdir, Path: path} }
func opRemove(path string) sm.FileOp { return sm.FileOp{Op: sm.OpRemove, Path: path} }
func opRead(path string) sm.FileOp   { return sm.FileOp{Op: sm.OpRead, Path: path} }
func opList(path string) sm.FileOp   { return sm.FileOp{Op: sm.OpList, Path: path} }

// run executes ops that must all succeed.
func run(t testing.TB, d *Disk, ops ...sm.FileOp) {
	t.Helper()
	for i, op := range ops {
		if r := d.Exec(op, int64(1000+i)); r.Err != sm.IOOK {
			t.Fatalf("%s %q %q: %s (%s)", op.Op, op.Path, op.To, r.Err, r.Detail)
		}
	}
}

// fileIn returns the contents of path in state s.
func fileIn(s *Disk, path string) (string, bool) {
	b, ok := s.ReadFile(path)
	return string(b), ok
}

// anyState reports whether some crash state satisfies pred.
func anyState(states []*Disk, pred func(*Disk) bool) bool {
	for _, s := range states {
		if pred(s) {
			return true
		}
	}
	return false
}

// describe renders states for failure messages.
func describe(states []*Disk) string {
	out := ""
	for i, s := range states {
		out += "--- state " + strconv.Itoa(i) + "\n" + s.String()
	}
	return out
}
