package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

func sum32(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func view(t sm.MsgType) sm.Msg {
	return sm.Msg{Type: t, ReqID: 77, Role: sm.RolePrimary, Term: 9, Priority: 2, WALPos: 1 << 40, ConfigTag: 0xdeadbeefcafe0001}
}

func TestRoundTripEachType(t *testing.T) {
	blob := []byte("a cluster config blob")
	tests := []struct {
		name string
		m    sm.Msg
	}{
		{"zero probe", sm.Msg{Type: sm.MsgProbe}},
		{"probe", view(sm.MsgProbe)},
		{"probe-reply", view(sm.MsgProbeReply)},
		{"heartbeat", view(sm.MsgHeartbeat)},
		{"heartbeat stopped max prio", sm.Msg{Type: sm.MsgHeartbeat, Role: sm.RoleStopped, Priority: MaxPriority, Term: ^uint64(0), WALPos: ^uint64(0), ConfigTag: ^uint64(0), ReqID: ^uint64(0)}},
		{"join", view(sm.MsgJoin)},
		{"join-reply ok", view(sm.MsgJoinReply)},
		{"join-reply error", func() sm.Msg {
			m := view(sm.MsgJoinReply)
			m.Status, m.Error = -5, "refused: not primary — ünïcode"
			return m
		}()},
		{"repl-config no tag", func() sm.Msg { m := view(sm.MsgReplConfig); m.ConfigTag = 0; return m }()},
		{"repl-config", view(sm.MsgReplConfig)},
		{"repl-config-reply up to date", func() sm.Msg { m := view(sm.MsgReplConfigReply); m.UpToDate = true; return m }()},
		{"repl-config-reply payload", func() sm.Msg {
			m := view(sm.MsgReplConfigReply)
			m.ConfigTag, m.SHA256, m.Bytes = sm.TagOf(blob), sum32(blob), blob
			return m
		}()},
		{"repl-config-reply error", func() sm.Msg {
			m := view(sm.MsgReplConfigReply)
			m.Status, m.Error = 5, "EIO reading config"
			return m
		}()},
		{"repl-config-reply max blob", func() sm.Msg {
			m := view(sm.MsgReplConfigReply)
			m.Bytes = bytes.Repeat([]byte{0xab}, sm.MaxConfigSize)
			m.SHA256 = sum32(m.Bytes)
			m.Error = strings.Repeat("e", MaxErrorLen)
			m.Status = -1
			return m
		}()},
		{"repl-config-push", func() sm.Msg {
			m := view(sm.MsgReplConfigPush)
			m.ConfigTag, m.SHA256, m.Bytes = sm.TagOf(blob), sum32(blob), blob
			return m
		}()},
		{"repl-config-push-reply accepted", func() sm.Msg { m := view(sm.MsgReplConfigPushReply); m.Accepted = true; return m }()},
		{"repl-config-push-reply rejected", view(sm.MsgReplConfigPushReply)},
		{"repl-snapshot", func() sm.Msg { m := view(sm.MsgReplSnapshot); m.Bytes = []byte("XCESNAP1..."); m.LogTerm = 3; return m }()},
		{"repl-records", func() sm.Msg { m := view(sm.MsgReplRecords); m.Bytes = []byte{1, 2, 3}; m.WALPos = 9; return m }()},
		{"repl-ack", func() sm.Msg { m := view(sm.MsgReplAck); m.WALPos, m.LogTerm, m.Round = 42, 2, 17; return m }()},
		{"repl-ack failing", func() sm.Msg {
			m := view(sm.MsgReplAck)
			m.Status, m.Error = 28, "snapshot install: write data/snap/x.tmp: no space"
			return m
		}()},
		{"pre-vote", func() sm.Msg { m := view(sm.MsgPreVote); m.Role, m.LogTerm = sm.RoleCandidate, 8; return m }()},
		{"pre-vote-reply granted", func() sm.Msg { m := view(sm.MsgPreVoteReply); m.Accepted = true; return m }()},
		{"vote", func() sm.Msg { m := view(sm.MsgVote); m.Role = sm.RoleCandidate; return m }()},
		{"vote transfer", func() sm.Msg { m := view(sm.MsgVote); m.Role, m.Transfer = sm.RoleCandidate, true; return m }()},
		{"timeout-now", func() sm.Msg {
			m := view(sm.MsgTimeoutNow)
			m.Role, m.WALPos, m.LogTerm = sm.RolePrimary, 77, 4
			return m
		}()},
		{"vote-reply granted", func() sm.Msg { m := view(sm.MsgVoteReply); m.Accepted = true; return m }()},
		{"vote-reply refused", view(sm.MsgVoteReply)},
		{"heartbeat round", func() sm.Msg { m := view(sm.MsgHeartbeat); m.Round = ^uint64(0); return m }()},
	}
	seen := map[sm.MsgType]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen[tc.m.Type] = true
			b, err := Encode(tc.m)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.m) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tc.m)
			}
			var buf bytes.Buffer
			if err := WriteFrame(&buf, tc.m); err != nil {
				t.Fatalf("WriteFrame: %v", err)
			}
			if n := binary.BigEndian.Uint32(buf.Bytes()); int(n) != len(b) || buf.Len() != 4+len(b) {
				t.Fatalf("frame length %d, buffer %d, encoded %d", n, buf.Len(), len(b))
			}
			got, err = ReadFrame(&buf)
			if err != nil {
				t.Fatalf("ReadFrame: %v", err)
			}
			if !reflect.DeepEqual(got, tc.m) {
				t.Fatalf("frame round trip:\n got %+v\nwant %+v", got, tc.m)
			}
		})
	}
	for ty := sm.MsgProbe; ty.Valid(); ty++ {
		if !seen[ty] {
			t.Errorf("no round-trip case for %s", ty)
		}
	}
}

// TestConfigTagMapping pins the documented mapping: for the config
// replication types the tag goes to the body's version_tag and the view.
func TestConfigTagMapping(t *testing.T) {
	const tag = 0x0102030405060708
	for ty := sm.MsgProbe; ty.Valid(); ty++ {
		m := sm.Msg{Type: ty, ConfigTag: tag}
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("%s: Encode: %v", ty, err)
		}
		var env schema.Envelope
		if err := proto.Unmarshal(b, &env); err != nil {
			t.Fatal(err)
		}
		if got := env.GetFrom().GetConfigTag(); got != tag {
			t.Errorf("%s: PeerView.config_tag = %#x, want %#x", ty, got, tag)
		}
		var bodyTag uint64
		hasBodyTag := true
		switch ty {
		case sm.MsgReplConfig:
			bodyTag = env.GetReplConfig().GetVersionTag()
		case sm.MsgReplConfigReply:
			bodyTag = env.GetReplConfigReply().GetVersionTag()
		case sm.MsgReplConfigPush:
			bodyTag = env.GetReplConfigPush().GetVersionTag()
		case sm.MsgReplConfigPushReply:
			bodyTag = env.GetReplConfigPushReply().GetVersionTag()
		default:
			hasBodyTag = false
		}
		if hasBodyTag && bodyTag != tag {
			t.Errorf("%s: body version_tag = %#x, want %#x", ty, bodyTag, tag)
		}
	}
	// Decode takes the carried tag from the body, not from the view.
	env := &schema.Envelope{
		From: &schema.PeerView{ConfigTag: 1},
		Body: &schema.Envelope_ReplConfigPush{ReplConfigPush: &schema.ReplConfigPushRequest{VersionTag: 2}},
	}
	b, err := proto.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.ConfigTag != 2 {
		t.Errorf("push ConfigTag = %d, want body version_tag 2", m.ConfigTag)
	}
	// ...and for the other types from the view.
	env = &schema.Envelope{From: &schema.PeerView{ConfigTag: 3}, Body: &schema.Envelope_Heartbeat{Heartbeat: &schema.Heartbeat{}}}
	if b, err = proto.Marshal(env); err != nil {
		t.Fatal(err)
	}
	if m, err = Decode(b); err != nil || m.ConfigTag != 3 {
		t.Errorf("heartbeat: got %+v, %v; want ConfigTag 3", m, err)
	}
}

// genMsg generates a valid message: only the fields its type carries are
// set, empty payloads are nil.
func genMsg() *rapid.Generator[sm.Msg] {
	return rapid.Custom(func(t *rapid.T) sm.Msg {
		m := sm.Msg{
			Type:      rapid.SampledFrom(sortedTypes()).Draw(t, "type"),
			ReqID:     rapid.Uint64().Draw(t, "req"),
			Role:      sm.Role(rapid.IntRange(int(sm.RoleBooting), int(sm.RoleStopped)).Draw(t, "role")),
			Term:      rapid.Uint64().Draw(t, "term"),
			Priority:  rapid.IntRange(0, MaxPriority).Draw(t, "prio"),
			WALPos:    rapid.Uint64().Draw(t, "wal"),
			ConfigTag: rapid.Uint64().Draw(t, "tag"),
			PeersHash: rapid.Uint64().Draw(t, "peershash"),
		}
		c := bodyFields[m.Type]
		if c.upToDate {
			m.UpToDate = rapid.Bool().Draw(t, "uptodate")
		}
		if c.accepted {
			m.Accepted = rapid.Bool().Draw(t, "accepted")
		}
		if c.status {
			m.Status = rapid.Int32().Draw(t, "status")
			m.Error = rapid.StringN(0, 64, MaxErrorLen).Draw(t, "error")
		}
		if c.sha && rapid.Bool().Draw(t, "has sha") {
			m.SHA256 = rapid.SliceOfN(rapid.Byte(), SHA256Size, SHA256Size).Draw(t, "sha")
		}
		if c.bytes {
			if b := rapid.SliceOfN(rapid.Byte(), 0, 512).Draw(t, "bytes"); len(b) > 0 {
				m.Bytes = b
			}
		}
		if c.catchUp {
			m.CatchUp = rapid.Bool().Draw(t, "catchup")
		}
		if c.diverged {
			m.Diverged = rapid.Bool().Draw(t, "diverged")
		}
		if c.prev {
			m.PrevLSN, m.PrevTerm = rapid.Uint64().Draw(t, "prevlsn"), rapid.Uint64().Draw(t, "prevterm")
		}
		if c.offset {
			m.Offset = rapid.Uint64().Draw(t, "offset")
		}
		if c.total {
			m.Total = rapid.Uint64().Draw(t, "total")
		}
		if c.transfer {
			m.Transfer = rapid.Bool().Draw(t, "transfer")
		}
		return m
	})
}

func TestRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMsg().Draw(t, "msg")
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode(valid %+v): %v", m, err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
	})
}

// TestEncodeAcceptsOnlyFaithful: for arbitrary (often invalid) messages,
// whatever Encode accepts round-trips exactly; what it refuses wraps ErrBadMsg.
func TestEncodeAcceptsOnlyFaithful(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := sm.Msg{
			Type:      sm.MsgType(rapid.IntRange(0, 12).Draw(t, "type")),
			ReqID:     rapid.Uint64().Draw(t, "req"),
			Role:      sm.Role(rapid.IntRange(0, 7).Draw(t, "role")),
			Term:      rapid.Uint64().Draw(t, "term"),
			Priority:  rapid.IntRange(-3, MaxPriority+3).Draw(t, "prio"),
			WALPos:    rapid.Uint64().Draw(t, "wal"),
			ConfigTag: rapid.Uint64().Draw(t, "tag"),
			UpToDate:  rapid.Bool().Draw(t, "uptodate"),
			Accepted:  rapid.Bool().Draw(t, "accepted"),
			Status:    rapid.Int32Range(-1, 1).Draw(t, "status"),
			Error:     rapid.SampledFrom([]string{"", "x", "\xff\xfe"}).Draw(t, "error"),
			SHA256:    rapid.SampledFrom([][]byte{nil, {}, make([]byte, 31), make([]byte, 32), make([]byte, 33)}).Draw(t, "sha"),
			Bytes:     rapid.SampledFrom([][]byte{nil, {}, {1, 2, 3}}).Draw(t, "bytes"),
			CatchUp:   rapid.Bool().Draw(t, "catchup"),
			Diverged:  rapid.Bool().Draw(t, "diverged"),
			PrevLSN:   rapid.Uint64Range(0, 2).Draw(t, "prevlsn"),
			Offset:    rapid.Uint64Range(0, 2).Draw(t, "offset"),
			Total:     rapid.Uint64Range(0, 2).Draw(t, "total"),
		}
		b, err := Encode(m)
		if err != nil {
			if !errors.Is(err, ErrBadMsg) {
				t.Fatalf("Encode error %v does not wrap ErrBadMsg", err)
			}
			return
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(%+v)): %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("Encode accepted a lossy message:\n got %+v\nwant %+v", got, m)
		}
	})
}

func TestEncodeRejects(t *testing.T) {
	ok := view(sm.MsgReplConfigReply)
	mod := func(f func(*sm.Msg)) sm.Msg { m := ok; f(&m); return m }
	tests := []struct {
		name string
		m    sm.Msg
		want error
	}{
		{"zero type", sm.Msg{}, ErrBadMsg},
		{"unknown type", sm.Msg{Type: 200}, ErrBadMsg},
		{"role out of range", mod(func(m *sm.Msg) { m.Role = sm.RoleStopped + 1 }), ErrBadMsg},
		{"negative priority", mod(func(m *sm.Msg) { m.Priority = -1 }), ErrBadMsg},
		{"priority too big", mod(func(m *sm.Msg) { m.Priority = MaxPriority + 1 }), ErrBadMsg},
		{"short sha", mod(func(m *sm.Msg) { m.SHA256 = make([]byte, 31) }), ErrBadMsg},
		{"empty non-nil sha", mod(func(m *sm.Msg) { m.SHA256 = []byte{} }), ErrBadMsg},
		{"empty non-nil bytes", mod(func(m *sm.Msg) { m.Bytes = []byte{} }), ErrBadMsg},
		{"bytes too big", mod(func(m *sm.Msg) { m.Bytes = make([]byte, sm.MaxConfigSize+1) }), ErrBadMsg},
		{"error too long", mod(func(m *sm.Msg) { m.Error = strings.Repeat("e", MaxErrorLen+1) }), ErrBadMsg},
		{"error not utf8", mod(func(m *sm.Msg) { m.Error = "\xff" }), ErrBadMsg},
		{"accepted on reply", mod(func(m *sm.Msg) { m.Accepted = true }), ErrBadMsg},
		{"uptodate on push", sm.Msg{Type: sm.MsgReplConfigPush, UpToDate: true}, ErrBadMsg},
		{"status on heartbeat", sm.Msg{Type: sm.MsgHeartbeat, Status: 1}, ErrBadMsg},
		{"error on push reply", sm.Msg{Type: sm.MsgReplConfigPushReply, Error: "x"}, ErrBadMsg},
		{"bytes on probe", sm.Msg{Type: sm.MsgProbe, Bytes: []byte{1}}, ErrBadMsg},
		{"sha on join", sm.Msg{Type: sm.MsgJoin, SHA256: make([]byte, 32)}, ErrBadMsg},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Encode(tc.m)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Encode = %x, %v; want %v", b, err, tc.want)
			}
			if err := WriteFrame(io.Discard, tc.m); !errors.Is(err, tc.want) {
				t.Fatalf("WriteFrame = %v; want %v", err, tc.want)
			}
		})
	}
}

func marshal(t *testing.T, env *schema.Envelope) []byte {
	t.Helper()
	b, err := proto.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func frame(body []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return append(out, body...)
}

func TestDecodeRejects(t *testing.T) {
	from := &schema.PeerView{Role: schema.Role_ROLE_PRIMARY, Term: 3}
	push := func(sha, blob []byte) *schema.Envelope {
		return &schema.Envelope{From: from, Body: &schema.Envelope_ReplConfigPush{ReplConfigPush: &schema.ReplConfigPushRequest{Sha256: sha, Bytes: blob}}}
	}
	hb := &schema.Envelope_Heartbeat{Heartbeat: &schema.Heartbeat{}}
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrBadFrame},
		{"garbage", []byte{0xff, 0xff, 0xff, 0xff, 0xff}, ErrBadFrame},
		{"garbage text", []byte("hello, world"), ErrBadFrame},
		{"truncated varint", []byte{0x08}, ErrBadFrame},
		{"missing body", marshal(t, &schema.Envelope{From: from, ReqId: 1}), ErrBadFrame},
		{"missing view", marshal(t, &schema.Envelope{Body: hb}), ErrBadFrame},
		// field 99 is not (yet) a body: an unknown body type reads as none.
		{"unknown body field", append(marshal(t, &schema.Envelope{From: from}), 0x9a, 0x06, 0x00), ErrBadFrame},
		{"role out of range", marshal(t, &schema.Envelope{From: &schema.PeerView{Role: 5}, Body: hb}), ErrBadFrame},
		{"negative role", marshal(t, &schema.Envelope{From: &schema.PeerView{Role: -1}, Body: hb}), ErrBadFrame},
		{"priority too big", marshal(t, &schema.Envelope{From: &schema.PeerView{Priority: MaxPriority + 1}, Body: hb}), ErrBadFrame},
		{"sha 31 bytes", marshal(t, push(make([]byte, 31), []byte{1})), ErrBadFrame},
		{"sha 33 bytes", marshal(t, push(make([]byte, 33), []byte{1})), ErrBadFrame},
		{"bytes too big", marshal(t, push(make([]byte, 32), make([]byte, sm.MaxConfigSize+1))), ErrBadFrame},
		{"error too long", marshal(t, &schema.Envelope{From: from, Body: &schema.Envelope_JoinReply{JoinReply: &schema.JoinReply{Status: 1, Error: strings.Repeat("x", MaxErrorLen+1)}}}), ErrBadFrame},
		{"error not utf8", append(marshal(t, &schema.Envelope{From: from}), 0x72, 0x04, 0x12, 0x02, 0xff, 0xfe), ErrBadFrame},
		{"over frame size", make([]byte, MaxFrameSize+1), ErrFrameTooBig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.b)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode = %+v, %v; want %v", m, err, tc.want)
			}
			if tc.want == ErrFrameTooBig {
				return
			}
			m, err = ReadFrame(bytes.NewReader(frame(tc.b)))
			if !errors.Is(err, tc.want) {
				t.Fatalf("ReadFrame = %+v, %v; want %v", m, err, tc.want)
			}
		})
	}
}

func TestReadFrameErrors(t *testing.T) {
	good, err := Encode(view(sm.MsgHeartbeat))
	if err != nil {
		t.Fatal(err)
	}
	full := frame(good)
	tooBig := binary.BigEndian.AppendUint32(nil, MaxFrameSize+1)
	huge := binary.BigEndian.AppendUint32(nil, ^uint32(0))
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"clean EOF", nil, io.EOF},
		{"short header", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"header only", full[:4], io.ErrUnexpectedEOF},
		{"truncated body", full[:len(full)-1], io.ErrUnexpectedEOF},
		{"oversized length", tooBig, ErrFrameTooBig},
		{"4 GiB length", huge, ErrFrameTooBig},
		{"zero length", []byte{0, 0, 0, 0}, ErrBadFrame},
		{"garbage body", frame([]byte{0xff, 0xff, 0xff}), ErrBadFrame},
		{"bad sha length", frame(marshal(t, &schema.Envelope{From: &schema.PeerView{}, Body: &schema.Envelope_ReplConfigReply{ReplConfigReply: &schema.ReplConfigReply{Sha256: []byte{1, 2, 3}}}})), ErrBadFrame},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ReadFrame(bytes.NewReader(tc.b))
			if !errors.Is(err, tc.want) {
				t.Fatalf("ReadFrame = %+v, %v; want %v", m, err, tc.want)
			}
			if tc.want == io.EOF && err != io.EOF {
				t.Fatalf("clean close must return io.EOF itself, got %v", err)
			}
			// One byte at a time must give the same answer.
			if _, err := ReadFrame(iotest.OneByteReader(bytes.NewReader(tc.b))); !errors.Is(err, tc.want) {
				t.Fatalf("ReadFrame(one byte reader) = %v; want %v", err, tc.want)
			}
		})
	}
}

// TestReadFrameTooBigAllocatesNothing: an oversized length is refused
// before any body buffer is allocated.
func TestReadFrameTooBigAllocatesNothing(t *testing.T) {
	hdr := binary.BigEndian.AppendUint32(nil, ^uint32(0))
	r := bytes.NewReader(hdr)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(hdr)
		if _, err := ReadFrame(r); !errors.Is(err, ErrFrameTooBig) {
			t.Fatalf("ReadFrame: %v", err)
		}
	})
	// The error value itself allocates a little; a body buffer would be
	// one allocation of ~4 GiB, so bound the bytes, not only the count.
	if allocs > 8 {
		t.Fatalf("%v allocations for an oversized frame", allocs)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r.Reset(hdr)
	_, _ = ReadFrame(r)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("oversized frame allocated %d bytes", n)
	}
}

func TestReadFrameSequence(t *testing.T) {
	var buf bytes.Buffer
	var want []sm.Msg
	for ty := sm.MsgProbe; ty.Valid(); ty++ {
		m := view(ty)
		m.ReqID = uint64(ty)
		want = append(want, m)
		if err := WriteFrame(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	r := iotest.HalfReader(&buf)
	for i, w := range want {
		got, err := ReadFrame(r)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("frame %d: got %+v want %+v", i, got, w)
		}
	}
	if _, err := ReadFrame(r); err != io.EOF {
		t.Fatalf("after last frame: %v, want io.EOF", err)
	}
}

type failWriter struct{}

var errWrite = errors.New("boom")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestWriteFrameError(t *testing.T) {
	if err := WriteFrame(failWriter{}, view(sm.MsgProbe)); !errors.Is(err, errWrite) {
		t.Fatalf("WriteFrame = %v, want wrapped writer error", err)
	}
}

// sortedTypes lists every message type the wire carries, in order.
func sortedTypes() []sm.MsgType {
	var out []sm.MsgType
	for t := range bodyFields {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}
