// Package sm is xce's pure, clock-free controller state machine.
//
// A Node consumes Inputs (with the time they happened) and returns Effects,
// plain data executed in order by an executor: the real adapters in the
// daemon, or the simulator. Results of I/O come back as IODone inputs,
// of work on the state (Compute) as Computed ones.
// Nothing here reads a clock, touches the OS or starts a goroutine.
package sm

import "time"

// Clock is the time an input happened: Mono is a monotonic offset from an
// arbitrary origin (timers, deadlines), Wall is Unix nanoseconds (compared
// only with file mtimes, for config staleness, seed 002 §10.3).
type Clock struct {
	Mono time.Duration
	Wall int64
}

// Input is one thing that happened to a node.
type Input interface{ isInput() }

// Boot starts a node. Seed feeds the election jitter PRNG (xorshift64).
// With Install set the node does not join the cluster: it saves that
// config blob crash-safely into conf/ (the same save sequence a standby
// uses), trims, and exits 0 — `xce-config install` (seed 002 §10.1 remedy).
type Boot struct {
	Seed    uint64
	Install []byte
}

// TimerFired reports that the timer armed by SetTimer{Kind, Gen} expired.
// A fire whose Gen is no longer current is ignored (the timer was re-armed).
type TimerFired struct {
	Kind TimerKind
	Gen  uint64
}

// Recv is a message from peer From (an index into the peers list).
type Recv struct {
	From int
	Msg  Msg
}

// IODone completes the FileOp with the same ID.
type IODone struct {
	ID      uint64
	Err     IOErr
	Detail  string     // executor's error text, for logs
	Data    []byte     // OpRead: file contents
	ModTime int64      // OpRead: file mtime, Unix nanoseconds
	Entries []DirEntry // OpList: sorted by name
}

// Computed completes the Compute with the same ID.
type Computed struct {
	ID     uint64
	Err    IOErr  // IOOK; IOCorrupt: ComputeVerify's file does not verify; else why the work failed
	Detail string // executor's error text, for logs
	Data   []byte // ComputeEncode: the snapshot file's bytes
	// Loaded is ComputeImport's result: the job state built from the
	// snapshot (or why it is not one), for the node to take over.
	Loaded *LoadedSnapshot
}

func (Boot) isInput()       {}
func (TimerFired) isInput() {}
func (Recv) isInput()       {}
func (IODone) isInput()     {}
func (Computed) isInput()   {}

// DirEntry is one name in a listed directory.
type DirEntry struct {
	Name    string
	Size    int64
	ModTime int64
}

// IOErr classifies an I/O failure; the executor maps OS errors onto it.
type IOErr uint8

const (
	IOOK       IOErr = iota
	IONotExist       // ENOENT
	IOTooBig         // file larger than FileOp.MaxSize (checked before reading)
	IOFailed         // EIO or any other failure
	IONoSpace        // ENOSPC
	IOCorrupt        // ComputeVerify: the file is not the snapshot it should be
)

func (e IOErr) String() string {
	switch e {
	case IOOK:
		return "ok"
	case IONotExist:
		return "not exist"
	case IOTooBig:
		return "too big"
	case IONoSpace:
		return "no space"
	case IOCorrupt:
		return "does not verify"
	default:
		return "I/O error"
	}
}

// Effect is one thing the node asks its executor to do, in slice order.
type Effect interface{ isEffect() }

// Send delivers Msg to peer To. Delivery is best effort: the transport may
// drop it (connection loss); the node's timers cover that.
type Send struct {
	To  int
	Msg Msg
}

// SetTimer arms timer Kind to fire After from now, replacing an armed one.
type SetTimer struct {
	Kind  TimerKind
	Gen   uint64
	After time.Duration
}

// CancelTimer disarms timer Kind.
type CancelTimer struct{ Kind TimerKind }

// FileOp is one file-system call. Paths are relative to the node's base
// directory (${workdir}/${name}) and use '/'.
type FileOp struct {
	ID   uint64
	Op   OpKind
	Path string
	To   string // OpRename target
	Data []byte // OpWrite / OpAppend contents
	// MaxSize bounds OpRead: a larger file fails with IOTooBig before any
	// allocation (seed 002 §10.7).
	MaxSize int64
	// Bulk marks an OpRead of a file that no operation in flight writes
	// (a standby checkpoint's reads of its closed segments and of its
	// newest snapshot, hundreds of MB at 1M jobs): the executor runs it
	// on a lane of its own (host/loop.LaneBulk), apart from the other
	// file operations, so that the WAL's appends and fsyncs, and with
	// them the standby's acknowledgements, never wait behind it.
	Bulk bool
	// Background marks an OpRead that answers no request and that no
	// request waits for (a standby checkpoint's reads): the executor may
	// give it a lower
	// CPU priority (the daemon's --background-nice). It changes neither
	// its lane nor its outcome; a recovery's reads, which a promotion
	// waits for, never have it.
	Background bool
}

// Compute is work on the job state that takes time with the number of
// jobs, which the executor runs off the node's Step, on a lane of its own
// (host/loop), so that file operations (the WAL's fsyncs) never wait for
// it. Its completion is a Computed with the same ID. It carries what the
// work reads: a view of the state (which the node does not change under
// it), a file's bytes, or what they must be.
type Compute struct {
	ID   uint64
	Kind ComputeKind
	// Path is the file the work is about: the one ComputeEncodeTo
	// writes; the one ComputeVerify reads; the one Data was read from
	// (ComputeImport: for messages).
	Path string
	Data []byte // ComputeImport: a snapshot file's bytes
	// MaxSize bounds the file ComputeVerify reads: a larger one fails
	// with IOTooBig before anything is read (seed 002 §10.7).
	MaxSize int64
	// Snapshot is the state ComputeEncode and ComputeEncodeTo encode
	// (SnapshotData.Encode, EncodeTo), and ComputeBuild builds
	// (SnapshotData.Build).
	Snapshot *SnapshotData
	// Check is what ComputeVerify's file must be (SnapshotCheck).
	Check *SnapshotCheck
	// Load routes ComputeImport's jobs (SnapshotLoad.Import).
	Load *SnapshotLoad
}

// ComputeKind names the work of a Compute.
type ComputeKind uint8

const (
	// ComputeEncode: the completion's Data is Snapshot encoded (a
	// standby's sync).
	ComputeEncode ComputeKind = iota + 1
	// ComputeEncodeTo: Snapshot encoded into the file Path as it goes, as
	// an OpWrite would write it (without fsync), so that a checkpoint is
	// never held whole in memory.
	ComputeEncodeTo
	// ComputeImport: the completion's Loaded is the job state built from
	// Data with Load (recovery).
	ComputeImport
	// ComputeVerify: the file Path read and checked as the snapshot
	// Check describes, a window at a time where the executor can (a
	// received snapshot is hundreds of MB at a million jobs); bytes that
	// are not that snapshot complete with IOCorrupt and the reason, a
	// failed read with its class.
	ComputeVerify
	// ComputeBuild: the job state of a standby checkpoint's log built
	// (Snapshot, SnapshotData.Build), for the node to keep and encode;
	// the completion carries only whether it could be.
	ComputeBuild
)

func (k ComputeKind) String() string {
	switch k {
	case ComputeEncode:
		return "encode"
	case ComputeEncodeTo:
		return "encode-to"
	case ComputeImport:
		return "import"
	case ComputeVerify:
		return "verify"
	case ComputeBuild:
		return "build"
	default:
		return "compute?"
	}
}

// Log is a log line as data. Key is stable (tests and the simulator match
// on it); Text is the human message, in the seed's wording where it has one.
type Log struct {
	Level Level
	Key   string
	Text  string
}

// Exit ends the process: Code 0 for a requested restart, non-zero for FATAL.
type Exit struct {
	Code   int
	Reason string
}

func (Send) isEffect()        {}
func (SetTimer) isEffect()    {}
func (CancelTimer) isEffect() {}
func (FileOp) isEffect()      {}
func (Compute) isEffect()     {}
func (Log) isEffect()         {}
func (Exit) isEffect()        {}

// OpKind names a file operation. Write is open(O_WRONLY|O_CREAT|O_TRUNC,
// 0600) + write all + close, without fsync. Mkdir creates one directory with
// mode 0700 and succeeds if it exists (fixing its mode).
type OpKind uint8

const (
	OpRead OpKind = iota + 1
	OpWrite
	OpFsync
	OpRename
	OpFsyncDir
	OpList
	OpRemove
	OpMkdir
	OpAppend // open(O_WRONLY|O_APPEND|O_CREAT, 0600) + write all + close, no fsync
)

func (k OpKind) String() string {
	switch k {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpFsync:
		return "fsync"
	case OpRename:
		return "rename"
	case OpFsyncDir:
		return "fsyncdir"
	case OpList:
		return "list"
	case OpRemove:
		return "remove"
	case OpMkdir:
		return "mkdir"
	case OpAppend:
		return "append"
	default:
		return "op?"
	}
}

// TimerKind names one of a node's timers.
type TimerKind uint8

const (
	TimerElection    TimerKind = iota + 1 // election deadline
	TimerProbe                            // re-probe peers while a candidate
	TimerHeartbeat                        // primary: send heartbeats
	TimerFailure                          // standby: primary silent too long
	TimerFetch                            // standby: config fetch attempt timeout
	TimerMaintenance                      // primary: run due sweeps and schedule ticks
	TimerPush                             // primary: upgrade push window, then checkpoint wait
	TimerLongPoll                         // primary: the earliest long-poll claim's deadline
	TimerHandover                         // a switchover's deadline (switchover.go)
	TimerGroupCommit                      // primary: the end of a group commit's wait for its writers (groupcommit.go)
)

func (k TimerKind) String() string {
	switch k {
	case TimerElection:
		return "election"
	case TimerProbe:
		return "probe"
	case TimerHeartbeat:
		return "heartbeat"
	case TimerFailure:
		return "failure"
	case TimerFetch:
		return "fetch"
	case TimerMaintenance:
		return "maintenance"
	case TimerPush:
		return "push"
	case TimerLongPoll:
		return "long-poll"
	case TimerHandover:
		return "handover"
	case TimerGroupCommit:
		return "group-commit"
	default:
		return "timer?"
	}
}

// Level is a log severity.
type Level uint8

const (
	Debug Level = iota
	Info
	Warn
	Error
	Fatal
)

func (l Level) String() string {
	switch l {
	case Debug:
		return "DEBUG"
	case Info:
		return "INFO"
	case Warn:
		return "WARN"
	case Error:
		return "ERROR"
	default:
		return "FATAL"
	}
}

// Role is a node's HA role.
type Role uint8

const (
	RoleBooting   Role = iota // reading local state
	RoleCandidate             // probing, waiting for its election deadline
	RoleStandby               // following a primary
	RolePrimary
	RoleStopped // exited (FATAL or restart)
)

func (r Role) String() string {
	switch r {
	case RoleBooting:
		return "booting"
	case RoleCandidate:
		return "candidate"
	case RoleStandby:
		return "standby"
	case RolePrimary:
		return "primary"
	default:
		return "stopped"
	}
}
