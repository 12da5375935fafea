// Package wire is the frame codec between the state machine's messages
// (sm.Msg) and their protobuf form on a connection (schema.Envelope).
//
// A frame is a 4-byte big-endian length followed by that many bytes of one
// Envelope (schema/wire.proto). Decode is the one validating decode of a
// received frame: anything malformed is an error wrapping ErrBadFrame (or
// ErrFrameTooBig), never a panic. Encode refuses any Msg that Decode would
// refuse or could not reproduce exactly, so for every m that Encode accepts,
// Decode(Encode(m)) == m.
//
// ConfigTag mapping. Every Envelope carries the sender's view in
// PeerView.config_tag, and the config-replication bodies carry a
// version_tag of their own. sm.Msg has a single ConfigTag field (the
// sender's tag, except in ReplConfigReply and ReplConfigPush where it is the
// tag of the carried config), so for MsgReplConfig, MsgReplConfigReply,
// MsgReplConfigPush and MsgReplConfigPushReply Encode writes Msg.ConfigTag
// to the body's version_tag AND to PeerView.config_tag, and Decode reads
// ConfigTag from the body's version_tag only (PeerView.config_tag is then
// ignored, so a peer that sends its own tag there stays compatible). For
// every other type ConfigTag travels in PeerView.config_tag.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// MaxFrameSize bounds the encoded Envelope of one frame (the length prefix
// excluded): sm's one set of limits (the largest WAL record, config blob
// or claim reply plus room for the rest of the message).
const MaxFrameSize = sm.MaxFrameSize

// MaxPriority is the largest accepted Msg.Priority (an index into --peers).
const MaxPriority = 1 << 16

// MaxErrorLen bounds Msg.Error (bytes). With it and sm.MaxConfigSize every
// valid Msg encodes well within MaxFrameSize, so whatever Decode accepts,
// Encode accepts too.
const MaxErrorLen = 4096

// SHA256Size is the only non-zero length accepted for Msg.SHA256.
const SHA256Size = 32

// headerSize is the length prefix of a frame.
const headerSize = 4

// Sentinel errors; every error returned by this package wraps one of them
// (or, for ReadFrame, an I/O error of the reader).
var (
	// ErrBadFrame: received bytes are not a valid message.
	ErrBadFrame = errors.New("wire: bad frame")
	// ErrFrameTooBig: a frame's length exceeds MaxFrameSize.
	ErrFrameTooBig = errors.New("wire: frame exceeds MaxFrameSize")
	// ErrBadMsg: Encode was given a Msg the wire cannot carry faithfully.
	ErrBadMsg = errors.New("wire: message cannot be encoded")
)

// Encode returns the protobuf bytes of the Envelope for m. It fails with
// ErrBadMsg for an unknown type, out-of-range fields, fields that m's type
// does not carry (they would be lost) or invalid UTF-8 in Error, and with
// ErrFrameTooBig if the result would not fit in a frame.
func Encode(m sm.Msg) ([]byte, error) { return appendEnvelope(nil, m) }

// appendEnvelope is Encode appending to dst.
func appendEnvelope(dst []byte, m sm.Msg) ([]byte, error) {
	if err := checkMsg(m); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadMsg, m.Type, err)
	}
	env := &schema.Envelope{
		ReqId: m.ReqID,
		From: &schema.PeerView{
			Role:      schema.Role(m.Role),
			Term:      m.Term,
			Priority:  uint32(m.Priority),
			ConfigTag: m.ConfigTag,
			WalPos:    m.WALPos,
			LogTerm:   m.LogTerm,
			Round:     m.Round,
			PeersHash: m.PeersHash,
		},
	}
	switch m.Type {
	case sm.MsgProbe:
		env.Body = &schema.Envelope_Probe{Probe: &schema.Probe{}}
	case sm.MsgProbeReply:
		env.Body = &schema.Envelope_ProbeReply{ProbeReply: &schema.ProbeReply{}}
	case sm.MsgHeartbeat:
		env.Body = &schema.Envelope_Heartbeat{Heartbeat: &schema.Heartbeat{}}
	case sm.MsgJoin:
		env.Body = &schema.Envelope_Join{Join: &schema.Join{CatchUp: m.CatchUp}}
	case sm.MsgJoinReply:
		env.Body = &schema.Envelope_JoinReply{JoinReply: &schema.JoinReply{
			Status: m.Status,
			Error:  m.Error,
		}}
	case sm.MsgReplConfig:
		env.Body = &schema.Envelope_ReplConfig{ReplConfig: &schema.ReplConfigRequest{
			VersionTag: m.ConfigTag,
		}}
	case sm.MsgReplConfigReply:
		env.Body = &schema.Envelope_ReplConfigReply{ReplConfigReply: &schema.ReplConfigReply{
			UpToDate:   m.UpToDate,
			VersionTag: m.ConfigTag,
			Sha256:     m.SHA256,
			Bytes:      m.Bytes,
			Status:     m.Status,
			Error:      m.Error,
		}}
	case sm.MsgReplConfigPush:
		env.Body = &schema.Envelope_ReplConfigPush{ReplConfigPush: &schema.ReplConfigPushRequest{
			VersionTag: m.ConfigTag,
			Sha256:     m.SHA256,
			Bytes:      m.Bytes,
		}}
	case sm.MsgReplConfigPushReply:
		env.Body = &schema.Envelope_ReplConfigPushReply{ReplConfigPushReply: &schema.ReplConfigPushReply{
			Accepted:   m.Accepted,
			VersionTag: m.ConfigTag,
		}}
	case sm.MsgReplSnapshot:
		env.Body = &schema.Envelope_ReplSnapshot{ReplSnapshot: &schema.ReplSnapshot{Snapshot: m.Bytes, Offset: m.Offset, Total: m.Total, Lsn: m.PrevLSN, Term: m.PrevTerm}}
	case sm.MsgReplRecords:
		env.Body = &schema.Envelope_ReplRecords{ReplRecords: &schema.ReplRecords{Frames: m.Bytes, CatchUp: m.CatchUp, Diverged: m.Diverged, PrevLsn: m.PrevLSN, PrevTerm: m.PrevTerm}}
	case sm.MsgReplAck:
		env.Body = &schema.Envelope_ReplAck{ReplAck: &schema.ReplAck{Status: m.Status, Error: m.Error, SnapshotOffset: m.Offset}}
	case sm.MsgPreVote, sm.MsgVote:
		env.Body = &schema.Envelope_Vote{Vote: &schema.Vote{Pre: m.Type == sm.MsgPreVote, Transfer: m.Transfer}}
	case sm.MsgTimeoutNow:
		env.Body = &schema.Envelope_TimeoutNow{TimeoutNow: &schema.TimeoutNow{}}
	case sm.MsgPreVoteReply, sm.MsgVoteReply:
		env.Body = &schema.Envelope_VoteReply{VoteReply: &schema.VoteReply{Pre: m.Type == sm.MsgPreVoteReply, Granted: m.Accepted}}
	}
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, env)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadMsg, m.Type, err)
	}
	if n := len(b) - len(dst); n > MaxFrameSize {
		return nil, fmt.Errorf("%w: %s encodes to %d bytes", ErrFrameTooBig, m.Type, n)
	}
	return b, nil
}

// carried lists, per message type, which optional Msg fields its body
// carries (Type, ReqID and the sender view travel in every message).
type carried struct{ upToDate, accepted, status, sha, bytes, catchUp, diverged, prev, offset, total, transfer bool }

var bodyFields = map[sm.MsgType]carried{
	sm.MsgProbe:               {},
	sm.MsgProbeReply:          {},
	sm.MsgHeartbeat:           {},
	sm.MsgJoin:                {catchUp: true},
	sm.MsgJoinReply:           {status: true},
	sm.MsgReplConfig:          {},
	sm.MsgReplConfigReply:     {upToDate: true, status: true, sha: true, bytes: true},
	sm.MsgReplConfigPush:      {sha: true, bytes: true},
	sm.MsgReplConfigPushReply: {accepted: true},
	sm.MsgReplSnapshot:        {bytes: true, prev: true, offset: true, total: true},
	sm.MsgReplRecords:         {bytes: true, catchUp: true, diverged: true, prev: true},
	sm.MsgReplAck:             {status: true, offset: true},
	sm.MsgPreVote:             {},
	sm.MsgPreVoteReply:        {accepted: true},
	sm.MsgVote:                {transfer: true},
	sm.MsgVoteReply:           {accepted: true},
	sm.MsgTimeoutNow:          {},
}

// checkMsg reports why m cannot travel on the wire unchanged, or nil.
func checkMsg(m sm.Msg) error {
	c, ok := bodyFields[m.Type]
	if !ok {
		return fmt.Errorf("unknown message type %d", uint8(m.Type))
	}
	if err := checkView(m.Role, m.Priority); err != nil {
		return err
	}
	if err := checkPayload(m.Type, m.SHA256, m.Bytes); err != nil {
		return err
	}
	switch {
	case !c.upToDate && m.UpToDate:
		return errors.New("field UpToDate set but not carried by this type")
	case !c.accepted && m.Accepted:
		return errors.New("field Accepted set but not carried by this type")
	case !c.status && (m.Status != 0 || m.Error != ""):
		return errors.New("fields Status/Error set but not carried by this type")
	case !c.sha && m.SHA256 != nil:
		return errors.New("field SHA256 set but not carried by this type")
	case !c.bytes && m.Bytes != nil:
		return errors.New("field Bytes set but not carried by this type")
	case !c.catchUp && m.CatchUp:
		return errors.New("field CatchUp set but not carried by this type")
	case !c.diverged && m.Diverged:
		return errors.New("field Diverged set but not carried by this type")
	case !c.prev && (m.PrevLSN != 0 || m.PrevTerm != 0):
		return errors.New("fields PrevLSN/PrevTerm set but not carried by this type")
	case !c.offset && m.Offset != 0:
		return errors.New("field Offset set but not carried by this type")
	case !c.total && m.Total != 0:
		return errors.New("field Total set but not carried by this type")
	case !c.transfer && m.Transfer:
		return errors.New("field Transfer set but not carried by this type")
	}
	// An empty slice decodes as nil: refuse it so the round trip is exact.
	if m.SHA256 != nil && len(m.SHA256) == 0 {
		return errors.New("field SHA256 is empty but not nil")
	}
	if m.Bytes != nil && len(m.Bytes) == 0 {
		return errors.New("field Bytes is empty but not nil")
	}
	if !utf8.ValidString(m.Error) {
		return errors.New("field Error is not valid UTF-8")
	}
	return checkError(m.Error)
}

// checkError bounds the human error text shared by Encode and Decode.
func checkError(s string) error {
	if len(s) > MaxErrorLen {
		return fmt.Errorf("error text is %d bytes, max %d", len(s), MaxErrorLen)
	}
	return nil
}

// checkView validates the sender-view fields shared by Encode and Decode.
func checkView(r sm.Role, prio int) error {
	if r > sm.RoleStopped {
		return fmt.Errorf("role %d out of range", uint8(r))
	}
	if prio < 0 || prio > MaxPriority {
		return fmt.Errorf("priority %d out of range 0..%d", prio, MaxPriority)
	}
	return nil
}

// checkPayload validates the config payload fields shared by Encode and
// Decode.
func checkPayload(t sm.MsgType, sum, blob []byte) error {
	if n := len(sum); n != 0 && n != SHA256Size {
		return fmt.Errorf("sha256 is %d bytes, want 0 or %d", n, SHA256Size)
	}
	limit, what := sm.MaxConfigSize, "config bytes"
	if t == sm.MsgReplRecords || t == sm.MsgReplSnapshot {
		// One WAL frame travels alone when it is larger than a batch.
		limit, what = sm.MaxRecordSize+wal.HeaderSize, "replicated log bytes"
	}
	if n := len(blob); n > limit {
		return fmt.Errorf("%s %d exceed %d", what, n, limit)
	}
	return nil
}

// Decode parses and validates one Envelope. Errors wrap ErrBadFrame (what
// was wrong is in the text) or ErrFrameTooBig. Unknown protobuf fields are
// ignored (forward compatibility); empty SHA256/Bytes decode as nil.
func Decode(b []byte) (sm.Msg, error) {
	if len(b) > MaxFrameSize {
		return sm.Msg{}, fmt.Errorf("%w: %d bytes", ErrFrameTooBig, len(b))
	}
	var env schema.Envelope
	if err := proto.Unmarshal(b, &env); err != nil {
		return sm.Msg{}, fmt.Errorf("%w: protobuf: %w", ErrBadFrame, err)
	}
	from := env.GetFrom()
	if from == nil {
		return sm.Msg{}, fmt.Errorf("%w: missing sender view", ErrBadFrame)
	}
	role, prio := from.GetRole(), from.GetPriority()
	if role < 0 || role > schema.Role(sm.RoleStopped) {
		return sm.Msg{}, fmt.Errorf("%w: role %d out of range", ErrBadFrame, int32(role))
	}
	if prio > MaxPriority {
		return sm.Msg{}, fmt.Errorf("%w: priority %d out of range 0..%d", ErrBadFrame, prio, MaxPriority)
	}
	m := sm.Msg{
		ReqID:     env.GetReqId(),
		Role:      sm.Role(role),
		Term:      from.GetTerm(),
		Priority:  int(prio),
		WALPos:    from.GetWalPos(),
		LogTerm:   from.GetLogTerm(),
		Round:     from.GetRound(),
		PeersHash: from.GetPeersHash(),
		ConfigTag: from.GetConfigTag(),
	}
	switch body := env.GetBody().(type) {
	case *schema.Envelope_Probe:
		m.Type = sm.MsgProbe
	case *schema.Envelope_ProbeReply:
		m.Type = sm.MsgProbeReply
	case *schema.Envelope_Heartbeat:
		m.Type = sm.MsgHeartbeat
	case *schema.Envelope_Join:
		m.Type = sm.MsgJoin
		m.CatchUp = body.Join.GetCatchUp()
	case *schema.Envelope_JoinReply:
		m.Type = sm.MsgJoinReply
		m.Status = body.JoinReply.GetStatus()
		m.Error = body.JoinReply.GetError()
	case *schema.Envelope_ReplConfig:
		m.Type = sm.MsgReplConfig
		m.ConfigTag = body.ReplConfig.GetVersionTag()
	case *schema.Envelope_ReplConfigReply:
		r := body.ReplConfigReply
		m.Type = sm.MsgReplConfigReply
		m.UpToDate = r.GetUpToDate()
		m.ConfigTag = r.GetVersionTag()
		m.SHA256 = nonEmpty(r.GetSha256())
		m.Bytes = nonEmpty(r.GetBytes())
		m.Status = r.GetStatus()
		m.Error = r.GetError()
	case *schema.Envelope_ReplConfigPush:
		r := body.ReplConfigPush
		m.Type = sm.MsgReplConfigPush
		m.ConfigTag = r.GetVersionTag()
		m.SHA256 = nonEmpty(r.GetSha256())
		m.Bytes = nonEmpty(r.GetBytes())
	case *schema.Envelope_ReplConfigPushReply:
		m.Type = sm.MsgReplConfigPushReply
		m.Accepted = body.ReplConfigPushReply.GetAccepted()
		m.ConfigTag = body.ReplConfigPushReply.GetVersionTag()
	case *schema.Envelope_ReplSnapshot:
		m.Type = sm.MsgReplSnapshot
		m.Bytes = nonEmpty(body.ReplSnapshot.GetSnapshot())
		m.Offset, m.Total = body.ReplSnapshot.GetOffset(), body.ReplSnapshot.GetTotal()
		m.PrevLSN, m.PrevTerm = body.ReplSnapshot.GetLsn(), body.ReplSnapshot.GetTerm()
	case *schema.Envelope_ReplRecords:
		m.Type = sm.MsgReplRecords
		m.Bytes = nonEmpty(body.ReplRecords.GetFrames())
		m.CatchUp = body.ReplRecords.GetCatchUp()
		m.Diverged = body.ReplRecords.GetDiverged()
		m.PrevLSN = body.ReplRecords.GetPrevLsn()
		m.PrevTerm = body.ReplRecords.GetPrevTerm()
	case *schema.Envelope_ReplAck:
		m.Type = sm.MsgReplAck
		m.Status = body.ReplAck.GetStatus()
		m.Error = body.ReplAck.GetError()
		m.Offset = body.ReplAck.GetSnapshotOffset()
	case *schema.Envelope_Vote:
		m.Type = sm.MsgVote
		if body.Vote.GetPre() {
			m.Type = sm.MsgPreVote
			if body.Vote.GetTransfer() {
				return sm.Msg{}, fmt.Errorf("%w: a pre-vote marked as a transfer", ErrBadFrame)
			}
		}
		m.Transfer = body.Vote.GetTransfer()
	case *schema.Envelope_TimeoutNow:
		m.Type = sm.MsgTimeoutNow
	case *schema.Envelope_VoteReply:
		m.Type = sm.MsgVoteReply
		if body.VoteReply.GetPre() {
			m.Type = sm.MsgPreVoteReply
		}
		m.Accepted = body.VoteReply.GetGranted()
	case nil:
		return sm.Msg{}, fmt.Errorf("%w: missing message body", ErrBadFrame)
	default:
		return sm.Msg{}, fmt.Errorf("%w: unknown message body %T", ErrBadFrame, body)
	}
	if err := checkPayload(m.Type, m.SHA256, m.Bytes); err != nil {
		return sm.Msg{}, fmt.Errorf("%w: %s: %w", ErrBadFrame, m.Type, err)
	}
	if err := checkError(m.Error); err != nil {
		return sm.Msg{}, fmt.Errorf("%w: %s: %w", ErrBadFrame, m.Type, err)
	}
	return m, nil
}

func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// WriteFrame writes m as one frame (length prefix and Envelope) with a
// single Write call. The frame is encoded in a reused buffer: a primary
// inserting batches sends each record to every standby, and a new buffer
// for the envelope and another for the frame were a quarter of the bytes
// it allocated (docs/performance.md).
func WriteFrame(w io.Writer, m sm.Msg) error {
	bp := framePool.Get().(*[]byte)
	defer putFrame(bp)
	buf, err := appendEnvelope((*bp)[:headerSize], m)
	if err != nil {
		return err
	}
	*bp = buf
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-headerSize))
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("wire: write %s frame: %w", m.Type, err)
	}
	return nil
}

// framePool holds WriteFrame's buffers, each at most a frame's size (a
// pool is emptied by the collector, so idle buffers do not stay).
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const maxPooledFrame = headerSize + MaxFrameSize

func putFrame(bp *[]byte) {
	if cap(*bp) <= maxPooledFrame {
		framePool.Put(bp)
	}
}

// ReadFrame reads and decodes one frame. A reader at a frame boundary that
// is exhausted returns io.EOF itself (a clean close); a frame cut short
// returns an error wrapping io.ErrUnexpectedEOF; a length over MaxFrameSize
// returns ErrFrameTooBig before anything is allocated for the body; a
// malformed body returns an error wrapping ErrBadFrame.
func ReadFrame(r io.Reader) (sm.Msg, error) { return ReadFrameAdmit(r, nil) }

// Admit is asked, once a frame's header is read, whether n more bytes may
// be buffered for its body; it returns a release to call once the body is
// decoded, or an error (the read fails with it). A server uses it to bound
// the bytes all its connections buffer, and to start a body deadline.
type Admit func(n int) (release func(), err error)

// ReadFrameAdmit is ReadFrame with admit (nil: no bound) asked before the
// body is allocated.
func ReadFrameAdmit(r io.Reader, admit Admit) (sm.Msg, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return sm.Msg{}, io.EOF
		}
		return sm.Msg{}, fmt.Errorf("wire: read frame header: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrameSize {
		return sm.Msg{}, fmt.Errorf("%w: length %d", ErrFrameTooBig, n)
	}
	if admit != nil {
		release, err := admit(int(n))
		if err != nil {
			return sm.Msg{}, fmt.Errorf("wire: frame of %d bytes: %w", n, err)
		}
		defer release()
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return sm.Msg{}, fmt.Errorf("wire: read frame body (%d bytes): %w", n, err)
	}
	return Decode(body)
}
