package wal

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"pgregory.net/rapid"

	"github.com/xce-hpc/xce/schema"
)

// The hand decoder of WAL records is proto.Unmarshal: on records written
// field by field from the descriptor (so a field added to the schema is
// covered) — every operation, fields in any order and repeated (last-wins
// scalars, merged messages, a second operation), fields of unknown numbers
// and of the wrong wire type at every level, invalid UTF-8, negative
// int32s, then sometimes a byte changed or the tail cut — both fail with
// the same error or both give the same message, unknown fields included
// (proto.Equal). One decoder decodes the whole sequence, as Walk reuses
// it, and each result is checked before the next decode.
func TestRecordDecoderIsUnmarshal(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := new(recordDecoder)
		for k, n := 0, rapid.IntRange(1, 8).Draw(rt, "records"); k < n; k++ {
			b := wireMessage(rt, (&schema.WalRecord{}).ProtoReflect().Descriptor(), 0, rapid.Bool().Draw(rt, "noisy"))
			if len(b) > 0 && rapid.IntRange(0, 3).Draw(rt, "damage") == 0 {
				i := rapid.IntRange(0, len(b)-1).Draw(rt, "at")
				if rapid.Bool().Draw(rt, "cut") {
					b = b[:i]
				} else {
					b[i] ^= byte(rapid.IntRange(1, 255).Draw(rt, "flip"))
				}
			}
			checkRecordDecode(rt, d, b, fmt.Sprintf("record %d", k))
		}
	})
}

// The plain encodings of the hot operations take the hand decoder's path
// (else the decoder would be proto.Unmarshal everywhere and gain
// nothing), and give proto.Unmarshal's record.
func TestRecordDecoderTakesHotOps(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := new(recordDecoder)
		for k, n := 0, rapid.IntRange(1, 8).Draw(rt, "records"); k < n; k++ {
			rec := &schema.WalRecord{Lsn: rapid.Uint64().Draw(rt, "lsn"), Now: rapid.Int64().Draw(rt, "now"), Term: rapid.Uint64().Draw(rt, "term")}
			hotOp(rt, rec)
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(rec)
			if err != nil {
				rt.Fatal(err)
			}
			if !d.fast(b) {
				rt.Fatalf("record %d (%v): the hand decoder refused it", k, rec)
			}
			if !proto.Equal(rec, &d.rec) {
				rt.Fatalf("record %d:\n want %v\n got  %v", k, rec, &d.rec)
			}
		}
	})
}

// Walk gives fn proto.Unmarshal's record of each frame, with the hand
// decoder reused across them.
func TestWalkRecordsAreUnmarshal(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var data []byte
		var want []*schema.WalRecord
		for i, n := 0, rapid.IntRange(0, 12).Draw(rt, "n"); i < n; i++ {
			rec := &schema.WalRecord{Lsn: uint64(i + 1), Now: rapid.Int64().Draw(rt, "now"), Term: rapid.Uint64().Draw(rt, "term")}
			if rapid.Bool().Draw(rt, "hot") {
				hotOp(rt, rec)
			} else {
				genOp(rt, rec)
			}
			var err error
			if data, err = AppendFrame(data, rec); err != nil {
				rt.Fatal(err)
			}
			want = append(want, rec)
		}
		i := 0
		valid, err := Walk(data, func(_ int, rec *schema.WalRecord) error {
			if !proto.Equal(rec, want[i]) {
				rt.Fatalf("record %d:\n want %v\n got  %v", i, want[i], rec)
			}
			i++
			return nil
		})
		if err != nil || valid != len(data) || i != len(want) {
			rt.Fatalf("Walk: %d of %d records, %d of %d bytes, %v", i, len(want), valid, len(data), err)
		}
	})
}

// A payload aliases the segment, but only up to its own length: appending
// to one (fn may not keep it, but may use it as a scratch slice) does not
// write the next frame.
func TestWalkPayloadDoesNotReachTheNextFrame(t *testing.T) {
	var data []byte
	for i := uint64(1); i <= 2; i++ {
		rec := &schema.WalRecord{Lsn: i, Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "q", Payload: []byte("payload")}}}
		var err error
		if data, err = AppendFrame(data, rec); err != nil {
			t.Fatal(err)
		}
	}
	want := bytes.Clone(data)
	n := 0
	if _, err := Walk(data, func(_ int, rec *schema.WalRecord) error {
		_ = append(rec.GetEnqueue().GetPayload(), "overwritten!"...)
		n++
		return nil
	}); err != nil || n != 2 || !bytes.Equal(data, want) {
		t.Fatalf("Walk: %d records, %v; segment changed: %v", n, err, !bytes.Equal(data, want))
	}
}

// A few inputs the generators reach only by chance, each decoded after a
// plain enqueue by the same decoder.
func TestRecordDecoderCases(t *testing.T) {
	tag := protowire.AppendTag
	enq := func(fields ...[]byte) []byte {
		var m []byte
		for _, f := range fields {
			m = append(m, f...)
		}
		return protowire.AppendBytes(tag([]byte{8, 1}, 10, protowire.BytesType), m)
	}
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(tag(nil, num, protowire.BytesType), s)
	}
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(tag(nil, num, protowire.VarintType), v)
	}
	stamps := func(b []byte) []byte { return protowire.AppendBytes(tag(nil, 4, protowire.BytesType), b) }
	handle := func(op protowire.Number, h []byte) []byte {
		return protowire.AppendBytes(tag([]byte{8, 1}, op, protowire.BytesType), protowire.AppendBytes(tag(nil, 1, protowire.BytesType), h))
	}
	cases := map[string][]byte{
		"empty":                       {},
		"lsn only":                    {8, 7},
		"lsn twice, last wins":        {8, 7, 8, 9},
		"lsn as fixed64":              protowire.AppendFixed64(tag(nil, 1, protowire.Fixed64Type), 7),
		"field number 0":              {0, 1},
		"field number too large":      protowire.AppendVarint(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), 1),
		"group":                       {8, 1, 0x5b, 0x5c},
		"truncated varint":            {8, 0x80},
		"varint of 11 bytes":          {8, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
		"enqueue":                     enq(str(1, "q"), varint(2, 1), str(3, "payload"), stamps([]byte{8, 30, 16, 3})),
		"queue twice":                 enq(str(1, "q"), str(1, "r")),
		"queue invalid UTF-8":         enq(str(1, "q\xff")),
		"host invalid UTF-8":          enq(str(10, "\xc0")),
		"priority -1":                 enq(varint(5, uint64(1<<64-1))),
		"stamps twice (merged)":       enq(stamps([]byte{8, 30}), stamps([]byte{16, 3})),
		"stamps with unknown field":   enq(stamps([]byte{8, 30, 0x28, 1})),
		"stamps field as bytes":       enq(stamps([]byte{0x0a, 0})),
		"payload as varint":           enq(varint(3, 5)),
		"queue_id as bytes":           enq(str(2, "x")),
		"unknown field in enqueue":    enq(varint(99, 1)),
		"enqueue twice (merged)":      append(enq(str(1, "q")), enq(str(3, "p"))[2:]...),
		"enqueue then claim":          append(enq(str(1, "q")), protowire.AppendBytes(tag(nil, 11, protowire.BytesType), str(3, "h"))...),
		"enqueue of cut length":       enq(str(1, "q"))[:5],
		"ack":                         handle(12, []byte{8, 5, 16, 1, 24, 1, 32, 9}),
		"ack handle twice":            append(handle(12, []byte{8, 5}), protowire.AppendBytes(tag(nil, 1, protowire.BytesType), []byte{16, 1})...),
		"heartbeat handle with fixed": handle(14, protowire.AppendFixed32(tag(nil, 2, protowire.Fixed32Type), 1)),
		"retry":                       protowire.AppendBytes(tag([]byte{8, 1}, 15, protowire.BytesType), append(protowire.AppendBytes(tag(nil, 1, protowire.BytesType), []byte{8, 5}), str(2, "exit 1")...)),
		"fail error invalid UTF-8":    protowire.AppendBytes(tag([]byte{8, 1}, 16, protowire.BytesType), str(2, "\xff")),
		"ack batch of empty handles":  protowire.AppendBytes(tag([]byte{8, 1}, 13, protowire.BytesType), []byte{0x0a, 0, 0x0a, 0}),
		"enqueue batch":               protowire.AppendBytes(tag([]byte{8, 1}, 23, protowire.BytesType), append(append(str(3, "a"), str(3, "")...), str(1, "q")...)),
		"noop":                        protowire.AppendBytes(tag([]byte{8, 1}, 24, protowire.BytesType), nil),
		"unknown op":                  protowire.AppendBytes(tag([]byte{8, 1}, 40, protowire.BytesType), []byte{8, 1}),
		"unknown varint":              protowire.AppendVarint(tag([]byte{8, 1}, 7, protowire.VarintType), 1),
	}
	plain := enq(str(1, "q0"), str(3, "p"), str(10, "h0"), stamps([]byte{8, 30, 16, 3}))
	for name, b := range cases {
		d := new(recordDecoder)
		checkRecordDecode(t, d, plain, name+": plain enqueue")
		checkRecordDecode(t, d, b, name)
		checkRecordDecode(t, d, plain, name+": plain enqueue again")
	}
}

// checkRecordDecode compares d.decode(b) with proto.Unmarshal(b).
func checkRecordDecode(rt interface{ Fatalf(string, ...any) }, d *recordDecoder, b []byte, what string) {
	want := new(schema.WalRecord)
	werr := proto.Unmarshal(b, want)
	got, gerr := d.decode(b)
	if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
		rt.Fatalf("%s (%x): proto.Unmarshal: %v, decode: %v", what, b, werr, gerr)
	}
	if werr == nil && !proto.Equal(want, got) {
		rt.Fatalf("%s (%x):\n proto.Unmarshal %v\n decode          %v", what, b, want, got)
	}
}

// hotOp sets one of the operations the hand decoder takes, every field
// drawn (the zero values too, which the encoding omits).
func hotOp(rt *rapid.T, r *schema.WalRecord) {
	m := r.ProtoReflect()
	fd := m.Descriptor().Fields().ByName(hotOps[rapid.IntRange(0, len(hotOps)-1).Draw(rt, "hot op")])
	op := m.NewField(fd)
	randomValidFields(rt, op.Message(), string(fd.Name()))
	m.Set(fd, op)
}

// hotOps are the operations the hand decoder takes (WalRecord's fields).
var hotOps = []protoreflect.Name{"enqueue", "enqueue_batch", "claim_batch", "ack", "ack_batch", "heartbeat", "retry", "fail"}

// randomValidFields sets fields of m at random with valid values (valid
// UTF-8 strings), as a writer would.
func randomValidFields(rt *rapid.T, m protoreflect.Message, name string) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !rapid.Bool().Draw(rt, name+"."+string(fd.Name())) {
			continue
		}
		if fd.IsList() {
			l := m.Mutable(fd).List()
			for k, n := 0, rapid.IntRange(0, 4).Draw(rt, "len"); k < n; k++ {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					randomValidFields(rt, e.Message(), name+"."+string(fd.Name()))
					l.Append(e)
				} else {
					l.Append(scalarValue(rt, fd))
				}
			}
			continue
		}
		if fd.Kind() == protoreflect.MessageKind {
			sub := m.NewField(fd)
			randomValidFields(rt, sub.Message(), name+"."+string(fd.Name()))
			m.Set(fd, sub)
			continue
		}
		m.Set(fd, scalarValue(rt, fd))
	}
}

func scalarValue(rt *rapid.T, fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(rapid.Uint64().Draw(rt, "u64"))
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(rapid.Uint32().Draw(rt, "u32"))
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(rapid.Int64().Draw(rt, "i64"))
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(rapid.Int32().Draw(rt, "i32"))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(rapid.Bool().Draw(rt, "bool"))
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(rapid.StringN(0, 12, -1).Draw(rt, "string"))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(rt, "bytes"))
	}
	rt.Fatalf("field %s of kind %v: the test does not generate it (and the decoder may not handle it)", fd.FullName(), fd.Kind())
	return protoreflect.Value{}
}

// wireMessage writes a message of md field by field: each field of md
// zero, one or more times, in a random order (repeated scalars: the last
// wins), and now and then a string of invalid UTF-8. Noisy, it also
// writes what the hand decoder leaves to proto.Unmarshal: a oneof's
// several members, a message field twice (merged), values of the wrong
// wire type, random bytes for a message, fields of unknown numbers.
// Quiet, every value is of its wire type, with at most a repeated
// message, a second operation or an invalid string, so most quiet records
// take the hand decoder's path.
func wireMessage(rt *rapid.T, md protoreflect.MessageDescriptor, depth int, noisy bool) []byte {
	var occs []protoreflect.FieldDescriptor
	fields := md.Fields()
	if oo := md.Oneofs(); !noisy && oo.Len() > 0 {
		// At most one member of each oneof.
		for i := 0; i < oo.Len(); i++ {
			ms := oo.Get(i).Fields()
			if hot := ms.ByName(hotOps[rapid.IntRange(0, len(hotOps)-1).Draw(rt, "hot op")]); hot != nil && rapid.Bool().Draw(rt, "hot") {
				occs = append(occs, hot) // the operations the decoder takes, half the time
			} else if k := rapid.IntRange(-1, ms.Len()-1).Draw(rt, "member"); k >= 0 {
				occs = append(occs, ms.Get(k))
			}
			if rapid.IntRange(0, 7).Draw(rt, "second member") == 0 {
				occs = append(occs, ms.Get(rapid.IntRange(0, ms.Len()-1).Draw(rt, "member")))
			}
		}
	}
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && (!noisy || rapid.IntRange(0, 3).Draw(rt, "oneof member "+string(fd.Name())) != 0) {
			continue
		}
		n := rapid.IntRange(0, 3).Draw(rt, "occurrences "+string(fd.Name()))
		if !noisy && fd.Kind() == protoreflect.MessageKind && !fd.IsList() {
			n = min(n, 1) + n/3 // twice (merged) a quarter of the time
		}
		for k := 0; k < n; k++ {
			occs = append(occs, fd)
		}
	}
	occs = rapid.Permutation(occs).Draw(rt, "order")
	var b []byte
	for _, fd := range occs {
		if noisy && rapid.IntRange(0, 9).Draw(rt, "wrong type") == 0 {
			b = wireValue(rt, b, fd.Number(), wireTypes[rapid.IntRange(0, len(wireTypes)-1).Draw(rt, "type")])
			continue
		}
		switch fd.Kind() {
		case protoreflect.MessageKind:
			var sub []byte
			if depth < 3 && (!noisy || rapid.IntRange(0, 7).Draw(rt, "garbage") != 0) {
				sub = wireMessage(rt, fd.Message(), depth+1, noisy)
			} else {
				sub = rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(rt, "garbage message")
			}
			b = protowire.AppendBytes(protowire.AppendTag(b, fd.Number(), protowire.BytesType), sub)
		case protoreflect.StringKind:
			s := rapid.StringN(0, 8, -1).Draw(rt, "string")
			if rapid.IntRange(0, 15).Draw(rt, "invalid UTF-8") == 0 {
				s += "\xff"
			}
			b = protowire.AppendString(protowire.AppendTag(b, fd.Number(), protowire.BytesType), s)
		case protoreflect.BytesKind:
			b = protowire.AppendBytes(protowire.AppendTag(b, fd.Number(), protowire.BytesType), rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(rt, "bytes"))
		case protoreflect.Int32Kind:
			b = protowire.AppendVarint(protowire.AppendTag(b, fd.Number(), protowire.VarintType), uint64(int64(rapid.Int32().Draw(rt, "i32"))))
		case protoreflect.BoolKind:
			b = protowire.AppendVarint(protowire.AppendTag(b, fd.Number(), protowire.VarintType), rapid.Uint64Range(0, 2).Draw(rt, "bool"))
		case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Int64Kind, protoreflect.EnumKind:
			b = protowire.AppendVarint(protowire.AppendTag(b, fd.Number(), protowire.VarintType), rapid.Uint64().Draw(rt, "varint"))
		default:
			rt.Fatalf("field %s of kind %v: the test does not generate it (and the decoder may not handle it)", fd.FullName(), fd.Kind())
		}
	}
	if noisy {
		for i, n := 0, rapid.IntRange(0, 2).Draw(rt, "unknown fields"); i < n; i++ {
			num := protowire.Number(rapid.OneOf(rapid.IntRange(1, 30), rapid.IntRange(1, int(protowire.MaxValidNumber))).Draw(rt, "num"))
			if fields.ByNumber(num) != nil {
				continue
			}
			b = wireValue(rt, b, num, wireTypes[rapid.IntRange(0, len(wireTypes)-1).Draw(rt, "type")])
		}
	}
	return b
}

var wireTypes = []protowire.Type{protowire.VarintType, protowire.BytesType, protowire.Fixed32Type, protowire.Fixed64Type, protowire.StartGroupType}

// wireValue appends field num with a random value of wire type typ.
func wireValue(rt *rapid.T, b []byte, num protowire.Number, typ protowire.Type) []byte {
	b = protowire.AppendTag(b, num, typ)
	switch typ {
	case protowire.VarintType:
		return protowire.AppendVarint(b, rapid.Uint64().Draw(rt, "varint"))
	case protowire.BytesType:
		return protowire.AppendBytes(b, rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(rt, "bytes"))
	case protowire.Fixed32Type:
		return protowire.AppendFixed32(b, rapid.Uint32().Draw(rt, "fixed32"))
	case protowire.Fixed64Type:
		return protowire.AppendFixed64(b, rapid.Uint64().Draw(rt, "fixed64"))
	default: // an empty group
		return protowire.AppendTag(b, num, protowire.EndGroupType)
	}
}
