package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/xce-hpc/xce/schema"
)

func sampleSnapshot() *schema.Snapshot {
	return &schema.Snapshot{
		Lsn: 12345, NextId: 100, NextSeq: 500,
		Jobs: []*schema.SnapshotJob{
			{Id: 1, Queue: "default", QueueId: 1, Payload: []byte("a"), Priority: 5, State: schema.JobState_JOB_STATE_PENDING,
				RunAt: 1_700_000_100, Seq: 7, EnqueuedAt: 1_700_000_000, ExpiresAt: 1_700_003_600, Stamps: stamps(), Resource: 2},
			{Id: 42, Queue: "gpu", QueueId: 3, Payload: []byte{0, 1, 2}, State: schema.JobState_JOB_STATE_PROCESSING,
				Seq: 8, EnqueuedAt: 1_700_000_001, Attempts: 2, Claims: 3, Stamps: stamps(), Host: "node-a", Pin: "node-a",
				ClaimedAt: 1_700_000_050, ClaimExpiresAt: 1_700_000_080, LastError: "timeout"},
			{Id: 99, Queue: "default", QueueId: 1, State: schema.JobState_JOB_STATE_DEAD, Seq: 499, Attempts: 5,
				Stamps: stamps(), LastError: "max attempts exceeded", DiedAt: 1_700_000_200},
		},
		Schedules: []*schema.SnapshotSchedule{
			{Name: "nightly", Spec: "@every 1d", Queue: "default", QueueId: 1, Payload: []byte("n"), Stamps: stamps(),
				Fire: &schema.WalFireOpts{Priority: 1, ExpiresS: 3600}, NextFire: 1_700_006_400},
			{Name: "minutely", Spec: "@every 1m", Queue: "gpu", QueueId: 3, NextFire: 1_700_000_060},
		},
		Keys: []*schema.SnapshotKey{
			{Queue: "default", Key: "order-17", Id: 1, Sum: make([]byte, 32), ExpiresAt: 1_700_000_300},
			{Queue: "gpu", Key: "render-9", Id: 42, Sum: bytes.Repeat([]byte{7}, 32), ExpiresAt: 1_700_000_400},
		},
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, s := range []*schema.Snapshot{sampleSnapshot(), {}, {Lsn: 1, NextId: 1}} {
		b, err := EncodeSnapshot(s)
		if err != nil {
			t.Fatal(err)
		}
		if string(b[:8]) != SnapshotMagic || binary.LittleEndian.Uint64(b[12:]) != uint64(len(b)-SnapshotHeaderSize) {
			t.Fatalf("bad header %x", b[:SnapshotHeaderSize])
		}
		got, err := DecodeSnapshot(b)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, s) {
			t.Fatalf("round trip:\n got %v\nwant %v", got, s)
		}
	}
}

func TestSnapshotCorruption(t *testing.T) {
	good, err := EncodeSnapshot(sampleSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "shorter than the 20-byte header"},
		{"short", good[:19], "shorter than the 20-byte header"},
		{"header only", good[:20], "header says"},
		{"magic", mod(func(b []byte) []byte { b[3] = 'x'; return b }), "magic"},
		{"wal frame", func() []byte { b, _ := AppendFrame(nil, enqueueRec(1)); return append(b, make([]byte, 20)...) }(), "magic"},
		{"crc", mod(func(b []byte) []byte { b[9] ^= 1; return b }), "checksum mismatch"},
		{"payload bit", mod(func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }), "checksum mismatch"},
		{"truncated", good[:len(good)-1], "header says"},
		{"trailing", append(append([]byte(nil), good...), 0), "header says"},
		{"huge length", mod(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[12:], 1<<62); return b }), "header says"},
		{"crc ok, no protobuf", func() []byte {
			p := []byte{0xff, 0xff}
			h := make([]byte, SnapshotHeaderSize)
			copy(h, SnapshotMagic)
			binary.LittleEndian.PutUint32(h[8:], Checksum(p))
			binary.LittleEndian.PutUint64(h[12:], 2)
			return append(h, p...)
		}(), "does not decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := DecodeSnapshot(tc.data)
			if s != nil || !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, %v; want ErrBadSnapshot ~%q", s, err, tc.want)
			}
		})
	}
	// Every single-byte change is caught.
	for i := range good {
		b := append([]byte(nil), good...)
		b[i] ^= 0x01
		if _, err := DecodeSnapshot(b); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("flip at %d not detected: %v", i, err)
		}
	}
}

func TestSnapshotValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(s *schema.Snapshot)
		want string
	}{
		{"id 0", func(s *schema.Snapshot) { s.Jobs[0].Id = 0 }, "id 0"},
		{"id at next_id", func(s *schema.Snapshot) { s.Jobs[1].Id = s.NextId }, "not below next_id"},
		{"dup id", func(s *schema.Snapshot) { s.Jobs[1].Id = s.Jobs[0].Id }, "appears twice"},
		{"seq at next_seq", func(s *schema.Snapshot) { s.Jobs[2].Seq = s.NextSeq }, "not below next_seq"},
		{"unknown state", func(s *schema.Snapshot) { s.Jobs[0].State = 7 }, "unknown state 7"},
		{"unnamed schedule", func(s *schema.Snapshot) { s.Schedules[1].Name = "" }, "no name"},
		{"dup schedule", func(s *schema.Snapshot) { s.Schedules[1].Name = "nightly" }, `"nightly" appears twice`},
		{"key without queue", func(s *schema.Snapshot) { s.Keys[0].Queue = "" }, "key 0 has no queue"},
		{"empty key", func(s *schema.Snapshot) { s.Keys[1].Key = "" }, "is 0 bytes, want 1 to 128"},
		{"long key", func(s *schema.Snapshot) { s.Keys[1].Key = strings.Repeat("k", 129) }, "is 129 bytes"},
		{"key of job 0", func(s *schema.Snapshot) { s.Keys[0].Id = 0 }, "names job id 0"},
		{"key at next_id", func(s *schema.Snapshot) { s.Keys[1].Id = s.NextId }, "names job id 100, not in [1, next_id 100)"},
		{"short digest", func(s *schema.Snapshot) { s.Keys[0].Sum = s.Keys[0].Sum[:31] }, "digest of 31 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sampleSnapshot()
			tc.edit(s)
			if _, err := EncodeSnapshot(s); !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("EncodeSnapshot: %v, want ~%q", err, tc.want)
			}
			// The same state written by someone else is refused on read.
			p, _ := proto.Marshal(s)
			h := make([]byte, SnapshotHeaderSize)
			copy(h, SnapshotMagic)
			binary.LittleEndian.PutUint32(h[8:], Checksum(p))
			binary.LittleEndian.PutUint64(h[12:], uint64(len(p)))
			if _, err := DecodeSnapshot(append(h, p...)); !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeSnapshot: %v, want ~%q", err, tc.want)
			}
		})
	}
	if _, err := EncodeSnapshot(nil); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("nil: %v", err)
	}
}

func TestPropSnapshotRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := &schema.Snapshot{Lsn: rapid.Uint64().Draw(t, "lsn")}
		n := rapid.IntRange(0, 20).Draw(t, "jobs")
		s.NextId, s.NextSeq = uint64(n)+1+rapid.Uint64Range(0, 9).Draw(t, "idSlack"), uint64(n)+rapid.Uint64Range(0, 9).Draw(t, "seqSlack")
		for i := 0; i < n; i++ {
			s.Jobs = append(s.Jobs, &schema.SnapshotJob{
				Id: uint64(i + 1), Queue: genName.Draw(t, "queue"), QueueId: rapid.Uint32().Draw(t, "qid"), Payload: genBytes.Draw(t, "payload"),
				Priority: rapid.Int32().Draw(t, "prio"), State: schema.JobState(rapid.IntRange(0, 2).Draw(t, "state")),
				RunAt: rapid.Int64().Draw(t, "runAt"), Seq: uint64(i), EnqueuedAt: rapid.Int64().Draw(t, "enq"),
				ExpiresAt: rapid.Int64().Draw(t, "exp"), Attempts: rapid.Uint32().Draw(t, "att"), Stamps: genStamps(t),
				Host: genName.Draw(t, "host"), Pin: genName.Draw(t, "pin"), Claims: rapid.Uint32().Draw(t, "claims"), Resource: rapid.Uint32().Draw(t, "res"), ClaimedAt: rapid.Int64().Draw(t, "cl"),
				ClaimExpiresAt: rapid.Int64().Draw(t, "clx"), LastError: genName.Draw(t, "err"), DiedAt: rapid.Int64().Draw(t, "died"),
			})
		}
		for i, name := range rapid.SliceOfNDistinct(rapid.StringN(1, 10, -1), 0, 5, rapid.ID[string]).Draw(t, "schedules") {
			s.Schedules = append(s.Schedules, &schema.SnapshotSchedule{Name: name, Spec: "@every 1h", NextFire: int64(i)})
		}
		b, err := EncodeSnapshot(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSnapshot(b)
		if err != nil || !proto.Equal(got, s) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
