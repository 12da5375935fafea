package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"xce/schema"
	"xce/sm"
)

func header(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func fullStatus() *schema.StatusReply {
	return &schema.StatusReply{
		Name: "n1", Priority: 1, Role: "standby", Term: 7, Primary: 0, PrimaryName: "n0",
		ConfigTag: 0xdeadbeef, ConfigGeneration: 3, ConfigStale: true, Serving: true,
	}
}

func TestHelloRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    *schema.Hello
	}{
		{"peer", &schema.Hello{Kind: schema.Hello_PEER, Name: "n0"}},
		{"peer max name", &schema.Hello{Kind: schema.Hello_PEER, Name: strings.Repeat("n", MaxNameLen)}},
		{"peer unicode", &schema.Hello{Kind: schema.Hello_PEER, Name: "nœud-0"}},
		{"client", &schema.Hello{Kind: schema.Hello_CLIENT, Name: "xcectl"}},
		{"client anonymous", &schema.Hello{Kind: schema.Hello_CLIENT}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteHello(&buf, tc.h); err != nil {
				t.Fatal(err)
			}
			got, err := ReadHello(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tc.h) {
				t.Fatalf("got %v, want %v", got, tc.h)
			}
			if _, err := ReadHello(&buf); err != io.EOF {
				t.Fatalf("after the frame: %v, want io.EOF", err)
			}
		})
	}
}

func TestHelloEncodeRefuses(t *testing.T) {
	tests := []struct {
		name string
		h    *schema.Hello
	}{
		{"nil", nil},
		{"peer without name", &schema.Hello{Kind: schema.Hello_PEER}},
		{"unknown kind", &schema.Hello{Kind: 7, Name: "x"}},
		{"name too long", &schema.Hello{Kind: schema.Hello_PEER, Name: strings.Repeat("n", MaxNameLen+1)}},
		{"invalid utf-8", &schema.Hello{Kind: schema.Hello_PEER, Name: "n\xff"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := WriteHello(&buf, tc.h)
			if !errors.Is(err, ErrBadMsg) {
				t.Fatalf("err = %v, want ErrBadMsg", err)
			}
			if buf.Len() != 0 {
				t.Fatalf("%d bytes written on error", buf.Len())
			}
		})
	}
}

// rawHello encodes a Hello field by field, bypassing the checks.
func rawHello(kind uint64, name string) []byte {
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, kind)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendString(b, name)
}

func TestReadHelloRejects(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error // errors.Is target; nil = any non-nil error
	}{
		{"empty frame is a nameless peer", frame(nil), ErrBadFrame},
		{"peer without name", frame(rawHello(0, "")), ErrBadFrame},
		{"unknown kind", frame(rawHello(2, "n0")), ErrBadFrame},
		{"negative kind", frame(rawHello(^uint64(0), "n0")), ErrBadFrame},
		{"name too long", frame(rawHello(0, strings.Repeat("x", MaxNameLen+1))), ErrBadFrame},
		{"invalid utf-8 name", frame(rawHello(0, "n\xff")), ErrBadFrame},
		{"garbage", frame([]byte{0xff, 0xff, 0xff}), ErrBadFrame},
		{"length over MaxHelloSize", append(header(MaxHelloSize+1), make([]byte, MaxHelloSize+1)...), ErrFrameTooBig},
		{"length 4 GiB", header(^uint32(0)), ErrFrameTooBig},
		{"short header", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"short body", append(header(10), 1, 2, 3), io.ErrUnexpectedEOF},
		{"clean EOF", nil, io.EOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ReadHello(bytes.NewReader(tc.in))
			if err == nil {
				t.Fatalf("accepted %v", h)
			}
			if h != nil {
				t.Fatalf("returned %v with error %v", h, err)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestClientRequestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		r    *schema.ClientRequest
	}{
		{"status", &schema.ClientRequest{Id: 1, Op: &schema.ClientRequest_Status{Status: &schema.StatusRequest{}}}},
		{"status id 0", &schema.ClientRequest{Op: &schema.ClientRequest_Status{Status: &schema.StatusRequest{}}}},
		{"status max id", &schema.ClientRequest{Id: ^uint64(0), Op: &schema.ClientRequest_Status{Status: &schema.StatusRequest{}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteClientRequest(&buf, tc.r); err != nil {
				t.Fatal(err)
			}
			got, err := ReadClientRequest(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tc.r) {
				t.Fatalf("got %v, want %v", got, tc.r)
			}
		})
	}
}

func TestClientRequestEncodeRefuses(t *testing.T) {
	tests := []struct {
		name string
		r    *schema.ClientRequest
	}{
		{"nil", nil},
		{"no op", &schema.ClientRequest{Id: 3}},
		{"nil status body", &schema.ClientRequest{Id: 3, Op: &schema.ClientRequest_Status{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteClientRequest(&buf, tc.r); !errors.Is(err, ErrBadMsg) {
				t.Fatalf("err = %v, want ErrBadMsg", err)
			}
		})
	}
}

func TestClientRequestDecode(t *testing.T) {
	// An op from a newer client (unknown field 99) decodes with a nil op.
	unknownOp := protowire.AppendTag(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 9), 99, protowire.BytesType)
	unknownOp = protowire.AppendBytes(unknownOp, nil)
	r, err := ReadClientRequest(bytes.NewReader(frame(unknownOp)))
	if err != nil {
		t.Fatalf("unknown op: %v", err)
	}
	if r.GetId() != 9 || r.GetOp() != nil {
		t.Fatalf("unknown op decoded as %v", r)
	}

	bad := []struct {
		name string
		in   []byte
		want error
	}{
		{"garbage", frame([]byte{0x0a}), ErrBadFrame},
		{"field number 0", frame([]byte{0x00, 0x01}), ErrBadFrame},
		{"status op truncated", frame([]byte{0x52, 0x05, 0x00}), ErrBadFrame},
		{"length over MaxFrameSize", header(MaxFrameSize + 1), ErrFrameTooBig},
		{"short body", append(header(100), 0x08), io.ErrUnexpectedEOF},
		{"clean EOF", nil, io.EOF},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ReadClientRequest(bytes.NewReader(tc.in))
			if !errors.Is(err, tc.want) || r != nil {
				t.Fatalf("got %v, %v; want error %v", r, err, tc.want)
			}
		})
	}
}

func TestClientReplyRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		r    *schema.ClientReply
	}{
		{"status", &schema.ClientReply{Id: 4, Body: &schema.ClientReply_StatusReply{StatusReply: fullStatus()}}},
		{"status no primary", &schema.ClientReply{Id: 4, Body: &schema.ClientReply_StatusReply{StatusReply: &schema.StatusReply{Name: "n2", Priority: 2, Role: "candidate", Primary: -1}}}},
		{"error", &schema.ClientReply{Id: 5, Status: StatusUnsupported, Error: "no handler"}},
		{"error max text", &schema.ClientReply{Id: 5, Status: StatusInternal, Error: strings.Repeat("e", MaxErrorLen)}},
		{"error with body", &schema.ClientReply{Id: 6, Status: -11, Error: "not primary", Body: &schema.ClientReply_StatusReply{StatusReply: fullStatus()}}},
		{"ok without body", &schema.ClientReply{Id: 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteClientReply(&buf, tc.r); err != nil {
				t.Fatal(err)
			}
			got, err := ReadClientReply(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tc.r) {
				t.Fatalf("got %v, want %v", got, tc.r)
			}
		})
	}
}

func TestClientReplyRefused(t *testing.T) {
	st := func(f func(s *schema.StatusReply)) *schema.ClientReply {
		s := fullStatus()
		f(s)
		return &schema.ClientReply{Id: 1, Body: &schema.ClientReply_StatusReply{StatusReply: s}}
	}
	tests := []struct {
		name string
		r    *schema.ClientReply
	}{
		{"error text with status 0", &schema.ClientReply{Id: 1, Error: "oops"}},
		{"error text too long", &schema.ClientReply{Id: 1, Status: -5, Error: strings.Repeat("e", MaxErrorLen+1)}},
		{"invalid utf-8 error", &schema.ClientReply{Id: 1, Status: -5, Error: "\xff"}},
		{"name too long", st(func(s *schema.StatusReply) { s.Name = strings.Repeat("n", MaxNameLen+1) })},
		{"primary name too long", st(func(s *schema.StatusReply) { s.PrimaryName = strings.Repeat("n", MaxNameLen+1) })},
		{"role too long", st(func(s *schema.StatusReply) { s.Role = strings.Repeat("r", MaxRoleLen+1) })},
		{"priority out of range", st(func(s *schema.StatusReply) { s.Priority = MaxPriority + 1 })},
		{"primary below -1", st(func(s *schema.StatusReply) { s.Primary = -2 })},
		{"primary out of range", st(func(s *schema.StatusReply) { s.Primary = MaxPriority + 1 })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteClientReply(&buf, tc.r); !errors.Is(err, ErrBadMsg) {
				t.Fatalf("encode: err = %v, want ErrBadMsg", err)
			}
			// The same message forced onto the wire is refused by the reader.
			b, err := proto.Marshal(tc.r)
			if err != nil {
				return // protobuf itself refuses it (invalid UTF-8)
			}
			r, err := ReadClientReply(bytes.NewReader(frame(b)))
			if !errors.Is(err, ErrBadFrame) || r != nil {
				t.Fatalf("decode: got %v, %v; want ErrBadFrame", r, err)
			}
		})
	}
	if err := WriteClientReply(io.Discard, nil); !errors.Is(err, ErrBadMsg) {
		t.Fatalf("nil reply: %v", err)
	}
	if err := WriteClientReply(io.Discard, &schema.ClientReply{Body: &schema.ClientReply_StatusReply{}}); !errors.Is(err, ErrBadMsg) {
		t.Fatalf("nil status body: %v", err)
	}
	if r, err := ReadClientReply(bytes.NewReader(header(MaxFrameSize + 1))); !errors.Is(err, ErrFrameTooBig) || r != nil {
		t.Fatalf("oversized reply: %v, %v", r, err)
	}
}

// Arbitrary bytes never panic any decoder, and whatever a decoder accepts
// the matching encoder re-encodes.
func TestClientDecodeArbitrary(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "bytes")
		if h, err := DecodeHello(b); err == nil {
			if _, err := EncodeHello(h); err != nil {
				t.Fatalf("hello %v decoded but does not encode: %v", h, err)
			}
		} else if !errors.Is(err, ErrBadFrame) {
			t.Fatalf("hello: %v", err)
		}
		if r, err := DecodeClientReply(b); err == nil {
			if _, err := EncodeClientReply(r); err != nil {
				t.Fatalf("reply %v decoded but does not encode: %v", r, err)
			}
		} else if !errors.Is(err, ErrBadFrame) {
			t.Fatalf("reply: %v", err)
		}
		if r, err := DecodeClientRequest(b); err == nil {
			if r.GetOp() != nil {
				if _, err := EncodeClientRequest(r); err != nil {
					t.Fatalf("request %v decoded but does not encode: %v", r, err)
				}
			}
		} else if !errors.Is(err, ErrBadFrame) {
			t.Fatalf("request: %v", err)
		}
	})
}

func upgradeReq(blob, sum []byte) *schema.ClientRequest {
	return &schema.ClientRequest{Id: 12, Op: &schema.ClientRequest_UpgradeConfig{UpgradeConfig: &schema.UpgradeConfigRequest{Bytes: blob, Sha256: sum}}}
}

func upgradeRep(status int32, errText string, u *schema.UpgradeConfigReply) *schema.ClientReply {
	return &schema.ClientReply{Id: 12, Status: status, Error: errText, Body: &schema.ClientReply_UpgradeConfigReply{UpgradeConfigReply: u}}
}

// OP_upgradeConfig requests: a blob of at most sm.MaxConfigSize and a
// SHA-256 of 0 or 32 bytes travel both ways; anything else is refused by
// the encoder and, forced onto the wire, by the decoder.
func TestUpgradeConfigRequest(t *testing.T) {
	sum := bytes.Repeat([]byte{0xab}, SHA256Size)
	good := []struct {
		name string
		r    *schema.ClientRequest
	}{
		{"blob and sha256", upgradeReq([]byte("blob"), sum)},
		{"both empty (the primary refuses them)", upgradeReq(nil, nil)},
		{"no sha256", upgradeReq([]byte("blob"), nil)},
		{"max blob", upgradeReq(make([]byte, sm.MaxConfigSize), sum)},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteClientRequest(&buf, tc.r); err != nil {
				t.Fatal(err)
			}
			got, err := ReadClientRequest(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tc.r) {
				t.Fatalf("got %v, want %v", got.GetUpgradeConfig() != nil, tc.r.GetUpgradeConfig() != nil)
			}
		})
	}
	bad := []struct {
		name string
		r    *schema.ClientRequest
	}{
		{"blob over MaxConfigSize", upgradeReq(make([]byte, sm.MaxConfigSize+1), sum)},
		{"sha256 of 31 bytes", upgradeReq([]byte("blob"), sum[:31])},
		{"sha256 of 33 bytes", upgradeReq([]byte("blob"), append(sum, 0))},
		{"sha256 of 1 byte", upgradeReq([]byte("blob"), []byte{1})},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteClientRequest(&buf, tc.r); !errors.Is(err, ErrBadMsg) || buf.Len() != 0 {
				t.Fatalf("encode: err = %v (%d bytes written), want ErrBadMsg", err, buf.Len())
			}
			b, err := proto.Marshal(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := ReadClientRequest(bytes.NewReader(frame(b))); !errors.Is(err, ErrBadFrame) || r != nil {
				t.Fatalf("decode: got %v, %v; want ErrBadFrame", r != nil, err)
			}
		})
	}
	if err := WriteClientRequest(io.Discard, &schema.ClientRequest{Op: &schema.ClientRequest_UpgradeConfig{}}); !errors.Is(err, ErrBadMsg) {
		t.Fatalf("nil upgrade body: %v", err)
	}
	// An empty body on the wire decodes as an empty request (both fields
	// missing), which the primary answers.
	empty, _ := proto.Marshal(upgradeReq(nil, nil))
	if r, err := ReadClientRequest(bytes.NewReader(frame(empty))); err != nil || r.GetUpgradeConfig() == nil {
		t.Fatalf("empty upgrade body: %v, %v", r, err)
	}
}

// OP_upgradeConfig replies (seed §6.3 UpgradeConfigReply plus the §10.12
// primary index).
func TestUpgradeConfigReply(t *testing.T) {
	good := []struct {
		name string
		r    *schema.ClientReply
	}{
		{"accepted", upgradeRep(0, "", &schema.UpgradeConfigReply{VersionTag: 0x0123456789abcdef, AckedCount: 2, Primary: 0})},
		{"accepted, no standby acked", upgradeRep(0, "", &schema.UpgradeConfigReply{VersionTag: 1, Primary: 3})},
		{"redirect", upgradeRep(-11, "Not primary — redirect to primary", &schema.UpgradeConfigReply{Error: "Not primary — redirect to primary", Primary: 1})},
		{"redirect, primary unknown", upgradeRep(-11, "Not primary — redirect to primary", &schema.UpgradeConfigReply{Error: "Not primary — redirect to primary", Primary: -1})},
		{"max error text", upgradeRep(-22, "x", &schema.UpgradeConfigReply{Error: strings.Repeat("e", MaxErrorLen), Primary: -1})},
		{"max primary and count", upgradeRep(0, "", &schema.UpgradeConfigReply{VersionTag: 5, AckedCount: MaxPriority, Primary: MaxPriority})},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteClientReply(&buf, tc.r); err != nil {
				t.Fatal(err)
			}
			got, err := ReadClientReply(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tc.r) {
				t.Fatalf("got %v, want %v", got, tc.r)
			}
		})
	}
	bad := []struct {
		name string
		r    *schema.ClientReply
	}{
		{"error text too long", upgradeRep(-22, "x", &schema.UpgradeConfigReply{Error: strings.Repeat("e", MaxErrorLen+1)})},
		{"tag with an error", upgradeRep(-22, "x", &schema.UpgradeConfigReply{VersionTag: 7, Error: "refused"})},
		{"primary below -1", upgradeRep(0, "", &schema.UpgradeConfigReply{VersionTag: 7, Primary: -2})},
		{"primary out of range", upgradeRep(0, "", &schema.UpgradeConfigReply{VersionTag: 7, Primary: MaxPriority + 1})},
		{"acked count out of range", upgradeRep(0, "", &schema.UpgradeConfigReply{VersionTag: 7, AckedCount: MaxPriority + 1})},
		{"reply error text with status 0", upgradeRep(0, "oops", &schema.UpgradeConfigReply{Error: "oops"})},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteClientReply(&buf, tc.r); !errors.Is(err, ErrBadMsg) {
				t.Fatalf("encode: err = %v, want ErrBadMsg", err)
			}
			b, err := proto.Marshal(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := ReadClientReply(bytes.NewReader(frame(b))); !errors.Is(err, ErrBadFrame) || r != nil {
				t.Fatalf("decode: got %v, %v; want ErrBadFrame", r, err)
			}
		})
	}
	if err := WriteClientReply(io.Discard, &schema.ClientReply{Body: &schema.ClientReply_UpgradeConfigReply{}}); !errors.Is(err, ErrBadMsg) {
		t.Fatalf("nil upgrade reply body: %v", err)
	}
}

// Redirect recognises only an EAGAIN "Not primary" reply, takes the
// primary from whichever body carries it, and says -1 without one.
func TestRedirect(t *testing.T) {
	const np = "Not primary — redirect to primary"
	job := func(p int32) *schema.ClientReply_JobReply {
		return &schema.ClientReply_JobReply{JobReply: &schema.JobReply{Primary: p}}
	}
	up := func(p int32) *schema.ClientReply_UpgradeConfigReply {
		return &schema.ClientReply_UpgradeConfigReply{UpgradeConfigReply: &schema.UpgradeConfigReply{Error: np, Primary: p}}
	}
	for _, c := range []struct {
		name    string
		rep     *schema.ClientReply
		primary int
		ok      bool
	}{
		{"job redirect", &schema.ClientReply{Status: sm.StatusEAGAIN, Error: np, Body: job(2)}, 2, true},
		{"job redirect, primary unknown", &schema.ClientReply{Status: sm.StatusEAGAIN, Error: np, Body: job(-1)}, -1, true},
		{"upgrade redirect", &schema.ClientReply{Status: sm.StatusEAGAIN, Error: np, Body: up(1)}, 1, true},
		{"no body", &schema.ClientReply{Status: sm.StatusEAGAIN, Error: np}, -1, true},
		{"status body carries no redirect", &schema.ClientReply{Status: sm.StatusEAGAIN, Error: np,
			Body: &schema.ClientReply_StatusReply{StatusReply: &schema.StatusReply{Primary: 1}}}, -1, true},
		{"recovering primary", &schema.ClientReply{Status: sm.StatusEAGAIN, Error: "primary is recovering its job state; retry", Body: job(0)}, -1, false},
		{"outcome unknown with the same text", &schema.ClientReply{Status: sm.StatusOutcomeUnknown, Error: np, Body: job(1)}, -1, false},
		{"ok", &schema.ClientReply{Body: job(0)}, -1, false},
		{"nil", nil, -1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, ok := Redirect(c.rep)
			if p != c.primary || ok != c.ok {
				t.Fatalf("Redirect = %d, %v; want %d, %v", p, ok, c.primary, c.ok)
			}
		})
	}
}
