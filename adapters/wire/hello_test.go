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

	"github.com/xce-hpc/xce/schema"
)

func header(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

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

// Arbitrary bytes either decode as a Hello that encodes again, or fail
// with ErrBadFrame: never a panic.
func TestHelloDecodeArbitrary(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "bytes")
		if h, err := DecodeHello(b); err == nil {
			if _, err := EncodeHello(h); err != nil {
				t.Fatalf("hello %v decoded but does not encode: %v", h, err)
			}
		} else if !errors.Is(err, ErrBadFrame) {
			t.Fatalf("hello: %v", err)
		}
	})
}
