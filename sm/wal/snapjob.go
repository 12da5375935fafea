package wal

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/xce-hpc/xce/schema"
)

// jobDecoder is proto.Unmarshal of one SnapshotJob, by hand: a snapshot's
// million jobs are most of a recovery's decoding, and the generic
// unmarshaller's per-field dispatch and allocations were half of it. It
// decodes the way proto.Unmarshal does for this message: the message is
// reset first; a scalar's last occurrence wins; repeated stamps merge; a
// field of a wire type other than its own, or of an unknown number, is
// skipped (proto keeps it as an unknown field, which nothing here reads);
// strings must be valid UTF-8 (proto3); broken wire format is an error.
// TestJobDecoderIsUnmarshal checks it against proto.Unmarshal.
//
// The message and its stamps are reused for the next job. Strings equal
// to the previous job's (a queue's name, a host's) share its string, and
// each payload is a buffer of its own unless it borrows.
type jobDecoder struct {
	job    schema.SnapshotJob
	stamps schema.WalStamps
	last   [4]string // the previous strings, by stringField
	// The previous job's first stamps field and what it decoded to: the
	// jobs of a queue carry the same few bytes, and most jobs' stamps are
	// the previous job's.
	lastStamps []byte
	lastVals   [4]uint32
	stampsOK   bool // lastStamps and lastVals hold a decoded stamps field
	// borrow: a payload is a slice of the bytes decoded, for a reader
	// whose visitor keeps nothing (ReadSnapshotAt), not a copy.
	borrow bool
}

// stringField indexes jobDecoder.last.
const (
	strQueue = iota
	strHost
	strLastError
	strPin
)

var (
	errInvalidUTF8 = errors.New("string field contains invalid UTF-8")
	errFieldNumber = errors.New("invalid field number")
)

// consumeTag is protowire.ConsumeTag refusing, as proto.Unmarshal does,
// a field number above the largest valid one.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, 0, protowire.ParseError(n)
	}
	if num > protowire.MaxValidNumber {
		return 0, 0, 0, errFieldNumber
	}
	return num, typ, n, nil
}

// decode decodes b into d.job and returns it.
func (d *jobDecoder) decode(b []byte) (*schema.SnapshotJob, error) {
	m := &d.job
	*m = schema.SnapshotJob{}
	for len(b) > 0 {
		num, typ, n, err := consumeTag(b)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		if typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			b = b[n:]
			d.varint(num, v)
			continue
		}
		if typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			b = b[n:]
			if err := d.bytesField(num, v); err != nil {
				return nil, err
			}
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return m, nil
}

func (d *jobDecoder) varint(num protowire.Number, v uint64) {
	m := &d.job
	switch num {
	case 1:
		m.Id = v
	case 3:
		m.QueueId = uint32(v)
	case 5:
		m.Priority = int32(v)
	case 6:
		m.State = schema.JobState(int32(v))
	case 7:
		m.RunAt = int64(v)
	case 8:
		m.Seq = v
	case 9:
		m.EnqueuedAt = int64(v)
	case 10:
		m.ExpiresAt = int64(v)
	case 11:
		m.Attempts = uint32(v)
	case 14:
		m.Resource = uint32(v)
	case 15:
		m.ClaimedAt = int64(v)
	case 16:
		m.ClaimExpiresAt = int64(v)
	case 18:
		m.DiedAt = int64(v)
	case 20:
		m.Claims = uint32(v)
	case 21:
		m.ClaimTerm = v
	case 22:
		m.ClaimLsn = v
	}
}

func (d *jobDecoder) bytesField(num protowire.Number, v []byte) error {
	m := &d.job
	var err error
	switch num {
	case 2:
		m.Queue, err = d.str(strQueue, "queue", v)
	case 4:
		if d.borrow {
			m.Payload = v
			break
		}
		m.Payload = append(make([]byte, 0, len(v)), v...)
	case 12:
		if m.Stamps != nil { // a repeat merges into the first
			err = decodeStamps(&d.stamps, v)
			break
		}
		m.Stamps = &d.stamps
		if d.stampsOK && bytes.Equal(v, d.lastStamps) {
			s, x := &d.stamps, d.lastVals
			s.VisibilityTimeoutS, s.MaxAttempts, s.BackoffBaseS, s.DeadLetterRetentionS = x[0], x[1], x[2], x[3]
			break
		}
		d.stamps, d.stampsOK = schema.WalStamps{}, false
		if err = decodeStamps(&d.stamps, v); err == nil {
			s := &d.stamps
			// A copy: the bytes a job is decoded from may be a window
			// that the next read overwrites (ReadSnapshotAt).
			d.lastStamps, d.stampsOK = append(d.lastStamps[:0], v...), true
			d.lastVals = [4]uint32{s.VisibilityTimeoutS, s.MaxAttempts, s.BackoffBaseS, s.DeadLetterRetentionS}
		}
	case 13:
		m.Host, err = d.str(strHost, "host", v)
	case 17:
		m.LastError, err = d.str(strLastError, "last_error", v)
	case 19:
		m.Pin, err = d.str(strPin, "pin", v)
	}
	return err
}

// str is v as a string, the previous job's if it is the same.
func (d *jobDecoder) str(i int, field string, v []byte) (string, error) {
	if s := d.last[i]; len(s) == len(v) && (len(v) == 0 || string(v) == s) {
		return s, nil
	}
	if !utf8.Valid(v) {
		return "", fmt.Errorf("field %s: %w", field, errInvalidUTF8)
	}
	s := string(v)
	d.last[i] = s
	return s, nil
}

// decodeStamps merges a WalStamps message into s (all its fields are
// uint32 varints).
func decodeStamps(s *schema.WalStamps, b []byte) error {
	for len(b) > 0 {
		num, typ, n, err := consumeTag(b)
		if err != nil {
			return err
		}
		b = b[n:]
		if typ != protowire.VarintType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		setStampsField(s, num, v) // an unknown varint field is skipped
	}
	return nil
}

// setStampsField sets field num of st to v, both decoders' way (a
// varint field, the last occurrence winning); false: st has no such field.
func setStampsField(st *schema.WalStamps, num protowire.Number, v uint64) bool {
	switch num {
	case 1:
		st.VisibilityTimeoutS = uint32(v)
	case 2:
		st.MaxAttempts = uint32(v)
	case 3:
		st.BackoffBaseS = uint32(v)
	case 4:
		st.DeadLetterRetentionS = uint32(v)
	default:
		return false
	}
	return true
}
