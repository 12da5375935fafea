package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/wal"
)

func walStamps() *schema.WalStamps {
	return &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 5, BackoffBaseS: 2, DeadLetterRetentionS: 86400}
}

// walSeedRecs: one record per kind of operation, LSNs 1.., every field set
// somewhere.
func walSeedRecs() []*schema.WalRecord {
	h := &schema.WalHandle{Id: 3, Attempt: 2}
	recs := []*schema.WalRecord{
		{Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "default", QueueId: 1, Payload: []byte("payload"),
			Stamps: walStamps(), Priority: -3, Delay: 10, RunAt: 1_700_000_100, Expires: 1_700_003_600, Resource: 2, Host: "node-a"}}},
		{Op: &schema.WalRecord_ClaimBatch{ClaimBatch: &schema.WalClaimBatch{Queue: "default", QueueId: 1, Host: "node-a", Max: 16}}},
		{Op: &schema.WalRecord_Heartbeat{Heartbeat: &schema.WalHeartbeat{Handle: h}}},
		{Op: &schema.WalRecord_Retry{Retry: &schema.WalRetry{Handle: h, Error: "exit 1"}}},
		{Op: &schema.WalRecord_AckBatch{AckBatch: &schema.WalAckBatch{Handles: []*schema.WalHandle{h, {Id: 4, Attempt: 1}}}}},
		{Op: &schema.WalRecord_Ack{Ack: &schema.WalAck{Handle: h}}},
		{Op: &schema.WalRecord_Fail{Fail: &schema.WalFail{Handle: h, Error: "bad input"}}},
		{Op: &schema.WalRecord_Cancel{Cancel: &schema.WalCancel{Id: 9}}},
		{Op: &schema.WalRecord_SweepExpired{SweepExpired: &schema.WalSweepExpired{}}},
		{Op: &schema.WalRecord_Redrive{Redrive: &schema.WalRedrive{Id: 9}}},
		{Op: &schema.WalRecord_Register{Register: &schema.WalRegister{Name: "nightly", Spec: "@every 1d", Queue: "default", QueueId: 1,
			Payload: []byte("n"), Stamps: walStamps(), Fire: &schema.WalFireOpts{Priority: 1, ExpiresS: 3600}}}},
		{Op: &schema.WalRecord_Tick{Tick: &schema.WalTick{}}},
		{Op: &schema.WalRecord_Unregister{Unregister: &schema.WalUnregister{Name: "nightly"}}},
	}
	for i, r := range recs {
		r.Lsn, r.Now = uint64(i+1), 1_700_000_000+int64(i)
	}
	return recs
}

func walSegment(f testing.TB, recs []*schema.WalRecord) []byte {
	var seg []byte
	for _, r := range recs {
		var err error
		if seg, err = wal.AppendFrame(seg, r); err != nil {
			f.Fatal(err)
		}
	}
	return seg
}

// FuzzWALRecord: decoding an arbitrary frame payload never panics and
// fails only with the package's sentinels; a decoded record frames, scans
// back equal, and its encoding is a fixed point.
func FuzzWALRecord(f *testing.F) {
	for _, r := range walSeedRecs() {
		p, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p)
	}
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x00})
	f.Fuzz(func(t *testing.T, p []byte) {
		rec, err := wal.DecodeRecord(p)
		if err != nil {
			if rec != nil || !errors.Is(err, wal.ErrBadRecord) && !errors.Is(err, wal.ErrRecordTooBig) {
				t.Fatalf("DecodeRecord: %v, %v", rec, err)
			}
			return
		}
		frame, err := wal.AppendFrame(nil, rec)
		if errors.Is(err, wal.ErrRecordTooBig) && len(p) > wal.MaxRecordSize/2 {
			return // re-encoding may grow (e.g. a 5-byte negative int32 becomes 10)
		}
		if err != nil {
			t.Fatalf("AppendFrame(decoded): %v", err)
		}
		recs, n, err := wal.Scan(frame)
		if err != nil || n != len(frame) || len(recs) != 1 || !proto.Equal(recs[0], rec) {
			t.Fatalf("Scan(AppendFrame(rec)) = %d recs, %d/%d, %v", len(recs), n, len(frame), err)
		}
		again, err := wal.AppendFrame(nil, recs[0])
		if err != nil || !bytes.Equal(again, frame) {
			t.Fatalf("encoding not a fixed point: %x vs %x (%v)", frame, again, err)
		}
	})
}

// FuzzWALSegment: scanning arbitrary bytes never panics and returns a
// prefix: validLen in [0, len], records with strictly increasing LSNs that
// are exactly what scanning data[:validLen] gives, and either nil (a torn
// tail at validLen) or a *CorruptError at validLen.
func FuzzWALSegment(f *testing.F) {
	seg := walSegment(f, walSeedRecs())
	f.Add(seg)
	f.Add(seg[:len(seg)-3])
	f.Add(append(append([]byte(nil), seg...), make([]byte, 64)...))
	bad := append([]byte(nil), seg...)
	bad[len(seg)/2] ^= 0x20
	f.Add(bad)
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, n, err := wal.Scan(data)
		if n < 0 || n > len(data) {
			t.Fatalf("validLen %d of %d", n, len(data))
		}
		if err != nil {
			var ce *wal.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, wal.ErrCorrupt) || ce.Offset != n {
				t.Fatalf("error %v (validLen %d) is not a CorruptError at validLen", err, n)
			}
			if ce.ValidAt != -1 && (ce.ValidAt <= ce.Offset || ce.ValidAt >= len(data)) {
				t.Fatalf("%+v: ValidAt out of range (len %d)", ce, len(data))
			}
		}
		var last uint64
		for i, r := range recs {
			if r.GetLsn() <= last {
				t.Fatalf("record %d: LSN %d after %d", i, r.GetLsn(), last)
			}
			last = r.GetLsn()
		}
		again, n2, err := wal.Scan(data[:n])
		if err != nil || n2 != n || len(again) != len(recs) {
			t.Fatalf("Scan(data[:validLen]) = %d recs, %d, %v; want %d recs, %d", len(again), n2, err, len(recs), n)
		}
		for i := range recs {
			if !proto.Equal(recs[i], again[i]) {
				t.Fatalf("record %d differs on rescan", i)
			}
		}
	})
}

// FuzzWALWalk: Walk decodes each frame's record (by hand for the hot
// operations, one decoder for the whole segment) exactly as proto.Unmarshal
// does: on a segment of the frames of up to two arbitrary payloads, each
// record fn sees is proto.Equal to proto.Unmarshal's (unknown fields
// included), and Walk stops where proto.Unmarshal fails or the LSN does
// not increase, with the error naming proto.Unmarshal's.
func FuzzWALWalk(f *testing.F) {
	recs := walSeedRecs()
	recs = append(recs,
		&schema.WalRecord{Lsn: 20, Op: &schema.WalRecord_EnqueueBatch{EnqueueBatch: &schema.WalEnqueueBatch{Queue: "default", QueueId: 1,
			Payloads: [][]byte{[]byte("a"), nil, []byte("c")}, Stamps: walStamps(), Priority: -1, Host: "node-a"}}},
		&schema.WalRecord{Lsn: 21, Term: 2, Op: &schema.WalRecord_Noop{Noop: &schema.WalNoop{}}})
	for i, r := range recs {
		p, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		next, err := proto.Marshal(recs[(i+1)%len(recs)])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p, next)
	}
	f.Add([]byte{0x08, 0x01}, []byte{0x08, 0x01}) // LSN does not increase
	f.Add([]byte{0x08, 0x01, 0x52, 0x03, 0x0a, 0x01, 0xff}, []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var seg []byte
		var payloads [][]byte
		for _, p := range [][]byte{a, b} {
			if len(p) == 0 || len(p) > wal.MaxRecordSize {
				continue // not a frame Walk reads as a record
			}
			seg = binary.LittleEndian.AppendUint32(seg, uint32(len(p)))
			seg = binary.LittleEndian.AppendUint32(seg, wal.Checksum(p))
			seg = append(seg, p...)
			payloads = append(payloads, p)
		}
		var (
			last    uint64
			off     int
			wantErr string
			want    []*schema.WalRecord
			offs    []int
		)
		for _, p := range payloads {
			rec := new(schema.WalRecord)
			if err := proto.Unmarshal(p, rec); err != nil {
				wantErr = fmt.Sprintf("wal: corrupt record at offset %d: checksum verifies but the record does not decode: %v", off, err)
				break
			}
			if rec.GetLsn() <= last {
				wantErr = fmt.Sprintf("wal: corrupt record at offset %d: LSN %d does not increase (previous %d)", off, rec.GetLsn(), last)
				break
			}
			last = rec.GetLsn()
			want, offs = append(want, rec), append(offs, off)
			off += wal.HeaderSize + len(p)
		}
		i := 0
		valid, err := wal.Walk(seg, func(o int, rec *schema.WalRecord) error {
			if i >= len(want) || o != offs[i] || !proto.Equal(rec, want[i]) {
				t.Fatalf("record %d at offset %d: %v; want %v", i, o, rec, want)
			}
			i++
			return nil
		})
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if i != len(want) || valid != off || gotErr != wantErr {
			t.Fatalf("Walk: %d records, valid %d, %q; want %d records, valid %d, %q", i, valid, gotErr, len(want), off, wantErr)
		}
	})
}

func snapSeeds() []*schema.Snapshot {
	full := &schema.Snapshot{
		Lsn: 10_000, NextId: 50, NextSeq: 80,
		Jobs: []*schema.SnapshotJob{
			{Id: 1, Queue: "default", QueueId: 1, Payload: []byte("p"), Priority: 2, State: schema.JobState_JOB_STATE_PENDING,
				RunAt: 1_700_000_100, Seq: 3, EnqueuedAt: 1_700_000_000, ExpiresAt: 1_700_003_600, Stamps: walStamps(), Resource: 2},
			{Id: 7, Queue: "gpu", QueueId: 2, State: schema.JobState_JOB_STATE_PROCESSING, Seq: 9, Attempts: 1, Claims: 2, Pin: "node-b", Stamps: walStamps(),
				Host: "node-b", ClaimedAt: 1_700_000_200, ClaimExpiresAt: 1_700_000_230},
			{Id: 8, Queue: "default", QueueId: 1, State: schema.JobState_JOB_STATE_DEAD, Seq: 10, Attempts: 5, Stamps: walStamps(),
				LastError: "max attempts exceeded", DiedAt: 1_700_000_300},
		},
		Schedules: []*schema.SnapshotSchedule{{Name: "nightly", Spec: "@every 1d", Queue: "default", QueueId: 1,
			Payload: []byte("n"), Stamps: walStamps(), Fire: &schema.WalFireOpts{Priority: 1, ExpiresS: 60}, NextFire: 1_700_006_400}},
	}
	return []*schema.Snapshot{full, {}, {Lsn: 1, NextId: 1}}
}

// FuzzSnapshot: decoding arbitrary bytes never panics and fails only with
// ErrBadSnapshot; a decoded snapshot re-encodes, decodes equal, and its
// encoding is a fixed point.
func FuzzSnapshot(f *testing.F) {
	for _, s := range snapSeeds() {
		b, err := wal.EncodeSnapshot(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(wal.SnapshotMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := wal.DecodeSnapshot(data)
		if err != nil {
			if s != nil || !errors.Is(err, wal.ErrBadSnapshot) {
				t.Fatalf("DecodeSnapshot: %v, %v", s, err)
			}
			return
		}
		enc, err := wal.EncodeSnapshot(s)
		if err != nil {
			t.Fatalf("EncodeSnapshot(decoded): %v", err)
		}
		s2, err := wal.DecodeSnapshot(enc)
		if err != nil || !proto.Equal(s, s2) {
			t.Fatalf("round trip: %v", err)
		}
		enc2, err := wal.EncodeSnapshot(s2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not a fixed point (%v)", err)
		}
	})
}
