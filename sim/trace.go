package sim

import (
	"strconv"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// tracer renders the schedule as lines and folds every line into an
// FNV-1a hash, so two runs of one seed can be compared byte for byte.
type tracer struct {
	out  func(string)
	hash uint64
	buf  []byte
}

func newTracer(out func(string)) *tracer {
	return &tracer{out: out, hash: 14695981039346656037}
}

// begin starts a line (time and node) in t.buf and returns t, for the
// caller to append the rest to t.buf and call end.
func (t *tracer) begin(now time.Duration, node int) *tracer {
	t.buf = t.buf[:0]
	us := int64(now / time.Microsecond)
	t.buf = strconv.AppendInt(t.buf, us/1_000_000, 10)
	t.buf = append(t.buf, '.')
	frac := us % 1_000_000
	for d := int64(100000); d > 0; d /= 10 {
		t.buf = append(t.buf, byte('0'+frac/d%10))
	}
	if node >= 0 {
		t.buf = append(t.buf, " n"...)
		t.buf = strconv.AppendInt(t.buf, int64(node), 10)
	} else {
		t.buf = append(t.buf, " --"...)
	}
	t.buf = append(t.buf, ' ')
	return t
}

func (t *tracer) end() {
	h := t.hash // a local: the field would be stored back at every byte
	for _, c := range t.buf {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h ^= '\n'
	h *= 1099511628211
	t.hash = h
	if t.out != nil {
		t.out(string(t.buf))
	}
}

func (t *tracer) line(now time.Duration, node int, s string) {
	t.begin(now, node)
	t.buf = append(t.buf, s...)
	t.end()
}

// input traces one input to a node.
func (t *tracer) input(now time.Duration, node int, in sm.Input) {
	t.begin(now, node)
	switch x := in.(type) {
	case sm.Boot:
		t.buf = append(t.buf, "boot seed="...)
		t.buf = strconv.AppendUint(t.buf, x.Seed, 16)
	case sm.TimerFired:
		t.buf = append(t.buf, "timer "...)
		t.buf = append(t.buf, x.Kind.String()...)
	case sm.Recv:
		m := x.Msg
		t.buf = append(t.buf, "<- n"...)
		t.buf = strconv.AppendInt(t.buf, int64(x.From), 10)
		t.buf = append(t.buf, ' ')
		t.buf = append(t.buf, m.Type.String()...)
		t.buf = append(t.buf, ' ')
		t.buf = append(t.buf, m.Role.String()...)
		t.buf = append(t.buf, " term="...)
		t.buf = strconv.AppendUint(t.buf, m.Term, 10)
		t.buf = append(t.buf, " tag="...)
		t.buf = strconv.AppendUint(t.buf, m.ConfigTag, 16)
		if m.Status != 0 {
			t.buf = append(t.buf, " status="...)
			t.buf = strconv.AppendInt(t.buf, int64(m.Status), 10)
		}
		switch m.Type {
		case sm.MsgReplRecords, sm.MsgReplSnapshot, sm.MsgReplAck:
			// The sync a message belongs to, and what it carries.
			t.buf = append(t.buf, " sync="...)
			t.buf = sm.AppendSyncName(t.buf, m.ReqID)
			if m.CatchUp {
				t.buf = append(t.buf, " catch-up from="...)
				t.buf = strconv.AppendUint(t.buf, m.PrevLSN, 10)
			}
			t.buf = append(t.buf, " lsn="...)
			t.buf = strconv.AppendUint(t.buf, m.WALPos, 10)
			if len(m.Bytes) > 0 {
				t.buf = append(t.buf, " bytes="...)
				t.buf = strconv.AppendInt(t.buf, int64(len(m.Bytes)), 10)
			}
		}
	case sm.ClientGone:
		t.buf = append(t.buf, "<- client gone #"...)
		t.buf = strconv.AppendUint(t.buf, x.ID, 10)
	case sm.ClientOp:
		t.buf = append(t.buf, "<- client #"...)
		t.buf = strconv.AppendUint(t.buf, x.ID, 10)
		t.buf = append(t.buf, ' ')
		t.buf = append(t.buf, x.Req.Kind.String()...)
	case sm.IODone:
		t.buf = append(t.buf, "io#"...)
		t.buf = strconv.AppendUint(t.buf, x.ID, 10)
		t.buf = append(t.buf, ' ')
		t.buf = append(t.buf, x.Err.String()...)
		if len(x.Data) > 0 {
			t.buf = append(t.buf, " bytes="...)
			t.buf = strconv.AppendInt(t.buf, int64(len(x.Data)), 10)
		}
	}
	t.end()
}

// computed traces a completed Compute with what it did.
func (t *tracer) computed(now time.Duration, node int, c sm.Compute, res sm.Computed) {
	t.begin(now, node)
	t.buf = append(t.buf, "compute#"...)
	t.buf = strconv.AppendUint(t.buf, res.ID, 10)
	t.buf = append(t.buf, ' ')
	t.buf = append(t.buf, c.Kind.String()...)
	if c.Path != "" {
		t.buf = append(t.buf, ' ')
		t.buf = append(t.buf, c.Path...)
	}
	t.outcome(len(c.Data), res.Err, len(res.Data))
}

// ioDone traces a completed file operation with what it did.
func (t *tracer) ioDone(now time.Duration, node int, op sm.FileOp, res sm.IODone) {
	t.begin(now, node)
	t.buf = append(t.buf, "io#"...)
	t.buf = strconv.AppendUint(t.buf, res.ID, 10)
	t.buf = append(t.buf, ' ')
	t.buf = append(t.buf, op.Op.String()...)
	t.buf = append(t.buf, ' ')
	t.buf = append(t.buf, op.Path...)
	if op.To != "" {
		t.buf = append(t.buf, " -> "...)
		t.buf = append(t.buf, op.To...)
	}
	t.outcome(len(op.Data), res.Err, len(res.Data))
}

// outcome ends the line of a completed operation: the bytes it was given,
// its result and the bytes it gave back.
func (t *tracer) outcome(in int, err sm.IOErr, out int) {
	if in > 0 {
		t.buf = append(t.buf, " len="...)
		t.buf = strconv.AppendInt(t.buf, int64(in), 10)
	}
	t.buf = append(t.buf, ": "...)
	t.buf = append(t.buf, err.String()...)
	if out > 0 {
		t.buf = append(t.buf, " bytes="...)
		t.buf = strconv.AppendInt(t.buf, int64(out), 10)
	}
	t.end()
}
