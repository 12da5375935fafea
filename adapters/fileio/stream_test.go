package fileio

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// WriteStream writes what fill writes, in as many writes as it makes
// (more than writeBackLag pieces: the paced writeback's waits run), then
// fill's head at offset 0, replacing an older, longer file.
func TestWriteStreamWritesHeadLast(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s"), bytes.Repeat([]byte{7}, 9<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	var want []byte
	fill := func(w io.Writer) ([]byte, error) {
		for i := range 7 {
			p := bytes.Repeat([]byte{byte(i + 1)}, writeBackPiece-i)
			if i == 0 {
				copy(p, "0000")
			}
			if _, err := w.Write(p); err != nil {
				return nil, err
			}
			want = append(want, p...)
		}
		return []byte("HEAD"), nil
	}
	if err := (osFS{dir, &kept{}, &Executor{}}).WriteStream("s", fill); err != nil {
		t.Fatal(err)
	}
	copy(want, "HEAD")
	got, err := os.ReadFile(filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("file of %d bytes (head %q), want %d (head HEAD)", len(got), got[:4], len(want))
	}
}

func TestWriteStreamFillError(t *testing.T) {
	bad := errors.New("encode failed")
	err := (osFS{t.TempDir(), &kept{}, &Executor{}}).WriteStream("s", func(io.Writer) ([]byte, error) { return nil, bad })
	if !errors.Is(err, bad) {
		t.Fatalf("err %v, want fill's", err)
	}
	if err := (osFS{t.TempDir(), &kept{}, &Executor{}}).WriteStream("no/such/dir", func(io.Writer) ([]byte, error) { return nil, nil }); err == nil {
		t.Fatal("a file in a missing directory: no error")
	}
}
