package wal

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"xce/schema"
)

// SnapshotEncoder builds a snapshot file as a stream: the head, then each
// job and each schedule as the caller hands it over (one message it may
// reuse), then the file. The bytes are those the deterministic marshal of
// the whole schema.Snapshot gives (fields in number order: lsn, next_id,
// next_seq, jobs, schedules, term), without a message per job held at once:
// a checkpoint of 1M jobs allocates the file and nothing per job. Each job
// and schedule is checked as ValidateSnapshot checks it.
type SnapshotEncoder struct {
	out   []byte
	c     *snapCheck
	term  uint64
	sched bool // a schedule was written: no job may follow
	err   error
}

// NewSnapshotEncoder starts a snapshot of the given head for about jobs
// jobs and schedules schedules; sizeHint is the payload's expected size.
func NewSnapshotEncoder(lsn, term, nextID, nextSeq uint64, jobs, schedules, sizeHint int) *SnapshotEncoder {
	out := make([]byte, SnapshotHeaderSize, SnapshotHeaderSize+max(sizeHint, 0))
	out = appendUint(out, 1, lsn)
	out = appendUint(out, 2, nextID)
	out = appendUint(out, 3, nextSeq)
	return &SnapshotEncoder{out: out, c: newSnapCheck(nextID, nextSeq, jobs, schedules), term: term}
}

// Job appends j (not kept).
func (e *SnapshotEncoder) Job(j *schema.SnapshotJob) error {
	if e.err == nil && e.sched {
		e.err = badSnap("job %d after a schedule", j.GetId())
	}
	if e.err == nil {
		e.err = e.c.job(j)
	}
	if e.err == nil {
		e.out, e.err = appendMessage(e.out, 4, j)
	}
	return e.err
}

// Schedule appends s (not kept).
func (e *SnapshotEncoder) Schedule(s *schema.SnapshotSchedule) error {
	e.sched = true
	if e.err == nil {
		e.err = e.c.schedule(s)
	}
	if e.err == nil {
		e.out, e.err = appendMessage(e.out, 5, s)
	}
	return e.err
}

// Finish returns the file's bytes, or the first error.
func (e *SnapshotEncoder) Finish() ([]byte, error) {
	if e.err != nil {
		return nil, e.err
	}
	out := appendUint(e.out, 6, e.term)
	p := out[SnapshotHeaderSize:]
	copy(out, SnapshotMagic)
	binary.LittleEndian.PutUint32(out[8:], Checksum(p))
	binary.LittleEndian.PutUint64(out[12:], uint64(len(p)))
	e.err = badSnap("encoder finished")
	return out, nil
}

// appendUint appends a varint field; proto3 omits a zero.
func appendUint(out []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return out
	}
	return protowire.AppendVarint(protowire.AppendTag(out, num, protowire.VarintType), v)
}

func appendMessage(out []byte, num protowire.Number, m proto.Message) ([]byte, error) {
	out = protowire.AppendTag(out, num, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(marshalOpts.Size(m)))
	out, err := sizedOpts.MarshalAppend(out, m) // sized just above
	if err != nil {
		return nil, badSnap("encode: %v", err)
	}
	return out, nil
}
