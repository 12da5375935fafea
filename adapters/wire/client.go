package wire

// Connection preamble (Hello) and the operator/worker client protocol
// (ClientRequest, ClientReply) of schema/client.proto. They use the same
// framing as WriteFrame/ReadFrame: a 4-byte big-endian length followed by
// one protobuf message. Every Decode* below is the one validating decode of
// its message: anything malformed is an error wrapping ErrBadFrame (or
// ErrFrameTooBig), never a panic. Every Encode* refuses, with ErrBadMsg, a
// message that the matching Decode* would refuse, so what one side writes
// the other side reads.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/proto"

	"xce/schema"
	"xce/sm"
)

// MaxHelloSize bounds the encoded Hello (the first frame of a connection,
// length prefix excluded). It is checked before anything is allocated, so
// a dialer cannot make the listener allocate MaxFrameSize before saying
// who it is.
const MaxHelloSize = 1024

// MaxNameLen bounds a name (bytes) in Hello and StatusReply.
const MaxNameLen = 255

// MaxRoleLen bounds StatusReply.role (bytes).
const MaxRoleLen = 32

// Client reply status codes (negative errno, as sm.Msg.Status).
const (
	StatusOK          int32 = 0
	StatusInternal    int32 = -5  // -EIO: the handler failed or gave no reply
	StatusUnsupported int32 = -38 // -ENOSYS: no handler, or an op this server does not know
)

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

// EncodeClientRequest returns the protobuf bytes of r. The op must be set
// (a request without one would be answered "unsupported").
func EncodeClientRequest(r *schema.ClientRequest) ([]byte, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: client request: nil message", ErrBadMsg)
	}
	switch op := r.GetOp().(type) {
	case *schema.ClientRequest_Status:
		if op.Status == nil {
			return nil, fmt.Errorf("%w: client request %d: status op with nil body", ErrBadMsg, r.GetId())
		}
	case *schema.ClientRequest_Job:
		if err := checkJobRequest(op.Job); err != nil {
			return nil, fmt.Errorf("%w: client request %d: %w", ErrBadMsg, r.GetId(), err)
		}
	case *schema.ClientRequest_Config:
		if op.Config == nil {
			return nil, fmt.Errorf("%w: client request %d: config op with nil body", ErrBadMsg, r.GetId())
		}
	case *schema.ClientRequest_UpgradeConfig:
		if err := checkUpgradeRequest(op.UpgradeConfig); err != nil {
			return nil, fmt.Errorf("%w: client request %d: %w", ErrBadMsg, r.GetId(), err)
		}
	case nil:
		return nil, fmt.Errorf("%w: client request %d: no op", ErrBadMsg, r.GetId())
	default:
		return nil, fmt.Errorf("%w: client request %d: unknown op %T", ErrBadMsg, r.GetId(), op)
	}
	return marshalFrame("client request", r)
}

// DecodeClientRequest parses and validates a ClientRequest. A request
// whose op this build does not know (a newer client) decodes with a nil
// op rather than failing, so the server can answer StatusUnsupported
// instead of dropping the connection.
func DecodeClientRequest(b []byte) (*schema.ClientRequest, error) {
	r := new(schema.ClientRequest)
	if err := unmarshalFrame("client request", b, r); err != nil {
		return nil, err
	}
	var err error
	switch op := r.GetOp().(type) {
	case *schema.ClientRequest_Job:
		err = checkJobRequest(op.Job)
	case *schema.ClientRequest_UpgradeConfig:
		err = checkUpgradeRequest(op.UpgradeConfig)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: client request %d: %w", ErrBadFrame, r.GetId(), err)
	}
	return r, nil
}

// checkUpgradeRequest bounds an OP_upgradeConfig request: a blob of at
// most sm.MaxConfigSize and a SHA-256 of 0 or SHA256Size bytes. Empty
// fields travel: the primary answers them with the seed's "Invalid
// request: bytes or sha256 field missing" (§6.4 step 0b).
func checkUpgradeRequest(u *schema.UpgradeConfigRequest) error {
	switch {
	case u == nil:
		return errors.New("upgrade-config op with nil body")
	case len(u.GetBytes()) > sm.MaxConfigSize:
		return fmt.Errorf("config blob of %d bytes exceeds %d", len(u.GetBytes()), sm.MaxConfigSize)
	case len(u.GetSha256()) != 0 && len(u.GetSha256()) != SHA256Size:
		return fmt.Errorf("sha256 of %d bytes, want %d", len(u.GetSha256()), SHA256Size)
	}
	return nil
}

// checkUpgradeReply bounds an OP_upgradeConfig reply: error text within
// MaxErrorLen, no tag with an error, a standby count and a primary index
// that fit --peers.
func checkUpgradeReply(u *schema.UpgradeConfigReply) error {
	switch {
	case u == nil:
		return errors.New("upgrade-config reply body is nil")
	case u.GetError() != "" && u.GetVersionTag() != 0:
		return errors.New("upgrade-config reply with both a version tag and an error")
	case u.GetAckedCount() > MaxPriority:
		return fmt.Errorf("acked count %d out of range 0..%d", u.GetAckedCount(), MaxPriority)
	case u.GetPrimary() < -1 || u.GetPrimary() > MaxPriority:
		return fmt.Errorf("primary %d out of range -1..%d", u.GetPrimary(), MaxPriority)
	}
	return checkError(u.GetError())
}

// MaxJobHandles bounds an ack batch.
const MaxJobHandles = 1000

// checkJobRequest bounds what a job request may carry.
func checkJobRequest(j *schema.JobRequest) error {
	switch {
	case j == nil:
		return errors.New("job op with nil body")
	case j.GetKind() == schema.JobRequest_KIND_UNSPECIFIED || j.GetKind() > schema.JobRequest_LOST_AND_FOUND_DRAIN:
		return fmt.Errorf("job op kind %d unknown", j.GetKind())
	case len(j.GetPayload()) > sm.MaxJobPayload:
		return fmt.Errorf("job payload of %d bytes exceeds %d", len(j.GetPayload()), sm.MaxJobPayload)
	case len(j.GetPayloads()) > MaxJobHandles:
		return fmt.Errorf("%d payloads exceed %d", len(j.GetPayloads()), MaxJobHandles)
	case len(j.GetHandles()) > MaxJobHandles:
		return fmt.Errorf("%d handles exceed %d", len(j.GetHandles()), MaxJobHandles)
	case len(j.GetError()) > MaxErrorLen:
		return fmt.Errorf("error text of %d bytes exceeds %d", len(j.GetError()), MaxErrorLen)
	}
	for _, n := range []string{j.GetQueue(), j.GetHost(), j.GetName(), j.GetSpec()} {
		if len(n) > MaxNameLen {
			return fmt.Errorf("name of %d bytes exceeds %d", len(n), MaxNameLen)
		}
	}
	return nil
}

// NotPrimaryPrefix begins the error text of a standby's refusal of a
// primary-only request (seed 002 §10.12: "Not primary — redirect to
// primary"). Clients match the prefix, not the whole text, so that a
// node may add detail after it.
const NotPrimaryPrefix = "Not primary"

// Redirect reports whether rep is a standby's "not primary" refusal
// (StatusEAGAIN, error text starting with NotPrimaryPrefix: nothing was
// applied) and the index into --peers of the primary it names: the
// primary field of the JobReply or UpgradeConfigReply body, or -1 when
// the standby knows none or the body is missing. The index is not
// checked against the caller's --peers (the reply cannot know its
// length): callers must.
func Redirect(rep *schema.ClientReply) (primary int, ok bool) {
	if rep.GetStatus() != sm.StatusEAGAIN || !strings.HasPrefix(rep.GetError(), NotPrimaryPrefix) {
		return -1, false
	}
	switch body := rep.GetBody().(type) {
	case *schema.ClientReply_JobReply:
		if body.JobReply != nil {
			return int(body.JobReply.GetPrimary()), true
		}
	case *schema.ClientReply_UpgradeConfigReply:
		if body.UpgradeConfigReply != nil {
			return int(body.UpgradeConfigReply.GetPrimary()), true
		}
	}
	return -1, true
}

// EncodeClientReply returns the protobuf bytes of r.
func EncodeClientReply(r *schema.ClientReply) ([]byte, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: client reply: nil message", ErrBadMsg)
	}
	if s, ok := r.GetBody().(*schema.ClientReply_StatusReply); ok && s.StatusReply == nil {
		return nil, fmt.Errorf("%w: client reply %d: status body is nil", ErrBadMsg, r.GetId())
	}
	if err := checkClientReply(r); err != nil {
		return nil, fmt.Errorf("%w: client reply %d: %w", ErrBadMsg, r.GetId(), err)
	}
	return marshalFrame("client reply", r)
}

// DecodeClientReply parses and validates a ClientReply: the error text is
// at most MaxErrorLen bytes and empty when status is 0; a StatusReply body
// has names within MaxNameLen, a role within MaxRoleLen, a priority within
// MaxPriority and a primary index in -1..MaxPriority.
func DecodeClientReply(b []byte) (*schema.ClientReply, error) {
	r := new(schema.ClientReply)
	if err := unmarshalFrame("client reply", b, r); err != nil {
		return nil, err
	}
	if err := checkClientReply(r); err != nil {
		return nil, fmt.Errorf("%w: client reply %d: %w", ErrBadFrame, r.GetId(), err)
	}
	return r, nil
}

func checkClientReply(r *schema.ClientReply) error {
	if err := checkError(r.GetError()); err != nil {
		return err
	}
	if r.GetStatus() == StatusOK && r.GetError() != "" {
		return errors.New("error text with status 0")
	}
	switch body := r.GetBody().(type) {
	case nil:
	case *schema.ClientReply_StatusReply:
		return checkStatusReply(body.StatusReply)
	case *schema.ClientReply_JobReply:
		if body.JobReply == nil {
			return errors.New("job reply body is nil")
		}
	case *schema.ClientReply_ConfigReply:
		if body.ConfigReply == nil || len(body.ConfigReply.GetBlob()) > sm.MaxConfigSize {
			return errors.New("config reply body missing or over the size limit")
		}
	case *schema.ClientReply_UpgradeConfigReply:
		return checkUpgradeReply(body.UpgradeConfigReply)
	default:
		return fmt.Errorf("unknown reply body %T", body)
	}
	return nil
}

func checkStatusReply(s *schema.StatusReply) error {
	if err := checkName("name", s.GetName()); err != nil {
		return err
	}
	if err := checkName("primary_name", s.GetPrimaryName()); err != nil {
		return err
	}
	if n := len(s.GetRole()); n > MaxRoleLen {
		return fmt.Errorf("role is %d bytes, max %d", n, MaxRoleLen)
	}
	if p := s.GetPriority(); p > MaxPriority {
		return fmt.Errorf("priority %d out of range 0..%d", p, MaxPriority)
	}
	if p := s.GetPrimary(); p < -1 || p > MaxPriority {
		return fmt.Errorf("primary %d out of range -1..%d", p, MaxPriority)
	}
	return nil
}

func marshalFrame(what string, m proto.Message) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadMsg, what, err)
	}
	if len(b) > MaxFrameSize {
		return nil, fmt.Errorf("%w: %s encodes to %d bytes", ErrFrameTooBig, what, len(b))
	}
	return b, nil
}

func unmarshalFrame(what string, b []byte, m proto.Message) error {
	if len(b) > MaxFrameSize {
		return fmt.Errorf("%w: %s is %d bytes", ErrFrameTooBig, what, len(b))
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%w: %s: protobuf: %w", ErrBadFrame, what, err)
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

// WriteClientRequest writes req as one frame with a single Write call.
func WriteClientRequest(w io.Writer, req *schema.ClientRequest) error {
	b, err := EncodeClientRequest(req)
	if err != nil {
		return err
	}
	return writeRaw(w, "client request", b)
}

// ReadClientRequest reads and decodes one ClientRequest frame; errors as
// ReadFrame.
func ReadClientRequest(r io.Reader) (*schema.ClientRequest, error) {
	return ReadClientRequestAdmit(r, nil)
}

// ReadClientRequestAdmit is ReadClientRequest with admit (see Admit) asked
// before the body is allocated.
func ReadClientRequestAdmit(r io.Reader, admit Admit) (*schema.ClientRequest, error) {
	b, release, err := readRawAdmit(r, "client request", MaxFrameSize, admit)
	if err != nil {
		return nil, err
	}
	defer release()
	return DecodeClientRequest(b)
}

// WriteClientReply writes rep as one frame with a single Write call.
func WriteClientReply(w io.Writer, rep *schema.ClientReply) error {
	b, err := EncodeClientReply(rep)
	if err != nil {
		return err
	}
	return writeRaw(w, "client reply", b)
}

// ReadClientReply reads and decodes one ClientReply frame; errors as
// ReadFrame.
func ReadClientReply(r io.Reader) (*schema.ClientReply, error) {
	b, err := readRaw(r, "client reply", MaxFrameSize)
	if err != nil {
		return nil, err
	}
	return DecodeClientReply(b)
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
	body, release, err := readRawAdmit(r, what, limit, nil)
	if release != nil {
		release()
	}
	return body, err
}

// readRawAdmit is readRaw asking admit before the body is allocated; the
// caller releases once it is done with the body.
func readRawAdmit(r io.Reader, what string, limit uint32, admit Admit) ([]byte, func(), error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, io.EOF
		}
		return nil, nil, fmt.Errorf("wire: read %s header: %w", what, err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > limit {
		return nil, nil, fmt.Errorf("%w: %s length %d, max %d", ErrFrameTooBig, what, n, limit)
	}
	release := func() {}
	if admit != nil {
		var err error
		if release, err = admit(int(n)); err != nil {
			return nil, nil, fmt.Errorf("wire: %s of %d bytes: %w", what, n, err)
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		release()
		return nil, nil, fmt.Errorf("wire: read %s body (%d bytes): %w", what, n, err)
	}
	return body, release, nil
}
