package wal

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// The streaming encoder writes exactly what the deterministic marshal of
// the whole message gives, framed, for every valid snapshot; and refuses
// exactly what ValidateSnapshot refuses.
func TestPropSnapshotEncoderIsMarshal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		got, err := EncodeSnapshot(s)
		if verr := ValidateSnapshot(s); verr != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("invalid snapshot (%v) encoded: err %v", verr, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid snapshot refused: %v", err)
		}
		p, err := marshalOpts.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if want := snapshotFile(p); !bytes.Equal(got, want) {
			t.Fatalf("stream encoding differs from the message's marshal: %d bytes, want %d", len(got), len(want))
		}
	})
}

func TestSnapshotEncoderRefusesJobAfterSchedule(t *testing.T) {
	s := sampleSnapshot()
	if len(s.Jobs) == 0 || len(s.Schedules) == 0 {
		t.Fatal("sample snapshot needs a job and a schedule")
	}
	e := NewSnapshotEncoder(s.Lsn, s.Term, s.NextId, s.NextSeq, 1, 1, 0)
	if err := e.Schedule(s.Schedules[0]); err != nil {
		t.Fatal(err)
	}
	if err := e.Job(s.Jobs[0]); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("job after a schedule: err %v, want ErrBadSnapshot", err)
	}
	if _, err := e.Finish(); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("Finish after a refused job: err %v", err)
	}
}

// A streamed encoding, its header written at offset 0 after the end, is
// the same file, for every piece size; a failed write is the encoder's
// error.
func TestPropSnapshotEncoderStreamIsEncode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		want, err := EncodeSnapshot(s)
		if err != nil {
			return // refused alike: TestPropSnapshotEncoderIsMarshal
		}
		var w bytes.Buffer
		e := NewSnapshotEncoder(s.GetLsn(), s.GetTerm(), s.GetNextId(), s.GetNextSeq(), len(s.GetJobs()), len(s.GetSchedules()), 0)
		e.Stream(&w, rapid.IntRange(1, 300).Draw(t, "piece"))
		for _, j := range s.GetJobs() {
			if err := e.Job(j); err != nil {
				t.Fatal(err)
			}
		}
		for _, sc := range s.GetSchedules() {
			if err := e.Schedule(sc); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range s.GetKeys() {
			if err := e.Key(k); err != nil {
				t.Fatal(err)
			}
		}
		head, err := e.Finish()
		if err != nil {
			t.Fatal(err)
		}
		got := w.Bytes()
		if len(head) != SnapshotHeaderSize || len(got) != len(want) {
			t.Fatalf("header %d bytes, file %d, want %d and %d", len(head), len(got), SnapshotHeaderSize, len(want))
		}
		copy(got, head)
		if !bytes.Equal(got, want) {
			t.Fatal("streamed file differs from the encoded one")
		}
	})
}

type failWriter struct{}

var errWrite = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestSnapshotEncoderStreamWriteError(t *testing.T) {
	s := sampleSnapshot()
	e := NewSnapshotEncoder(s.Lsn, s.Term, s.NextId, s.NextSeq, len(s.Jobs), len(s.Schedules), 0)
	e.Stream(failWriter{}, 1)
	if err := e.Job(s.Jobs[0]); !errors.Is(err, errWrite) {
		t.Fatalf("job after a failed write: err %v, want the writer's", err)
	}
	if _, err := e.Finish(); !errors.Is(err, errWrite) {
		t.Fatalf("Finish after a failed write: err %v, want the writer's", err)
	}
}
