package client

import (
	"encoding/binary"
	"io"
	"net/http"
	"strings"
)

// envelopeBody hands a streaming call's request body to net/http in whole
// envelopes. Connect writes a message's 5-byte envelope prefix and the
// message as two writes into the body's pipe, and net/http's HTTP/2 client
// sends and flushes one DATA frame per Read of the body: each message on a
// Work stream cost two frames, two TLS records and two write syscalls where
// one does (docs/performance.md, "Queue throughput over the network").
// Read returns once it holds a whole envelope, p is full, or the body
// ends; the rest of an envelope is always on its way, as Connect writes
// both parts in one Send.
type envelopeBody struct {
	r      io.ReadCloser
	prefix [5]byte
	have   int    // bytes of the current envelope's prefix read
	left   uint32 // bytes of its message still to read, once the prefix is whole
}

// wrapStreamBody wraps the body of a streaming call (Connect's or gRPC's
// enveloped content types); any other request is left as it is.
func wrapStreamBody(r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/connect+") || strings.HasPrefix(ct, "application/grpc") {
		r.Body = &envelopeBody{r: r.Body}
	}
}

func (b *envelopeBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := b.r.Read(p[n:])
		whole := b.track(p[n : n+m])
		n += m
		if err != nil || whole || m == 0 {
			return n, err
		}
	}
	return n, nil
}

// track follows the envelopes in q, the bytes just read; it reports
// whether q ends at an envelope's end.
func (b *envelopeBody) track(q []byte) bool {
	for len(q) > 0 {
		if b.have < len(b.prefix) {
			c := copy(b.prefix[b.have:], q)
			b.have += c
			q = q[c:]
			if b.have < len(b.prefix) {
				return false
			}
			b.left = binary.BigEndian.Uint32(b.prefix[1:])
		}
		c := min(uint64(b.left), uint64(len(q)))
		b.left -= uint32(c)
		q = q[c:]
		if b.left == 0 {
			b.have = 0 // the next byte starts an envelope
		}
	}
	return b.have == 0
}

func (b *envelopeBody) Close() error { return b.r.Close() }
