package wire

// The peer connection's preamble (Hello, schema/client.proto), framed as
// WriteFrame/ReadFrame: a 4-byte big-endian length followed by one
// protobuf message. DecodeHello is its one validating decode: anything
// malformed is an error wrapping ErrBadFrame (or ErrFrameTooBig), never a
// panic; EncodeHello refuses, with ErrBadMsg, what DecodeHello would.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
)

// MaxHelloSize bounds the encoded Hello (the first frame of a connection,
// length prefix excluded). It is checked before anything is allocated, so
// a dialer cannot make the listener allocate MaxFrameSize before saying
// who it is.
const MaxHelloSize = 1024

// MaxNameLen bounds a name (bytes) in Hello and StatusReply.
const MaxNameLen = 255

// EncodeHello returns the protobuf bytes of h. A PEER Hello needs a
// non-empty name; names are at most MaxNameLen bytes of valid UTF-8.
func EncodeHello(h *schema.Hello) ([]byte, error) {
	if err := checkHello(h); err != nil {
		return nil, fmt.Errorf("%w: hello: %w", ErrBadMsg, err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("%w: hello: %w", ErrBadMsg, err)
	}
	if len(b) > MaxHelloSize {
		return nil, fmt.Errorf("%w: hello encodes to %d bytes, max %d", ErrFrameTooBig, len(b), MaxHelloSize)
	}
	return b, nil
}

// DecodeHello parses and validates a Hello.
func DecodeHello(b []byte) (*schema.Hello, error) {
	if len(b) > MaxHelloSize {
		return nil, fmt.Errorf("%w: hello is %d bytes, max %d", ErrFrameTooBig, len(b), MaxHelloSize)
	}
	h := new(schema.Hello)
	if err := proto.Unmarshal(b, h); err != nil {
		return nil, fmt.Errorf("%w: hello: protobuf: %w", ErrBadFrame, err)
	}
	if err := checkHello(h); err != nil {
		return nil, fmt.Errorf("%w: hello: %w", ErrBadFrame, err)
	}
	return h, nil
}

func checkHello(h *schema.Hello) error {
	if h == nil {
		return errors.New("nil message")
	}
	switch h.GetKind() {
	case schema.Hello_PEER:
		if h.GetName() == "" {
			return errors.New("peer hello without a name")
		}
	case schema.Hello_CLIENT:
	default:
		return fmt.Errorf("unknown connection kind %d", int32(h.GetKind()))
	}
	return checkName("name", h.GetName())
}

func checkName(field, s string) error {
	if len(s) > MaxNameLen {
		return fmt.Errorf("%s is %d bytes, max %d", field, len(s), MaxNameLen)
	}
	return nil
}

// WriteHello writes h as one frame with a single Write call.
func WriteHello(w io.Writer, h *schema.Hello) error {
	b, err := EncodeHello(h)
	if err != nil {
		return err
	}
	return writeRaw(w, "hello", b)
}

// ReadHello reads and decodes the first frame of a connection. A length
// over MaxHelloSize returns ErrFrameTooBig before anything is allocated.
// Clean EOF before the frame returns io.EOF, as ReadFrame.
func ReadHello(r io.Reader) (*schema.Hello, error) {
	b, err := readRaw(r, "hello", MaxHelloSize)
	if err != nil {
		return nil, err
	}
	return DecodeHello(b)
}

func writeRaw(w io.Writer, what string, b []byte) error {
	buf := make([]byte, headerSize+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[headerSize:], b)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("wire: write %s frame: %w", what, err)
	}
	return nil
}

// readRaw reads one frame's body of at most limit bytes, with ReadFrame's
// error conventions.
func readRaw(r io.Reader, what string, limit uint32) ([]byte, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("wire: read %s header: %w", what, err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > limit {
		return nil, fmt.Errorf("%w: %s length %d, max %d", ErrFrameTooBig, what, n, limit)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("wire: read %s body (%d bytes): %w", what, n, err)
	}
	return body, nil
}
