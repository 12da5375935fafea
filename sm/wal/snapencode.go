package wal

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
)

// SnapshotEncoder builds a snapshot file as a stream: the head, then each
// job and each schedule as the caller hands it over (one message it may
// reuse), then the file. The bytes are those the deterministic marshal of
// the whole schema.Snapshot gives (fields in number order: lsn, next_id,
// next_seq, jobs, schedules, term, keys), without a message per job held at once:
// a checkpoint of 1M jobs allocates the file and nothing per job. Each job
// schedule and key is checked as ValidateSnapshot checks it.
type SnapshotEncoder struct {
	out   []byte
	c     *snapCheck
	term  uint64
	sched bool // a schedule was written: no job may follow
	keys  bool // a key was written, after the term: nothing else may follow
	err   error
	// A stream (Stream): out is written to w each time it reaches piece
	// bytes; crc and n are the checksum and length of the body so far.
	w     io.Writer
	piece int
	crc   uint32
	n     uint64
	body  int    // where the body starts in out: the header until the first write
	job   []byte // the last key's encoding (appendKey), reused
}

// NewSnapshotEncoder starts a snapshot of the given head for about jobs
// jobs and schedules schedules (and any number of keys); sizeHint is the payload's expected size.
func NewSnapshotEncoder(lsn, term, nextID, nextSeq uint64, jobs, schedules, sizeHint int) *SnapshotEncoder {
	out := make([]byte, SnapshotHeaderSize, SnapshotHeaderSize+max(sizeHint, 0))
	out = appendUint(out, 1, lsn)
	out = appendUint(out, 2, nextID)
	out = appendUint(out, 3, nextSeq)
	return &SnapshotEncoder{out: out, c: newSnapCheck(nextID, nextSeq, jobs, schedules), term: term, body: SnapshotHeaderSize}
}

// Stream makes e write the file to w as it goes, in pieces of about piece
// bytes, instead of holding it whole (a checkpoint of 1M jobs would hold
// ~250 MB): Finish then returns only the header, which Stream wrote as
// zeros (its checksum and length are known only at the end), for the
// caller to write at offset 0. Call it before the first job.
func (e *SnapshotEncoder) Stream(w io.Writer, piece int) {
	e.w, e.piece = w, max(piece, 1)
}

// flush writes out to the stream once it holds a piece (any bytes, when
// all): the header's zeros stay out of the checksum.
func (e *SnapshotEncoder) flush(all bool) {
	if e.w == nil || e.err != nil || len(e.out) < e.piece && !all {
		return
	}
	p := e.out[e.body:]
	e.crc = crc32.Update(e.crc, castagnoli, p)
	e.n += uint64(len(p))
	if _, err := e.w.Write(e.out); err != nil {
		e.err = err
	}
	e.out, e.body = e.out[:0], 0
}

// Job appends j (not kept).
func (e *SnapshotEncoder) Job(j *schema.SnapshotJob) error {
	if e.err == nil && (e.sched || e.keys) {
		e.err = badSnap("job %d after a schedule or key", j.GetId())
	}
	if e.err == nil {
		e.err = e.c.job(j)
	}
	if e.err == nil {
		e.out, e.err = appendSnapshotJob(e.out, 4, j)
	}
	e.flush(false)
	return e.err
}

// appendKey appends the deterministic marshal of k's fields, by hand as
// appendSnapshotJob does a job's; false (out unspecified) for a key it
// leaves to proto: one with unknown fields or a string that is not valid
// UTF-8. TestPropAppendKeyIsMarshal.
func appendKey(out []byte, k *schema.SnapshotKey) ([]byte, bool) {
	if len(k.ProtoReflect().GetUnknown()) > 0 || !utf8.ValidString(k.Queue) || !utf8.ValidString(k.Key) {
		return out, false
	}
	out = appendString(out, 1, k.Queue)
	out = appendString(out, 2, k.Key)
	out = appendUint(out, 3, k.Id)
	if len(k.Sum) > 0 {
		out = protowire.AppendBytes(protowire.AppendTag(out, 4, protowire.BytesType), k.Sum)
	}
	out = appendUint(out, 5, uint64(k.ExpiresAt))
	return out, true
}

// appendString appends a string field; proto3 omits an empty one.
func appendString(out []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return out
	}
	return protowire.AppendString(protowire.AppendTag(out, num, protowire.BytesType), v)
}

// Schedule appends s (not kept).
func (e *SnapshotEncoder) Schedule(s *schema.SnapshotSchedule) error {
	e.sched = true
	if e.err == nil && e.keys {
		e.err = badSnap("schedule %q after a key", s.GetName())
	}
	if e.err == nil {
		e.err = e.c.schedule(s)
	}
	if e.err == nil {
		e.out, e.err = appendMessage(e.out, 5, s)
	}
	e.flush(false)
	return e.err
}

// Key appends k (not kept), after every job and schedule. The term
// (field 6) goes before the first key (field 7), as the deterministic
// marshal orders them.
func (e *SnapshotEncoder) Key(k *schema.SnapshotKey) error {
	if !e.keys {
		e.keys = true
		e.out = appendUint(e.out, 6, e.term)
	}
	if e.err == nil {
		e.err = e.c.key(k)
	}
	if e.err == nil {
		if body, ok := appendKey(e.job[:0], k); ok {
			e.job = body
			e.out = protowire.AppendBytes(protowire.AppendTag(e.out, 7, protowire.BytesType), body)
		} else {
			e.out, e.err = appendMessage(e.out, 7, k)
		}
	}
	e.flush(false)
	return e.err
}

// Finish returns the file's bytes (a stream: its header), or the first
// error (of the stream's writer too).
func (e *SnapshotEncoder) Finish() ([]byte, error) {
	if e.err != nil {
		return nil, e.err
	}
	if !e.keys {
		e.out = appendUint(e.out, 6, e.term)
	}
	out := e.out
	if e.w != nil {
		if e.flush(true); e.err != nil {
			return nil, e.err
		}
		out = make([]byte, SnapshotHeaderSize)
	} else {
		e.crc, e.n = Checksum(out[SnapshotHeaderSize:]), uint64(len(out)-SnapshotHeaderSize)
	}
	copy(out, SnapshotMagic)
	binary.LittleEndian.PutUint32(out[8:], e.crc)
	binary.LittleEndian.PutUint64(out[12:], e.n)
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
