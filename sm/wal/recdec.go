package wal

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
)

// recordDecoder is proto.Unmarshal of one WalRecord, by hand for the
// operations a log is made of (enqueue, enqueue batch, claim batch, ack,
// ack batch, heartbeat, retry (with its delay), fail): replaying a log was about half
// proto.Unmarshal, mostly its per-field dispatch and allocations.
//
// The hand decoder takes only the plain encoding of those operations:
// each field known and of its own wire type, the operation and each
// nested message (stamps, a handle) at most once, strings valid UTF-8.
// Anything else — another operation, an unknown field, a wrong wire type,
// a repeated message (proto merges it), a second operation (proto keeps
// the last), broken wire format — is handed to proto.Unmarshal, so the
// result and the error are proto.Unmarshal's for every input
// (TestRecordDecoderIsUnmarshal, FuzzWALWalk). A repeated scalar or
// string takes its last occurrence, as proto's does.
//
// The record, its operation's message and the nested ones are the
// decoder's and are reused by the next decode: the caller must not keep
// them. Bytes fields (payloads) alias the input; strings equal to the
// previous record's share its string.
type recordDecoder struct {
	rec schema.WalRecord

	enqueue   schema.WalEnqueue
	enqueueOp schema.WalRecord_Enqueue
	batch     schema.WalEnqueueBatch
	batchOp   schema.WalRecord_EnqueueBatch
	claim     schema.WalClaimBatch
	claimOp   schema.WalRecord_ClaimBatch
	ack       schema.WalAck
	ackOp     schema.WalRecord_Ack
	acks      schema.WalAckBatch
	acksOp    schema.WalRecord_AckBatch
	beat      schema.WalHeartbeat
	beatOp    schema.WalRecord_Heartbeat
	retry     schema.WalRetry
	retryOp   schema.WalRecord_Retry
	fail      schema.WalFail
	failOp    schema.WalRecord_Fail

	stamps   schema.WalStamps
	handle   schema.WalHandle    // of an ack, a heartbeat, a retry or a fail
	handles  []*schema.WalHandle // an ack batch's, each reused by position
	payloads [][]byte            // an enqueue batch's
	keys     []string            // an enqueue batch's idempotency keys
	last     [3]string           // the previous strings, by recStr
}

// recStr indexes recordDecoder.last.
const (
	recQueue = iota
	recHost
	recError
)

// decode decodes p into the decoder's record and returns it, or returns
// proto.Unmarshal's error.
func (d *recordDecoder) decode(p []byte) (*schema.WalRecord, error) {
	if d.fast(p) {
		return &d.rec, nil
	}
	if err := proto.Unmarshal(p, &d.rec); err != nil {
		return nil, err
	}
	return &d.rec, nil
}

// fast decodes b into d.rec if it is the plain encoding of a record with
// no operation or a hot one; false (d.rec then holds garbage) otherwise.
func (d *recordDecoder) fast(b []byte) bool {
	r := &d.rec
	*r = schema.WalRecord{}
	for len(b) > 0 {
		num, typ, v, s, n, ok := field(b)
		if !ok {
			return false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			r.Lsn = v
		case num == 2 && typ == protowire.VarintType:
			r.Now = int64(v)
		case num == 3 && typ == protowire.VarintType:
			r.Term = v
		case typ != protowire.BytesType || r.Op != nil || !d.op(num, s):
			return false
		}
	}
	return true
}

// op decodes the operation message of field num into d.rec.Op.
func (d *recordDecoder) op(num protowire.Number, b []byte) bool {
	r := &d.rec
	switch num {
	case 10:
		if !d.enqueueFields(b, false) {
			return false
		}
		d.enqueueOp.Enqueue = &d.enqueue
		r.Op = &d.enqueueOp
	case 23:
		d.payloads, d.keys = d.payloads[:0], d.keys[:0]
		if !d.enqueueFields(b, true) {
			return false
		}
		e := &d.enqueue
		d.batch = schema.WalEnqueueBatch{Queue: e.Queue, QueueId: e.QueueId, Stamps: e.Stamps, Priority: e.Priority,
			Delay: e.Delay, RunAt: e.RunAt, Expires: e.Expires, Resource: e.Resource, Host: e.Host,
			IdempotencyWindowS: e.IdempotencyWindowS}
		if len(d.payloads) > 0 {
			d.batch.Payloads = d.payloads
		}
		if len(d.keys) > 0 {
			d.batch.IdempotencyKeys = d.keys
		}
		d.batchOp.EnqueueBatch = &d.batch
		r.Op = &d.batchOp
	case 11:
		if !d.claimFields(b) {
			return false
		}
		d.claimOp.ClaimBatch = &d.claim
		r.Op = &d.claimOp
	case 12:
		d.ack = schema.WalAck{}
		if !d.handleOnly(b, &d.ack.Handle) {
			return false
		}
		d.ackOp.Ack = &d.ack
		r.Op = &d.ackOp
	case 14:
		d.beat = schema.WalHeartbeat{}
		if !d.handleOnly(b, &d.beat.Handle) {
			return false
		}
		d.beatOp.Heartbeat = &d.beat
		r.Op = &d.beatOp
	case 15:
		d.retry = schema.WalRetry{}
		if !d.handleError(b, &d.retry.Handle, &d.retry.Error, &d.retry.Delay) {
			return false
		}
		d.retryOp.Retry = &d.retry
		r.Op = &d.retryOp
	case 16:
		d.fail = schema.WalFail{}
		if !d.handleError(b, &d.fail.Handle, &d.fail.Error, nil) {
			return false
		}
		d.failOp.Fail = &d.fail
		r.Op = &d.failOp
	case 13:
		if !d.ackBatchFields(b) {
			return false
		}
		d.acksOp.AckBatch = &d.acks
		r.Op = &d.acksOp
	default:
		return false
	}
	return true
}

// field reads one field's tag and value: v for a varint, s for a
// length-delimited one; ok false on a malformed field or another wire
// type. One-byte tags (field numbers 1 to 15), varints and lengths are
// read here, longer ones by protowire.
func field(b []byte) (num protowire.Number, typ protowire.Type, v uint64, s []byte, n int, ok bool) {
	if len(b) > 0 && b[0] >= 1<<3 && b[0] < 0x80 {
		num, typ, n = protowire.Number(b[0]>>3), protowire.Type(b[0]&7), 1
	} else if num, typ, n = protowire.ConsumeTag(b); n < 0 {
		return 0, 0, 0, nil, 0, false
	}
	b = b[n:]
	var m int
	switch {
	case typ == protowire.VarintType && len(b) > 0 && b[0] < 0x80:
		v, m = uint64(b[0]), 1
	case typ == protowire.VarintType:
		v, m = protowire.ConsumeVarint(b)
	case typ == protowire.BytesType && len(b) > 0 && b[0] < 0x80 && int(b[0]) < len(b):
		m = 1 + int(b[0])
		s = b[1:m]
	case typ == protowire.BytesType:
		s, m = protowire.ConsumeBytes(b)
	default:
		return 0, 0, 0, nil, 0, false
	}
	if m < 0 {
		return 0, 0, 0, nil, 0, false
	}
	return num, typ, v, s, n + m, true
}

// enqueueFields decodes a WalEnqueue (batch: a WalEnqueueBatch, whose
// payloads go to d.payloads) into d.enqueue.
func (d *recordDecoder) enqueueFields(b []byte, batch bool) bool {
	e := &d.enqueue
	*e = schema.WalEnqueue{}
	for len(b) > 0 {
		num, typ, v, s, n, ok := field(b)
		if !ok {
			return false
		}
		b = b[n:]
		if typ == protowire.VarintType {
			switch num {
			case 2:
				e.QueueId = uint32(v)
			case 5:
				e.Priority = int32(v)
			case 6:
				e.Delay = int64(v)
			case 7:
				e.RunAt = int64(v)
			case 8:
				e.Expires = int64(v)
			case 9:
				e.Resource = uint32(v)
			case 12:
				e.IdempotencyWindowS = uint32(v)
			default:
				return false
			}
			continue
		}
		switch num {
		case 1:
			if e.Queue, ok = d.str(recQueue, s); !ok {
				return false
			}
		case 3:
			p := s[:len(s):len(s)] // an append must not reach the next frame
			if batch {
				d.payloads = append(d.payloads, p)
			} else if len(p) > 0 {
				e.Payload = p
			} else {
				e.Payload = nil
			}
		case 4:
			if e.Stamps != nil || !d.stampsFields(s) {
				return false
			}
			e.Stamps = &d.stamps
		case 10:
			if e.Host, ok = d.str(recHost, s); !ok {
				return false
			}
		case 11:
			// A key is kept by the state (queue.Key): a string of its
			// own, never one aliasing the frame.
			if !utf8.Valid(s) {
				return false
			}
			if batch {
				d.keys = append(d.keys, string(s))
			} else {
				e.IdempotencyKey = string(s)
			}
		default:
			return false
		}
	}
	return true
}

func (d *recordDecoder) stampsFields(b []byte) bool {
	st := &d.stamps
	*st = schema.WalStamps{}
	for len(b) > 0 {
		num, typ, v, _, n, ok := field(b)
		if !ok || typ != protowire.VarintType {
			return false
		}
		b = b[n:]
		if !setStampsField(st, num, v) {
			return false // an unknown field: proto.Unmarshal keeps it
		}
	}
	return true
}

func (d *recordDecoder) claimFields(b []byte) bool {
	c := &d.claim
	*c = schema.WalClaimBatch{}
	for len(b) > 0 {
		num, typ, v, s, n, ok := field(b)
		if !ok {
			return false
		}
		b = b[n:]
		switch {
		case typ == protowire.VarintType && num == 2:
			c.QueueId = uint32(v)
		case typ == protowire.VarintType && num == 4:
			c.Max = uint32(v)
		case typ == protowire.VarintType && num == 5:
			c.Json = v != 0
		case typ == protowire.BytesType && num == 1:
			if c.Queue, ok = d.str(recQueue, s); !ok {
				return false
			}
		case typ == protowire.BytesType && num == 3:
			if c.Host, ok = d.str(recHost, s); !ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// handleFields decodes a WalHandle into h.
func handleFields(h *schema.WalHandle, b []byte) bool {
	*h = schema.WalHandle{}
	for len(b) > 0 {
		num, typ, v, _, n, ok := field(b)
		if !ok || typ != protowire.VarintType {
			return false
		}
		b = b[n:]
		switch num {
		case 1:
			h.Id = v
		case 2:
			h.Attempt = uint32(v)
		case 3:
			h.ClaimTerm = v
		case 4:
			h.ClaimLsn = v
		default:
			return false
		}
	}
	return true
}

// handleOnly decodes a message whose one field is a handle (WalAck,
// WalHeartbeat) into *h, which is nil.
func (d *recordDecoder) handleOnly(b []byte, h **schema.WalHandle) bool {
	for len(b) > 0 {
		num, typ, _, s, n, ok := field(b)
		if !ok || typ != protowire.BytesType || num != 1 || *h != nil || !handleFields(&d.handle, s) {
			return false
		}
		b = b[n:]
		*h = &d.handle
	}
	return true
}

// handleError decodes a handle and an error string (WalRetry, WalFail)
// into *h, which is nil, and *msg; and, when delay is not nil, a retry's
// delay (field 3, a varint) into *delay.
func (d *recordDecoder) handleError(b []byte, h **schema.WalHandle, msg *string, delay *int64) bool {
	for len(b) > 0 {
		num, typ, v, s, n, ok := field(b)
		if !ok {
			return false
		}
		b = b[n:]
		if num == 3 && delay != nil && typ == protowire.VarintType {
			*delay = int64(v)
			continue
		}
		if typ != protowire.BytesType {
			return false
		}
		switch num {
		case 1:
			if *h != nil || !handleFields(&d.handle, s) {
				return false
			}
			*h = &d.handle
		case 2:
			if *msg, ok = d.str(recError, s); !ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func (d *recordDecoder) ackBatchFields(b []byte) bool {
	d.acks = schema.WalAckBatch{}
	k := 0
	for len(b) > 0 {
		num, typ, _, s, n, ok := field(b)
		if !ok || typ != protowire.BytesType || num != 1 {
			return false
		}
		b = b[n:]
		if k == len(d.handles) {
			d.handles = append(d.handles, new(schema.WalHandle))
		}
		if !handleFields(d.handles[k], s) {
			return false
		}
		k++
	}
	if k > 0 {
		d.acks.Handles = d.handles[:k:k]
	}
	return true
}

// str is v as a string, the previous record's string of slot i if it is
// the same; ok false if v is not valid UTF-8 (proto3 refuses it).
func (d *recordDecoder) str(i int, v []byte) (string, bool) {
	if s := d.last[i]; len(s) == len(v) && string(v) == s {
		return s, true
	}
	if !utf8.Valid(v) {
		return "", false
	}
	s := string(v)
	d.last[i] = s
	return s, true
}
