package fileio

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

func writeSized(t *testing.T, p string, n int64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// trashEmpty waits until base's TrashDir holds nothing.
func trashEmpty(t *testing.T, base string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		des, err := os.ReadDir(filepath.Join(base, TrashDir))
		if err != nil {
			t.Fatal(err)
		}
		if len(des) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("trash still holds %d files", len(des))
		}
	}
}

// TestRemoveOfALargeFileGoesThroughTheTrash: once OpRemove completes the
// path names nothing, as with an unlink; the file is deleted in the
// background; a small file is unlinked at once; a missing one is
// IONotExist.
func TestRemoveOfALargeFileGoesThroughTheTrash(t *testing.T) {
	base := t.TempDir()
	e := &Executor{Base: base}
	defer e.Close()
	writeSized(t, filepath.Join(base, "big"), trashMin+trashStep+1)
	writeSized(t, filepath.Join(base, "small"), 100)
	for _, p := range []string{"small", "big"} {
		if d := e.Exec(sm.FileOp{Op: sm.OpRemove, Path: p}); d.Err != sm.IOOK {
			t.Fatalf("remove %s: %s %s", p, d.Err, d.Detail)
		}
		if _, err := os.Lstat(filepath.Join(base, p)); !os.IsNotExist(err) {
			t.Fatalf("%s after its removal: %v", p, err)
		}
		if p == "small" {
			if _, err := os.Stat(filepath.Join(base, TrashDir)); !os.IsNotExist(err) {
				t.Fatalf("a small file went through the trash: %v", err)
			}
		}
	}
	trashEmpty(t, base)
	if d := e.Exec(sm.FileOp{Op: sm.OpRemove, Path: "big"}); d.Err != sm.IONotExist {
		t.Fatalf("remove of a missing file: %s %s", d.Err, d.Detail)
	}
}

// TestTrashLeftByACrashIsDeleted: a file left in the trash (the process
// stopped mid-deletion) is deleted once the next executor removes one.
func TestTrashLeftByACrashIsDeleted(t *testing.T) {
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, TrashDir), 0o700); err != nil {
		t.Fatal(err)
	}
	writeSized(t, filepath.Join(base, TrashDir, "1.1-old"), trashMin)
	writeSized(t, filepath.Join(base, "big"), trashMin)
	e := &Executor{Base: base}
	defer e.Close()
	if d := e.Exec(sm.FileOp{Op: sm.OpRemove, Path: "big"}); d.Err != sm.IOOK {
		t.Fatalf("remove: %s %s", d.Err, d.Detail)
	}
	trashEmpty(t, base)
}

// TestCloseStopsTheTrash: Close returns with the deletion stopped, and a
// closed executor unlinks at once.
func TestCloseStopsTheTrash(t *testing.T) {
	base := t.TempDir()
	writeSized(t, filepath.Join(base, "a"), 64*trashStep) // 64 steps of trashPause: still there after Close
	writeSized(t, filepath.Join(base, "b"), trashMin)
	e := &Executor{Base: base}
	if d := e.Exec(sm.FileOp{Op: sm.OpRemove, Path: "a"}); d.Err != sm.IOOK {
		t.Fatalf("remove: %s %s", d.Err, d.Detail)
	}
	// Close once the deletion has begun: it stops mid-file.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		des, _ := os.ReadDir(filepath.Join(base, TrashDir))
		if len(des) == 1 {
			if st, err := os.Stat(filepath.Join(base, TrashDir, des[0].Name())); err == nil && st.Size() < 64*trashStep {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the deletion never began")
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	des, err := os.ReadDir(filepath.Join(base, TrashDir))
	if err != nil || len(des) != 1 {
		t.Fatalf("trash after Close: %v %v, want the file still there", des, err)
	}
	if d := e.Exec(sm.FileOp{Op: sm.OpRemove, Path: "b"}); d.Err != sm.IOOK {
		t.Fatalf("remove after Close: %s %s", d.Err, d.Detail)
	}
	if des, _ := os.ReadDir(filepath.Join(base, TrashDir)); len(des) != 1 {
		t.Fatalf("a closed executor moved a file to the trash: %v", des)
	}
}
