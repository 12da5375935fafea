package wal

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/idset"
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
	if s == nil {
		return nil, badSnap("nil snapshot")
	}
	e := NewSnapshotEncoder(s.GetLsn(), s.GetTerm(), s.GetNextId(), s.GetNextSeq(), len(s.GetJobs()), len(s.GetSchedules()), marshalOpts.Size(s))
	for _, j := range s.GetJobs() {
		if err := e.Job(j); err != nil {
			return nil, err
		}
	}
	for _, sc := range s.GetSchedules() {
		if err := e.Schedule(sc); err != nil {
			return nil, err
		}
	}
	for _, k := range s.GetKeys() {
		if err := e.Key(k); err != nil {
			return nil, err
		}
	}
	return e.Finish()
}

// DecodeSnapshot parses and validates snapshot file contents: magic,
// length (the file is exactly header + payload), CRC32C, protobuf, then
// ValidateSnapshot. Every error wraps ErrBadSnapshot and says what failed.
// ReadSnapshot does the same as a stream.
func DecodeSnapshot(data []byte) (*schema.Snapshot, error) {
	p, err := snapshotPayload(data)
	if err != nil {
		return nil, err
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
// known state; every schedule has a unique, non-empty name; every
// idempotency key names a queue and a job id below next_id, is 1 to
// MaxKeyLen bytes and carries a SHA-256. A nil snapshot is refused.
func ValidateSnapshot(s *schema.Snapshot) error {
	if s == nil {
		return badSnap("nil snapshot")
	}
	c := newSnapCheck(s.GetNextId(), s.GetNextSeq(), len(s.GetJobs()), len(s.GetSchedules()))
	for _, j := range s.GetJobs() {
		if err := c.job(j); err != nil {
			return err
		}
	}
	for _, sc := range s.GetSchedules() {
		if err := c.schedule(sc); err != nil {
			return err
		}
	}
	for _, k := range s.GetKeys() {
		if err := c.key(k); err != nil {
			return err
		}
	}
	return nil
}

// snapCheck is ValidateSnapshot's state, one job or schedule at a time
// (ReadSnapshot checks a stream with it).
type snapCheck struct {
	nextID, nextSeq uint64
	ids             *idset.Set
	names           map[string]struct{}
	keys            int // keys checked so far
}

func newSnapCheck(nextID, nextSeq uint64, jobs, schedules int) *snapCheck {
	return &snapCheck{nextID: nextID, nextSeq: nextSeq, ids: idset.New(jobs), names: make(map[string]struct{}, schedules)}
}

func (c *snapCheck) job(j *schema.SnapshotJob) error {
	i, id := c.ids.Len(), j.GetId()
	switch {
	case id == 0:
		return badSnap("job %d has id 0", i)
	case id >= c.nextID:
		return badSnap("job %d has id %d, not below next_id %d", i, id, c.nextID)
	case j.GetSeq() >= c.nextSeq:
		return badSnap("job %d (id %d) has seq %d, not below next_seq %d", i, id, j.GetSeq(), c.nextSeq)
	}
	if !c.ids.Add(id) {
		return badSnap("job id %d appears twice", id)
	}
	if _, known := schema.JobState_name[int32(j.GetState())]; !known {
		return badSnap("job %d (id %d) has unknown state %d", i, id, j.GetState())
	}
	return nil
}

func (c *snapCheck) schedule(sc *schema.SnapshotSchedule) error {
	if sc.GetName() == "" {
		return badSnap("schedule %d has no name", len(c.names))
	}
	if _, dup := c.names[sc.GetName()]; dup {
		return badSnap("schedule %q appears twice", sc.GetName())
	}
	c.names[sc.GetName()] = struct{}{}
	return nil
}

// MaxKeyLen bounds an idempotency key in a snapshot, as the queue bounds
// it (queue.MaxKeyLen).
const MaxKeyLen = 128

func (c *snapCheck) key(k *schema.SnapshotKey) error {
	i := c.keys
	c.keys++
	switch {
	case k.GetQueue() == "":
		return badSnap("key %d has no queue", i)
	case len(k.GetKey()) == 0 || len(k.GetKey()) > MaxKeyLen:
		return badSnap("key %d (queue %q) is %d bytes, want 1 to %d", i, k.GetQueue(), len(k.GetKey()), MaxKeyLen)
	case k.GetId() == 0 || k.GetId() >= c.nextID:
		return badSnap("key %d (%q of queue %q) names job id %d, not in [1, next_id %d)", i, k.GetKey(), k.GetQueue(), k.GetId(), c.nextID)
	case len(k.GetSum()) != sha256.Size:
		return badSnap("key %d (%q of queue %q) has a digest of %d bytes, want %d", i, k.GetKey(), k.GetQueue(), len(k.GetSum()), sha256.Size)
	}
	return nil
}

// SnapshotHead is a snapshot's scalar fields.
type SnapshotHead struct {
	LSN, Term, NextID, NextSeq uint64
	Jobs, Schedules, Keys      int // how many follow
}

// SnapshotVisitor receives a snapshot streamed by ReadSnapshot: Head
// first, then each job, schedule and idempotency key in file order (Key
// may be nil: the keys are checked and skipped). The message handed to
// Job or Schedule, and a job's stamps, are reused for the next one: keep
// the scalars, strings and bytes its getters return (strings are never
// changed, and each payload is a buffer of its own), never a message. An
// error from a visitor stops the read and is returned as is.
type SnapshotVisitor struct {
	Head     func(SnapshotHead) error
	Job      func(*schema.SnapshotJob) error
	Schedule func(*schema.SnapshotSchedule) error
	Key      func(*schema.SnapshotKey) error
}

// ReadSnapshot is DecodeSnapshot as a stream: the same checks (header,
// CRC32C, each message's decoding, ValidateSnapshot's invariants), each
// error wrapping ErrBadSnapshot, without building the whole message — one
// job is decoded at a time (by hand: jobDecoder). A pass over the top level first finds the
// scalars (snapshotHead), so that jobs are checked as they come.
// The visitors may have run for a prefix before an error.
func ReadSnapshot(data []byte, v SnapshotVisitor) error {
	p, h, err := snapshotChecked(data)
	if err != nil {
		return err
	}
	return readPayloadWith(p, h, v)
}

// ReadCheckedSnapshot is ReadSnapshot of bytes SnapshotPosition accepted,
// with h, and nothing has written since (the boot scan's copy of the
// file, handed to recovery): the header is checked again, but neither the
// CRC32C of the whole payload nor the pass that found h is done a second
// time over the same bytes. Every check of the jobs and schedules is
// ReadSnapshot's.
func ReadCheckedSnapshot(data []byte, h SnapshotHead, v SnapshotVisitor) error {
	p, err := snapshotFramed(data)
	if err != nil {
		return err
	}
	return readPayloadWith(p, h, v)
}

// readPayloadWith is ReadSnapshot of the payload p, whose head is h.
func readPayloadWith(p []byte, h SnapshotHead, v SnapshotVisitor) error {
	return readFieldsWith(payloadFields(p).each, h, v, false)
}

// payloadFields is a payload in memory, walked by eachField.
type payloadFields []byte

func (p payloadFields) each(fn fieldFunc) error { return eachField(p, fn) }

// fieldFunc receives one top-level field (eachField).
type fieldFunc = func(num protowire.Number, typ protowire.Type, value []byte) error

// readFieldsWith is ReadSnapshot of the payload whose top-level fields
// each walks (eachField over the bytes, or over a file's windows), whose
// head is h. borrow hands each job's payload to v as a slice of what each
// walks, valid during the call only, instead of a copy of its own.
func readFieldsWith(each func(fieldFunc) error, h SnapshotHead, v SnapshotVisitor, borrow bool) error {
	if err := v.Head(h); err != nil {
		return err
	}
	c := newSnapCheck(h.NextID, h.NextSeq, h.Jobs, h.Schedules)
	jobs, sched, key := &jobDecoder{borrow: borrow}, new(schema.SnapshotSchedule), new(schema.SnapshotKey)
	return each(func(num protowire.Number, typ protowire.Type, b []byte) error {
		if typ != protowire.BytesType || num != snapJobsField && num != snapSchedField && num != snapKeysField {
			return nil
		}
		m, _ := protowire.ConsumeBytes(b)
		if num == snapKeysField {
			if err := proto.Unmarshal(m, key); err != nil {
				return badSnap("key %d does not decode: %v", c.keys, err)
			}
			if err := c.key(key); err != nil {
				return err
			}
			if v.Key == nil {
				return nil
			}
			return v.Key(key)
		}
		if num == snapJobsField {
			job, err := jobs.decode(m)
			if err != nil {
				return badSnap("job %d does not decode: %v", c.ids.Len(), err)
			}
			if err := c.job(job); err != nil {
				return err
			}
			return v.Job(job)
		}
		if err := proto.Unmarshal(m, sched); err != nil {
			return badSnap("schedule %d does not decode: %v", len(c.names), err)
		}
		if err := c.schedule(sched); err != nil {
			return err
		}
		return v.Schedule(sched)
	})
}
