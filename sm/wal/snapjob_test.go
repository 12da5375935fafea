package wal

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"pgregory.net/rapid"

	"github.com/xce-hpc/xce/schema"
)

// The hand decoder of a snapshot's jobs is proto.Unmarshal: on messages
// with every field of SnapshotJob set at random (the descriptor's, so a
// field added to the schema is covered), then raw fields appended
// (repeats, wrong wire types, unknown numbers, invalid UTF-8, stamps to
// merge) and sometimes a byte flipped or the tail cut, both fail or both
// give the same message (unknown fields aside). One decoder decodes the
// whole sequence, as ReadSnapshot reuses it.
func TestJobDecoderIsUnmarshal(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := new(jobDecoder)
		var prev []byte
		for k, n := 0, rapid.IntRange(1, 8).Draw(rt, "jobs"); k < n; k++ {
			b := randomJobBytes(rt)
			if prev != nil && rapid.Bool().Draw(rt, "like the previous") {
				// The previous job's stamps (and strings) again, another id.
				b = protowire.AppendVarint(protowire.AppendTag(bytes.Clone(prev), 1, protowire.VarintType), rapid.Uint64().Draw(rt, "id"))
			}
			prev = b
			want := new(schema.SnapshotJob)
			werr := proto.Unmarshal(b, want)
			got, gerr := d.decode(b)
			if (werr == nil) != (gerr == nil) {
				rt.Fatalf("job %d (%x): proto.Unmarshal: %v, decode: %v", k, b, werr, gerr)
			}
			if werr != nil {
				continue
			}
			dropUnknown(want.ProtoReflect())
			if !proto.Equal(want, got) {
				rt.Fatalf("job %d (%x):\n proto.Unmarshal %v\n decode          %v", k, b, want, got)
			}
		}
	})
}

func dropUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() == protoreflect.MessageKind {
			dropUnknown(v.Message())
		}
		return true
	})
}

func randomJobBytes(rt *rapid.T) []byte {
	m := new(schema.SnapshotJob)
	randomFields(rt, m.ProtoReflect(), "job")
	b, err := proto.Marshal(m)
	if err != nil {
		rt.Fatal(err)
	}
	for i, n := 0, rapid.IntRange(0, 4).Draw(rt, "raw"); i < n; i++ {
		num := protowire.Number(rapid.OneOf(rapid.IntRange(1, 24), rapid.IntRange(1, 1<<29-1)).Draw(rt, "num"))
		switch rapid.IntRange(0, 4).Draw(rt, "type") {
		case 0:
			b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), rapid.Uint64().Draw(rt, "varint"))
		case 1:
			b = protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), rapid.SliceOf(rapid.Byte()).Draw(rt, "bytes"))
		case 2:
			st := new(schema.WalStamps)
			randomFields(rt, st.ProtoReflect(), "stamps")
			sb, _ := proto.Marshal(st)
			b = protowire.AppendBytes(protowire.AppendTag(b, 12, protowire.BytesType), sb)
		case 3:
			b = protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), rapid.Uint32().Draw(rt, "fixed32"))
		case 4:
			b = protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), rapid.Uint64().Draw(rt, "fixed64"))
		}
	}
	if len(b) > 0 && rapid.IntRange(0, 4).Draw(rt, "damage") == 0 {
		i := rapid.IntRange(0, len(b)-1).Draw(rt, "at")
		if rapid.Bool().Draw(rt, "cut") {
			b = b[:i]
		} else {
			b[i] ^= byte(rapid.IntRange(1, 255).Draw(rt, "flip"))
		}
	}
	return b
}

func randomFields(rt *rapid.T, m protoreflect.Message, name string) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !rapid.Bool().Draw(rt, name+"."+string(fd.Name())) {
			continue
		}
		var v protoreflect.Value
		switch fd.Kind() {
		case protoreflect.Uint64Kind:
			v = protoreflect.ValueOfUint64(rapid.Uint64().Draw(rt, "u64"))
		case protoreflect.Uint32Kind:
			v = protoreflect.ValueOfUint32(rapid.Uint32().Draw(rt, "u32"))
		case protoreflect.Int64Kind:
			v = protoreflect.ValueOfInt64(rapid.Int64().Draw(rt, "i64"))
		case protoreflect.Int32Kind:
			v = protoreflect.ValueOfInt32(rapid.Int32().Draw(rt, "i32"))
		case protoreflect.EnumKind:
			v = protoreflect.ValueOfEnum(protoreflect.EnumNumber(rapid.Int32().Draw(rt, "enum")))
		case protoreflect.StringKind:
			v = protoreflect.ValueOfString(rapid.StringN(0, 12, -1).Draw(rt, "string"))
		case protoreflect.BytesKind:
			v = protoreflect.ValueOfBytes(rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(rt, "bytes"))
		case protoreflect.MessageKind:
			sub := m.NewField(fd)
			randomFields(rt, sub.Message(), name+"."+string(fd.Name()))
			v = sub
		default:
			rt.Fatalf("field %s of kind %v: the test does not generate it (and decode may not handle it)", fd.FullName(), fd.Kind())
		}
		m.Set(fd, v)
	}
}

// TestSnapshotJobEncodingMatchesProto: appendSnapshotJob is the
// deterministic proto marshal of a SnapshotJob as a snapshot's field,
// byte for byte, for every field the schema has (randomFields sets them
// from the descriptor), and refuses what it refuses (a string that is
// not UTF-8).
func TestSnapshotJobEncodingMatchesProto(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		j := new(schema.SnapshotJob)
		randomFields(rt, j.ProtoReflect(), "job")
		if rapid.IntRange(0, 9).Draw(rt, "bad utf-8") == 0 {
			bad := "q\xff" + rapid.StringN(0, 4, -1).Draw(rt, "rest")
			switch rapid.IntRange(0, 3).Draw(rt, "which") {
			case 0:
				j.Queue = bad
			case 1:
				j.Host = bad
			case 2:
				j.LastError = bad
			case 3:
				j.Pin = bad
			}
		}
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(rt, "prefix")
		want, werr := appendMessage(bytes.Clone(prefix), 4, j)
		got, gerr := appendSnapshotJob(bytes.Clone(prefix), 4, j)
		if (werr == nil) != (gerr == nil) {
			rt.Fatalf("proto: %v, appendSnapshotJob: %v (job %v)", werr, gerr, j)
		}
		if werr == nil && !bytes.Equal(want, got) {
			rt.Fatalf("job %v:\n proto             %x\n appendSnapshotJob %x", j, want, got)
		}
		if werr == nil && SnapshotJobSize(j) != len(want)-len(prefix) {
			rt.Fatalf("job %v: SnapshotJobSize %d, proto's field %d bytes", j, SnapshotJobSize(j), len(want)-len(prefix))
		}
	})
}

func BenchmarkSnapshotJobEncode(b *testing.B) {
	j := &schema.SnapshotJob{Id: 1 << 40, Queue: "batch", Payload: bytes.Repeat([]byte("x"), 100), State: schema.JobState_JOB_STATE_PENDING,
		RunAt: 1767225603, Seq: 123456, EnqueuedAt: 1767225603, Attempts: 1, Stamps: &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 5},
		Host: "node017", ClaimedAt: 1767225604, ClaimExpiresAt: 1767225634, Claims: 1, ClaimTerm: 3, ClaimLsn: 98765}
	for _, c := range []struct {
		name string
		enc  func([]byte, protowire.Number, *schema.SnapshotJob) ([]byte, error)
	}{
		{"proto", func(out []byte, n protowire.Number, j *schema.SnapshotJob) ([]byte, error) {
			return appendMessage(out, n, j)
		}},
		{"direct", appendSnapshotJob},
	} {
		b.Run(c.name, func(b *testing.B) {
			out := make([]byte, 0, 4096)
			for range b.N {
				var err error
				if out, err = c.enc(out[:0], 4, j); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
