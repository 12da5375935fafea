package fileio

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/xce-hpc/xce/sm"
)

// The kept file never makes an op land on the wrong file: after a
// truncating write, a rename (of the file or of its directory) or a
// removal, the next append goes to whatever the path names now.
func TestKeptFileFollowsThePath(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []sm.FileOp
		want map[string]string // path -> contents afterwards ("" absent)
	}{
		{"append twice", []sm.FileOp{
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("1")},
			{Op: sm.OpFsync, Path: "d/a"},
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("2")},
		}, map[string]string{"d/a": "12"}},
		{"truncating write", []sm.FileOp{
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("1")},
			{Op: sm.OpWrite, Path: "d/a", Data: []byte("x")},
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("2")},
		}, map[string]string{"d/a": "x2"}},
		{"rename of the file", []sm.FileOp{
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("1")},
			{Op: sm.OpRename, Path: "d/a", To: "d/b"},
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("2")},
			{Op: sm.OpFsync, Path: "d/a"},
		}, map[string]string{"d/a": "2", "d/b": "1"}},
		{"rename onto the file", []sm.FileOp{
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("1")},
			{Op: sm.OpWrite, Path: "d/b", Data: []byte("b")},
			{Op: sm.OpRename, Path: "d/b", To: "d/a"},
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("2")},
		}, map[string]string{"d/a": "b2", "d/b": ""}},
		{"removal", []sm.FileOp{
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("1")},
			{Op: sm.OpRemove, Path: "d/a"},
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("2")},
		}, map[string]string{"d/a": "2"}},
		{"rename of its directory", []sm.FileOp{
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("1")},
			{Op: sm.OpRename, Path: "d", To: "e"},
			{Op: sm.OpMkdir, Path: "d"},
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("2")},
		}, map[string]string{"d/a": "2", "e/a": "1"}},
		{"another file between", []sm.FileOp{
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("1")},
			{Op: sm.OpAppend, Path: "d/b", Data: []byte("b")},
			{Op: sm.OpAppend, Path: "d/a", Data: []byte("2")},
			{Op: sm.OpFsync, Path: "d/b"},
		}, map[string]string{"d/a": "12", "d/b": "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			if err := os.Mkdir(filepath.Join(base, "d"), 0o700); err != nil {
				t.Fatal(err)
			}
			e := &Executor{Base: base}
			defer e.Close()
			for i, op := range tc.ops {
				if d := e.Exec(op); d.Err != sm.IOOK {
					t.Fatalf("op %d %s %s: %s %s", i, op.Op, op.Path, d.Err, d.Detail)
				}
			}
			for p, want := range tc.want {
				got, err := os.ReadFile(filepath.Join(base, p))
				switch {
				case want == "" && !os.IsNotExist(err):
					t.Errorf("%s: %q, %v; want it absent", p, got, err)
				case want != "" && (err != nil || string(got) != want):
					t.Errorf("%s: %q, %v; want %q", p, got, err, want)
				}
			}
		})
	}
}
