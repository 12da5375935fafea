package fileio

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/xce-hpc/xce/sm"
)

// TestChunkAppendsWaitForTheirWriteback: a file written as many large
// appends (a snapshot received chunk by chunk) is written back as one
// stream: past writeBackLag pieces the appends wait for the writeback of
// the earlier ones, as one large write does, and the file holds every
// chunk in order.
func TestChunkAppendsWaitForTheirWriteback(t *testing.T) {
	const chunk, chunks = 512 << 10, 12 // 6 MiB: 2 MiB past the lag
	e := &Executor{Base: t.TempDir()}
	defer e.Close()
	var want []byte
	for i := range chunks {
		data := bytes.Repeat([]byte{byte('a' + i)}, chunk)
		want = append(want, data...)
		if d := e.Exec(sm.FileOp{Op: sm.OpAppend, Path: "snap.tmp", Data: data}); d.Err != sm.IOOK {
			t.Fatalf("append %d: %s %s", i, d.Err, d.Detail)
		}
		if i == 3 { // a small append between two large ones
			if d := e.Exec(sm.FileOp{Op: sm.OpAppend, Path: "snap.tmp", Data: []byte("small")}); d.Err != sm.IOOK {
				t.Fatalf("small append: %s %s", d.Err, d.Detail)
			}
			want = append(want, "small"...)
		}
	}
	e.kept.mu.Lock()
	bw := e.kept.bw
	e.kept.mu.Unlock()
	if bw == nil {
		t.Fatal("no writer kept for the appends")
	}
	if wantWaited := int64(len(want)) - writeBackLag*writeBackPiece - (1 << 20); bw.waited < wantWaited {
		t.Errorf("writeback waited for %d bytes of %d appended, want at least %d (the lag counts across appends)", bw.waited, len(want), wantWaited)
	}
	if bw.flushed != 0 {
		t.Errorf("flushed %d bytes of a %d-byte file: nothing is flushed before %d bytes were written back", bw.flushed, len(want), flushPiece)
	}
	got, err := os.ReadFile(filepath.Join(e.Base, "snap.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("file of %d bytes does not hold the %d appended in order", len(got), len(want))
	}
}

// TestLargeWriteIsFlushedInPieces: a write of many flushPieces is
// flushed to the device as it goes, each flush within a piece (and the
// writeback lag) of the bytes written, not only by the final fsync.
func TestLargeWriteIsFlushedInPieces(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := newBackWriter(f, 0, 0)
	data := bytes.Repeat([]byte("x"), 3*flushPiece+writeBackLag*writeBackPiece)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if w.flushed < 3*flushPiece {
		t.Errorf("flushed %d bytes of %d written, want at least %d", w.flushed, len(data), 3*flushPiece)
	}
	if w.flushed > w.waited {
		t.Errorf("flushed %d bytes, beyond the %d written back", w.flushed, w.waited)
	}
}
