package wal

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"pgregory.net/rapid"

	"github.com/xce-hpc/xce/schema"
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

// The hand encoder of a snapshot job (appendSnapshotJob) gives proto's
// deterministic marshal of it, byte for byte, refuses what proto refuses
// (strings that are not UTF-8) and leaves to proto what it does not know
// (unknown fields): on jobs with every field drawn, negative numbers and
// empty messages included (TestSnapshotJobEncodingMatchesProto draws the
// fields from the descriptor).
func TestPropAppendJobIsMarshal(t *testing.T) {
	str := rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringN(0, 3, -1))
	i64 := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64(), rapid.Int64Range(-3, 3))
	u32 := rapid.OneOf(rapid.Just(uint32(0)), rapid.Uint32())
	rapid.Check(t, func(t *rapid.T) {
		j := &schema.SnapshotJob{Id: rapid.Uint64().Draw(t, "id"), Queue: str.Draw(t, "queue"), QueueId: u32.Draw(t, "queueID"),
			Payload: rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "payload"), Priority: rapid.Int32().Draw(t, "priority"),
			State: schema.JobState(rapid.Int32Range(-2, 5).Draw(t, "state")), RunAt: i64.Draw(t, "runAt"), Seq: rapid.Uint64().Draw(t, "seq"),
			EnqueuedAt: i64.Draw(t, "enqueuedAt"), ExpiresAt: i64.Draw(t, "expiresAt"), Attempts: u32.Draw(t, "attempts"),
			Host: str.Draw(t, "host"), Resource: u32.Draw(t, "resource"), ClaimedAt: i64.Draw(t, "claimedAt"),
			ClaimExpiresAt: i64.Draw(t, "claimExpiresAt"), LastError: str.Draw(t, "lastError"), DiedAt: i64.Draw(t, "diedAt"),
			Pin: str.Draw(t, "pin"), Claims: u32.Draw(t, "claims"), ClaimTerm: rapid.Uint64().Draw(t, "claimTerm"),
			ClaimLsn: rapid.Uint64().Draw(t, "claimLSN")}
		if rapid.Bool().Draw(t, "stamps") {
			j.Stamps = &schema.WalStamps{VisibilityTimeoutS: u32.Draw(t, "vt"), MaxAttempts: u32.Draw(t, "max"),
				BackoffBaseS: u32.Draw(t, "backoff"), DeadLetterRetentionS: u32.Draw(t, "retention")}
		}
		if rapid.Bool().Draw(t, "invalidUTF8") {
			j.Host = "\xff" + j.Host
		}
		if rapid.IntRange(0, 9).Draw(t, "unknown") == 0 {
			j.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
		}
		if j.Stamps != nil && rapid.IntRange(0, 9).Draw(t, "unknown in stamps") == 0 {
			j.Stamps.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1))
		}
		want, werr := appendMessage(nil, 4, j) // proto's
		got, gerr := appendSnapshotJob(nil, 4, j)
		switch {
		case (werr == nil) != (gerr == nil):
			t.Fatalf("proto: %v, hand encoder: %v, of %v", werr, gerr, j)
		case werr == nil && !bytes.Equal(got, want):
			t.Fatalf("hand encoding %x, proto's %x, of %v", got, want, j)
		}
	})
}

// The hand encoder of an idempotency key is proto's marshal of it.
func TestPropAppendKeyIsMarshal(t *testing.T) {
	str := rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringN(0, 3, -1))
	rapid.Check(t, func(t *rapid.T) {
		k := &schema.SnapshotKey{Queue: str.Draw(t, "queue"), Key: str.Draw(t, "key"), Id: rapid.Uint64().Draw(t, "id"),
			Sum: rapid.SliceOfN(rapid.Byte(), 0, 33).Draw(t, "sum"), ExpiresAt: rapid.OneOf(rapid.Just(int64(0)), rapid.Int64()).Draw(t, "expiresAt")}
		if rapid.Bool().Draw(t, "invalidUTF8") {
			k.Key += "\xc3"
		}
		if rapid.IntRange(0, 9).Draw(t, "unknown") == 0 {
			k.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
		}
		want, werr := marshalOpts.MarshalAppend(nil, k)
		got, ok := appendKey(nil, k)
		switch {
		case !ok:
			if werr == nil && utf8.ValidString(k.Key) && len(k.ProtoReflect().GetUnknown()) == 0 {
				t.Fatalf("a plain key left to proto: %v", k)
			}
		case werr != nil:
			t.Fatalf("hand-encoded a key proto refuses (%v): %v", werr, k)
		case !bytes.Equal(got, want):
			t.Fatalf("hand encoding %x, proto's %x, of %v", got, want, k)
		}
	})
}
