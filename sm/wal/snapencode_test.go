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
