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
	job   []byte // the last job's encoding (appendJob), reused
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
		if body, ok := appendJob(e.job[:0], j); ok {
			e.job = body
			e.out = protowire.AppendBytes(protowire.AppendTag(e.out, 4, protowire.BytesType), body)
		} else {
			e.out, e.err = appendMessage(e.out, 4, j)
		}
	}
	e.flush(false)
	return e.err
}

// appendJob appends the deterministic marshal of j's fields (the bytes
// sizedOpts.MarshalAppend gives: fields in number order, proto3's zero
// values left out), written by hand: proto's reflection over 22 fields
// was most of a checkpoint's encode. false, with out unspecified, for a
// job the hand encoder leaves to proto: one with unknown fields or a
// string that is not valid UTF-8 (proto refuses it, with its error).
// TestPropAppendJobIsMarshal.
func appendJob(out []byte, j *schema.SnapshotJob) ([]byte, bool) {
	if len(j.ProtoReflect().GetUnknown()) > 0 || !utf8.ValidString(j.Queue) || !utf8.ValidString(j.Host) ||
		!utf8.ValidString(j.LastError) || !utf8.ValidString(j.Pin) {
		return out, false
	}
	out = appendUint(out, 1, j.Id)
	out = appendString(out, 2, j.Queue)
	out = appendUint(out, 3, uint64(j.QueueId))
	if len(j.Payload) > 0 {
		out = protowire.AppendBytes(protowire.AppendTag(out, 4, protowire.BytesType), j.Payload)
	}
	out = appendUint(out, 5, uint64(int64(j.Priority))) // int32: sign-extended, as proto's
	out = appendUint(out, 6, uint64(int64(j.State)))
	out = appendUint(out, 7, uint64(j.RunAt))
	out = appendUint(out, 8, j.Seq)
	out = appendUint(out, 9, uint64(j.EnqueuedAt))
	out = appendUint(out, 10, uint64(j.ExpiresAt))
	out = appendUint(out, 11, uint64(j.Attempts))
	if st := j.Stamps; st != nil {
		if len(st.ProtoReflect().GetUnknown()) > 0 {
			return out, false
		}
		n := sizeUint(1, uint64(st.VisibilityTimeoutS)) + sizeUint(2, uint64(st.MaxAttempts)) +
			sizeUint(3, uint64(st.BackoffBaseS)) + sizeUint(4, uint64(st.DeadLetterRetentionS))
		out = protowire.AppendVarint(protowire.AppendTag(out, 12, protowire.BytesType), uint64(n))
		out = appendUint(out, 1, uint64(st.VisibilityTimeoutS))
		out = appendUint(out, 2, uint64(st.MaxAttempts))
		out = appendUint(out, 3, uint64(st.BackoffBaseS))
		out = appendUint(out, 4, uint64(st.DeadLetterRetentionS))
	}
	out = appendString(out, 13, j.Host)
	out = appendUint(out, 14, uint64(j.Resource))
	out = appendUint(out, 15, uint64(j.ClaimedAt))
	out = appendUint(out, 16, uint64(j.ClaimExpiresAt))
	out = appendString(out, 17, j.LastError)
	out = appendUint(out, 18, uint64(j.DiedAt))
	out = appendString(out, 19, j.Pin)
	out = appendUint(out, 20, uint64(j.Claims))
	out = appendUint(out, 21, j.ClaimTerm)
	out = appendUint(out, 22, j.ClaimLsn)
	return out, true
}

// appendKey is appendJob of an idempotency key (TestPropAppendKeyIsMarshal).
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

// sizeUint is the size appendUint gives the field.
func sizeUint(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
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
