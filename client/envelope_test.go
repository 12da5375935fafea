package client

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// envelope is one Connect envelope: flags, a big-endian length, the message.
func envelope(flags byte, msg []byte) []byte {
	e := make([]byte, 5, 5+len(msg))
	e[0] = flags
	binary.BigEndian.PutUint32(e[1:], uint32(len(msg)))
	return append(e, msg...)
}

// TestEnvelopeBodyReadsWholeEnvelopes writes envelopes into a pipe the way
// Connect's Send does (the prefix, then the message, as two writes) and
// reads them through envelopeBody with buffers of random sizes: the bytes
// come out unchanged, and a Read returns only at an envelope's end, when
// its buffer is full, or at the body's end.
func TestEnvelopeBodyReadsWholeEnvelopes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		msgs := rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 300), 0, 8).Draw(t, "msgs")
		pr, pw := io.Pipe()
		var want []byte
		go func() {
			for _, m := range msgs {
				e := envelope(0, m)
				pw.Write(e[:5])
				if len(m) > 0 {
					pw.Write(e[5:])
				}
			}
			pw.Close()
		}()
		var ends []int // the stream offsets where envelopes end
		for _, m := range msgs {
			e := envelope(0, m)
			want = append(want, e...)
			ends = append(ends, len(want))
		}
		defer pr.Close()
		b := &envelopeBody{r: pr}
		var got []byte
		for {
			p := make([]byte, rapid.IntRange(1, 700).Draw(t, "buf"))
			n, err := b.Read(p)
			got = append(got, p[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			atEnd := false
			for _, e := range ends {
				atEnd = atEnd || e == len(got)
			}
			if n < len(p) && !atEnd {
				t.Fatalf("Read returned %d of %d bytes at offset %d, inside an envelope (ends %v)", n, len(p), len(got), ends)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read %x, want %x", got, want)
		}
	})
}

// TestEnvelopeBodyTracksSplitPrefixes feeds envelopes in pieces of every
// size, prefixes split included: an envelope's end is found wherever the
// pieces fall.
func TestEnvelopeBodyTracksSplitPrefixes(t *testing.T) {
	stream := append(append(envelope(0, []byte("abc")), envelope(2, nil)...), envelope(0, bytes.Repeat([]byte{7}, 9))...)
	ends := map[int]bool{8: true, 13: true, 27: true}
	for size := 1; size <= len(stream); size++ {
		var b envelopeBody
		for off := 0; off < len(stream); off += size {
			end := min(off+size, len(stream))
			if got := b.track(stream[off:end]); got != ends[end] {
				t.Fatalf("pieces of %d: track up to %d said whole=%v, want %v", size, end, got, ends[end])
			}
		}
	}
}

func TestWrapStreamBodyOnlyEnveloped(t *testing.T) {
	for _, c := range []struct {
		ct   string
		wrap bool
	}{
		{"application/connect+proto", true},
		{"application/connect+json", true},
		{"application/grpc", true},
		{"application/grpc+proto", true},
		{"application/proto", false}, // a unary Connect call: no envelopes
		{"application/json", false},
	} {
		r, err := http.NewRequest(http.MethodPost, "https://n0/x", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", c.ct)
		wrapStreamBody(r)
		if _, got := r.Body.(*envelopeBody); got != c.wrap {
			t.Errorf("%s: wrapped=%v, want %v", c.ct, got, c.wrap)
		}
	}
}
