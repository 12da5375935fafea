package wal

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"xce/schema"
)

// Snapshot file format:
//
//	[8] magic "XCESNAP1"
//	[4] CRC32C of the payload, little-endian
//	[8] payload length, little-endian; the file ends right after it
//	[n] payload: one protobuf schema.Snapshot
const (
	SnapshotMagic      = "XCESNAP1"
	SnapshotHeaderSize = 8 + 4 + 8
)

// ErrBadSnapshot is wrapped by every error of EncodeSnapshot and
// DecodeSnapshot.
var ErrBadSnapshot = errors.New("wal: bad snapshot")

func badSnap(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadSnapshot, fmt.Sprintf(format, args...))
}

// EncodeSnapshot returns the file contents for s. It refuses a snapshot
// that DecodeSnapshot would refuse (see ValidateSnapshot), so a snapshot
// once written can always be read back.
func EncodeSnapshot(s *schema.Snapshot) ([]byte, error) {
	if err := ValidateSnapshot(s); err != nil {
		return nil, err
	}
	out := make([]byte, SnapshotHeaderSize, SnapshotHeaderSize+marshalOpts.Size(s))
	out, err := marshalOpts.MarshalAppend(out, s)
	if err != nil {
		return nil, badSnap("encode: %v", err)
	}
	p := out[SnapshotHeaderSize:]
	copy(out, SnapshotMagic)
	binary.LittleEndian.PutUint32(out[8:], Checksum(p))
	binary.LittleEndian.PutUint64(out[12:], uint64(len(p)))
	return out, nil
}

// DecodeSnapshot parses and validates snapshot file contents: magic,
// length (the file is exactly header + payload), CRC32C, protobuf, then
// ValidateSnapshot. Every error wraps ErrBadSnapshot and says what failed.
func DecodeSnapshot(data []byte) (*schema.Snapshot, error) {
	if len(data) < SnapshotHeaderSize {
		return nil, badSnap("%d bytes, shorter than the %d-byte header", len(data), SnapshotHeaderSize)
	}
	if string(data[:8]) != SnapshotMagic {
		return nil, badSnap("magic %q, want %q", data[:8], SnapshotMagic)
	}
	n := binary.LittleEndian.Uint64(data[12:])
	if have := uint64(len(data) - SnapshotHeaderSize); n != have {
		return nil, badSnap("header says %d payload bytes, file has %d", n, have)
	}
	p := data[SnapshotHeaderSize:]
	if want, got := binary.LittleEndian.Uint32(data[8:]), Checksum(p); want != got {
		return nil, badSnap("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	s := new(schema.Snapshot)
	if err := proto.Unmarshal(p, s); err != nil {
		return nil, badSnap("payload does not decode: %v", err)
	}
	if err := ValidateSnapshot(s); err != nil {
		return nil, err
	}
	return s, nil
}

// ValidateSnapshot checks the invariants a snapshot's state must hold:
// every job has an id in [1, next_id), unique, a seq below next_seq and a
// known state; every schedule has a unique, non-empty name. A nil snapshot
// is refused.
func ValidateSnapshot(s *schema.Snapshot) error {
	if s == nil {
		return badSnap("nil snapshot")
	}
	ids := make(map[uint64]struct{}, len(s.GetJobs()))
	for i, j := range s.GetJobs() {
		id := j.GetId()
		switch {
		case id == 0:
			return badSnap("job %d has id 0", i)
		case id >= s.GetNextId():
			return badSnap("job %d has id %d, not below next_id %d", i, id, s.GetNextId())
		case j.GetSeq() >= s.GetNextSeq():
			return badSnap("job %d (id %d) has seq %d, not below next_seq %d", i, id, j.GetSeq(), s.GetNextSeq())
		}
		if _, dup := ids[id]; dup {
			return badSnap("job id %d appears twice", id)
		}
		ids[id] = struct{}{}
		if _, known := schema.JobState_name[int32(j.GetState())]; !known {
			return badSnap("job %d (id %d) has unknown state %d", i, id, j.GetState())
		}
	}
	names := make(map[string]struct{}, len(s.GetSchedules()))
	for i, sc := range s.GetSchedules() {
		if sc.GetName() == "" {
			return badSnap("schedule %d has no name", i)
		}
		if _, dup := names[sc.GetName()]; dup {
			return badSnap("schedule %q appears twice", sc.GetName())
		}
		names[sc.GetName()] = struct{}{}
	}
	return nil
}
