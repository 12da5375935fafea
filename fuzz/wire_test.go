package fuzz

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/sm"
)

var frameErrs = []error{wire.ErrBadFrame, wire.ErrFrameTooBig}

func seedMsgs() []sm.Msg {
	blob := []byte("\x18\xe8\x39\x22\x09\x08\x01\x12\x05\x71\x75\x65\x75\x65")
	sum := make([]byte, 32)
	for i := range sum {
		sum[i] = byte(i)
	}
	return []sm.Msg{
		{Type: sm.MsgProbe, ReqID: 1, Role: sm.RoleCandidate, Term: 1, Priority: 1},
		{Type: sm.MsgHeartbeat, Role: sm.RolePrimary, Term: 7, ConfigTag: 0xabcdef, WALPos: 99},
		{Type: sm.MsgJoinReply, ReqID: 2, Status: -13, Error: "not primary"},
		{Type: sm.MsgReplConfigReply, ReqID: 3, Role: sm.RolePrimary, ConfigTag: sm.TagOf(blob), SHA256: sum, Bytes: blob},
		{Type: sm.MsgReplConfigPushReply, Accepted: true, ConfigTag: 5},
	}
}

// FuzzWireDecode: Decode never panics and fails only with its sentinels;
// whatever it accepts, Encode accepts, and Decode(Encode(m)) == m with
// Encode a fixed point on the bytes.
func FuzzWireDecode(f *testing.F) {
	for _, m := range seedMsgs() {
		b, err := wire.Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x12, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := wire.Decode(b)
		if err != nil {
			if !isOneOf(err, frameErrs) {
				t.Fatalf("Decode: error %v wraps no sentinel", err)
			}
			return
		}
		checkReencode(t, m)
	})
}

func checkReencode(t *testing.T, m sm.Msg) {
	t.Helper()
	enc, err := wire.Encode(m)
	if err != nil {
		t.Fatalf("Encode(decoded %+v): %v", m, err)
	}
	m2, err := wire.Decode(enc)
	if err != nil {
		t.Fatalf("Decode(Encode(m)): %v", err)
	}
	if !reflect.DeepEqual(m, m2) {
		t.Fatalf("not a fixed point:\n%+v\n%+v", m, m2)
	}
	enc2, err := wire.Encode(m2)
	if err != nil || !bytes.Equal(enc, enc2) {
		t.Fatalf("Encode not deterministic: %x vs %x (%v)", enc, enc2, err)
	}
}

// FuzzReadFrame: reading frames from arbitrary bytes never panics, ends
// with io.EOF at a frame boundary or a documented error, and every frame
// read re-encodes exactly.
func FuzzReadFrame(f *testing.F) {
	var all bytes.Buffer
	for _, m := range seedMsgs() {
		var one bytes.Buffer
		if err := wire.WriteFrame(&one, m); err != nil {
			f.Fatal(err)
		}
		all.Write(one.Bytes())
		f.Add(one.Bytes())
	}
	f.Add(all.Bytes())
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 9, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			m, err := wire.ReadFrame(r)
			if err == io.EOF {
				return
			}
			if err != nil {
				if !errors.Is(err, io.ErrUnexpectedEOF) && !isOneOf(err, frameErrs) {
					t.Fatalf("ReadFrame: undocumented error %v", err)
				}
				return
			}
			checkReencode(t, m)
		}
	})
}
