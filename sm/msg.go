package sm

// MsgType names a controller-to-controller message.
type MsgType uint8

const (
	MsgProbe               MsgType = iota + 1 // candidate -> every peer: who is there?
	MsgProbeReply                             // answer: role, term, priority, tag
	MsgHeartbeat                              // primary -> every peer, every HeartbeatInterval
	MsgJoin                                   // standby -> primary (seed 002 §5.4)
	MsgJoinReply                              // Status 0 = joined
	MsgReplConfig                             // standby -> primary: ConfigTag = standby's tag (0 = none)
	MsgReplConfigReply                        // UpToDate, or ConfigTag + SHA256 + Bytes; Status != 0 on error
	MsgReplConfigPush                         // primary -> standby: ConfigTag + SHA256 + Bytes
	MsgReplConfigPushReply                    // Accepted + ConfigTag
	MsgReplSnapshot                           // primary -> standby: Bytes = a snapshot file; ReqID = sync epoch
	MsgReplRecords                            // primary -> standby: Bytes = WAL frames; ReqID = sync epoch
	MsgReplAck                                // standby -> primary: WALPos = its durable LSN; ReqID = sync epoch
	MsgPreVote                                // candidate -> peer: would you vote for me in Term+1? (quorum mode)
	MsgPreVoteReply                           // Accepted = yes
	MsgVote                                   // candidate -> peer: your vote of Term, please
	MsgVoteReply                              // Accepted = granted (sent only once durable)
	MsgTimeoutNow                             // primary -> its synced standby: stand for election now (switchover.go)
	msgTypeEnd
)

// Valid reports whether t is a known message type.
func (t MsgType) Valid() bool { return t >= MsgProbe && t < msgTypeEnd }

func (t MsgType) String() string {
	switch t {
	case MsgProbe:
		return "probe"
	case MsgProbeReply:
		return "probe-reply"
	case MsgHeartbeat:
		return "heartbeat"
	case MsgJoin:
		return "join"
	case MsgJoinReply:
		return "join-reply"
	case MsgReplConfig:
		return "repl-config"
	case MsgReplConfigReply:
		return "repl-config-reply"
	case MsgReplConfigPush:
		return "repl-config-push"
	case MsgReplConfigPushReply:
		return "repl-config-push-reply"
	case MsgReplSnapshot:
		return "repl-snapshot"
	case MsgReplRecords:
		return "repl-records"
	case MsgReplAck:
		return "repl-ack"
	case MsgPreVote:
		return "pre-vote"
	case MsgPreVoteReply:
		return "pre-vote-reply"
	case MsgVote:
		return "vote"
	case MsgVoteReply:
		return "vote-reply"
	case MsgTimeoutNow:
		return "timeout-now"
	default:
		return "msg?"
	}
}

// Msg is one controller-to-controller message. Every message carries the
// sender's view (Role, Term, Priority, ConfigTag, WALPos) so any message
// doubles as a heartbeat for term and step-down decisions. The sender's
// identity comes from the transport (its TLS certificate), not from Msg.
type Msg struct {
	Type     MsgType
	ReqID    uint64 // pairs a reply with its request
	Role     Role
	Term     uint64
	Priority int    // sender's index in --peers (0 = highest)
	WALPos   uint64 // sender's last durable job-log LSN
	LogTerm  uint64 // term of that log's last record: freshness is (LogTerm, WALPos)
	// Round numbers a primary's heartbeats, and every message a primary
	// sends carries its newest; a standby echoes the newest round it saw
	// from its primary (read-index confirmation).
	Round uint64
	// PeersHash is the sender's Options.PeersHash (its --peers list).
	PeersHash uint64
	// ConfigTag is the sender's config tag, except in ReplConfigReply and
	// ReplConfigPush where it is the tag of the carried config.
	ConfigTag uint64
	UpToDate  bool
	Accepted  bool
	// CatchUp: in a Join, the standby asks to catch up from its log
	// position (WALPos, LogTerm); in ReplRecords, the first message of such
	// a sync, whose frames follow the record at (PrevTerm, PrevLSN).
	CatchUp bool
	// Transfer, in a Vote: the candidate stands because its primary
	// handed the role over (switchover.go); a node that follows a live
	// primary grants it anyway (the log check stands).
	Transfer bool
	// Diverged, in a catch-up's first ReplRecords (no frames): the
	// standby's log diverges from the primary's; it truncates to at most
	// (PrevTerm, PrevLSN) and joins again (truncate.go).
	Diverged bool
	PrevLSN  uint64 // also a ReplSnapshot's position
	PrevTerm uint64
	// Offset and Total place a ReplSnapshot chunk in its file; in a
	// ReplAck, Offset is how much of the sync's snapshot is written.
	Offset uint64
	Total  uint64
	Status int32  // 0 ok; non-zero is an errno-style failure
	Error  string // human text for a non-zero Status
	SHA256 []byte // 32 bytes when Bytes is set
	Bytes  []byte // raw ClusterConfig blob
}

// MaxConfigSize is CONF_MAX_SIZE (seed 002 §10.7).
const MaxConfigSize = 1 << 20
