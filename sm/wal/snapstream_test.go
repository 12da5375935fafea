package wal

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
)

// failingReader fails every read that reaches past at.
type failingReader struct {
	b  []byte
	at int64
}

func (r failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > r.at {
		return 0, errors.New("input/output error")
	}
	return copy(p, r.b[off:]), nil
}

// changingReader hands out b until its first pass has read all of it,
// then b with one byte flipped at flip.
type changingReader struct {
	b    []byte
	flip int64
	read int64
}

func (r *changingReader) ReadAt(p []byte, off int64) (int, error) {
	n := copy(p, r.b[off:])
	r.read += int64(n)
	if r.read > int64(len(r.b)) && off <= r.flip && r.flip < off+int64(n) {
		p[r.flip-off] ^= 0x01
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func TestReadSnapshotAtFailures(t *testing.T) {
	data, err := EncodeSnapshot(sampleSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	none := SnapshotVisitor{
		Head:     func(SnapshotHead) error { return nil },
		Job:      func(*schema.SnapshotJob) error { return nil },
		Schedule: func(*schema.SnapshotSchedule) error { return nil },
	}
	if err := ReadSnapshotAt(bytes.NewReader(data), int64(len(data)), none); err != nil {
		t.Fatalf("the intact file: %v", err)
	}
	for _, at := range []int64{0, SnapshotHeaderSize + 3, int64(len(data)) - 1} {
		err := ReadSnapshotAt(failingReader{data, at}, int64(len(data)), none)
		if !errors.Is(err, ErrSnapshotRead) || errors.Is(err, ErrBadSnapshot) {
			t.Errorf("a read failing past byte %d: %v, want a read error, not a bad snapshot", at, err)
		}
	}
	// A job's error text changes between the passes: the second pass
	// reads other bytes than the checksum covered.
	flip := int64(bytes.Index(data, []byte("max attempts exceeded")))
	err = ReadSnapshotAt(&changingReader{b: data, flip: flip}, int64(len(data)), none)
	if !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "changed while it was read") {
		t.Fatalf("a file changed between the passes: %v", err)
	}
}

// Jobs whose stamps alternate between two values, read through every
// window from 1 to 160 bytes, decode as the whole file does: the decoder
// compares a job's stamps with the previous job's bytes, which a window
// read may have overwritten since.
func TestReadSnapshotAtKeepsNothingOfTheWindow(t *testing.T) {
	s := &schema.Snapshot{Lsn: 3, Term: 1, NextId: 201, NextSeq: 200}
	stamps := []*schema.WalStamps{{VisibilityTimeoutS: 30, MaxAttempts: 3}, {VisibilityTimeoutS: 60, MaxAttempts: 5}}
	for i := range 200 {
		s.Jobs = append(s.Jobs, &schema.SnapshotJob{Id: uint64(i + 1), Queue: "q", QueueId: 1, Seq: uint64(i),
			Payload: []byte{byte(i)}, Stamps: stamps[(i*7/3+i/5)%2]})
	}
	data, err := EncodeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := readStream(ReadSnapshot, data)
	if err != nil {
		t.Fatal(err)
	}
	for window := 1; window <= 160; window++ {
		got, _, err := readStream(func(b []byte, v SnapshotVisitor) error {
			return readSnapshotAt(bytes.NewReader(b), int64(len(b)), window, v)
		}, data)
		if err != nil || !proto.Equal(got, want) {
			t.Fatalf("window %d: %v; the jobs differ from ReadSnapshot's: %v", window, err, !proto.Equal(got, want))
		}
	}
}
