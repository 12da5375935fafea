package sm

import (
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
)

// Node is one controller's state machine. It is not safe for concurrent
// use: one goroutine (or the simulator) owns it and calls Step. Node
// routes each input to the concern that handles it (Step, onMsg, onTimer)
// and makes the role changes; each concern is a type that owns its
// state and its methods and reaches the rest through env and the sibling
// concerns it names.
type Node struct {
	env                 // the context every concern reaches: options, clock, effects, I/O, timers
	el      election    // the election: role changes, term and vote, heartbeats (election.go, vote.go, hastate.go, commit.go)
	conf    configState // the config store and config replication (boot.go, confsave.go, replconf.go, upgrade.go)
	journal journal     // primary: the job log, its commit, replies, long polls, checkpoints (jobs.go, jobrecover.go, jobsnap.go, longpoll.go)
	joined  joinedPeers // primary: its standbys, their syncs and catch-up (catchup.go, repl.go)
	sb      standbyLog  // standby: the log replicated from the primary (repl.go, snapsync.go, truncate.go, compact.go)
	diskLog jobLog      // this node's job log on disk (logpos.go), reached as env.disk
	sw      switchover  // primary: a planned handover of its role (switchover.go)
}

// journal is the primary's job log: its state, nil until recovery
// starts, and the long polls' wake-up guard.
type journal struct {
	*env
	jobs   *jobState // primary: durable job state (nil until recovery starts)
	waking bool      // parked claims are being retried (longpoll.go)

	conf   *configState
	el     *election
	joined *joinedPeers
	sw     *switchover
}

// ioTable is the file operations in flight: each with its owner and what
// resumes when it completes (pending.go).
type ioTable struct {
	nextID  uint64               // FileOp ids and request ids
	pending map[uint64]pendingOp // in-flight FileOps and their owners
	gens    [concerns]uint64     // each concern's current generation
	cur     owner                // owner of the continuation running
	bulk    map[string]int       // bulk reads in flight, abandoned ones too, by path
	held    []FileOp             // changes issued while a bulk read of their file runs, oldest first (bulkfence.go)
}

// haState is the term and vote, in memory and as durable in data/term.
type haState struct {
	term      uint64 // current term: the highest seen (durable before any send reveals it)
	vote      int    // peer voted for in term, -1 if none
	durTerm   uint64 // data/term as durable
	durVote   int
	haWriting bool   // a data/term write is in flight
	held      []Send // sends waiting for data/term (hastate.go)
}

// election is the node's view of who is primary and its own candidacy.
// Each role's own state is present only in that role (setRole): a
// candidate's election, a primary's rounds, a standby's view of its
// primary.
type election struct {
	maxTerm    uint64           // highest term seen from any peer
	primary    int              // index of the primary we follow (or Self), -1 if none
	pTerm      uint64           // that primary's term
	failover   bool             // the current (or next) election follows a primary failure
	failedP    int              // the primary that failed (excluded from rank)
	views      map[int]peerView // what each peer last said about itself
	noCfgSince int64            // quorum mode: Mono+1 when a config-less candidate first waited

	cand *candidacy  // candidate only: its election (vote.go)
	lead *leadership // primary only: its heartbeat rounds, CheckQuorum and the read index (commit.go)
	fol  *following  // standby only: what it heard from its primary

	ha    haState   // the durable term and vote (hastate.go)
	steps stepClock // gaps in our own stepping (CheckQuorum)

	*env
	conf    *configState
	joined  *joinedPeers
	journal *journal
	sb      *standbyLog
	sw      *switchover
}

// candidacy is a candidate's current election.
type candidacy struct {
	ballot    ballot        // the current (pre-)vote round (vote.go)
	promoting bool          // the term write is in flight
	deadline  time.Duration // the election deadline, from its start
	deferrals int           // deadlines deferred to a fresher peer
	start     int64         // Mono when the election began
	// lost is the newest heartbeat round, and its term, we had from the
	// primary whose silence began this election (failover only): its
	// messages of that term sent no later than that round are older
	// than the silence we outlived, no sign that it lives.
	lost roundMark
}

// roundMark is a primary's heartbeat round in one of its terms.
type roundMark struct{ round, term uint64 }

// leadership is a primary's side of the heartbeats: when it last heard
// each standby (CheckQuorum), and the numbered rounds reads wait for
// (read index).
type leadership struct {
	peerHeard    map[int]int64  // quorum mode: when each standby last acknowledged us
	peerRound    map[int]uint64 // the newest round each standby echoed
	round        uint64         // heartbeat rounds sent
	roundPending bool           // a round is unconfirmed
	roundWanted  bool           // a read waits for a round after the pending one
}

// following is a standby's side of the heartbeats.
type following struct {
	heardAt       int64  // Mono of the last message from its primary
	lastRound     uint64 // newest round seen from its primary
	lastRoundTerm uint64 // the term lastRound's heartbeats were sent in
	lost          bool   // its primary is gone: follow any live primary
}

// stepClock is the Mono of the previous Step, and of the first Step after
// a gap of a failure timeout or more (a pause, or a long step of our
// own): CheckQuorum then gives the peers a full timeout to be heard again
// (issue 7 A2: never on a gap in our clock).
type stepClock struct {
	lastStep, resumed int64
}

// configState is the config this node runs with, its store in conf/ and
// its replication between primary and standbys.
type configState struct {
	cfg        *loaded        // the config this node runs with; nil = none
	cfgProblem string         // why the saved config is unusable (for the §10 FATALs)
	cfgMissing bool           // ... because there is none (§10.1), not a bad one
	peersBad   map[int]uint64 // peers whose --peers hash differs from ours (the hash they sent)
	stale      bool           // config_stale (§10.3)
	serving    bool           // Phase 2 reached: running with a config
	fetch      *fetchState
	store      storeQueue
	repairing  bool
	savedTags  []uint64 // tags whose save completed durably (checker view)
	upgrade    *upgradeState

	*env
	el      *election
	joined  *joinedPeers
	journal *journal
	sb      *standbyLog
	sw      *switchover
}

// jobLog is what the node knows of its job log on disk.
type jobLog struct {
	// scanned is recovery's hand-off from the boot scan (logpos.go): the
	// job log's files the boot scan read and fsync'd, by path, for the
	// first recovery to replay without reading them again. Dropped at any
	// change to data/wal or data/snap, on becoming a standby, and by
	// recovery.
	scanned    *scannedFiles
	logPos     logPos // freshness of this node's durable job log
	logUnknown bool   // the log is being replaced or rescanned: claim no position, grant no vote
	// logClean: the log on disk ends exactly at logPos (no torn tail, no
	// replaced log's segments): a standby may catch up from there. Not
	// while primary (recovery and checkpoints rewrite files) until a rescan
	// after the step-down (relearnLog) finds it so.
	logClean bool

	*env
	el *election
	sb *standbyLog
}

// joinedPeers is the primary's standbys.
type joinedPeers struct {
	standbys   map[int]bool   // joined standbys
	joinPos    map[int]logPos // positions standbys asked to catch up from
	ackedAlone uint64         // seed mode: writes acknowledged that no standby held

	*env
	el      *election
	journal *journal
	sb      *standbyLog
}

// standbyLog is a standby's replication of its primary's log.
type standbyLog struct {
	srepl        *standbyRepl // the log replicated from the primary
	installBusy  bool         // a snapshot install is writing files
	replWriting  int          // replicated appends in flight
	wantSnapshot bool         // its next sync compacts its log
	compact      *compaction  // a checkpoint of its own log in progress (compact.go)
	// sinceCkpt is what its log took since its last checkpoint began
	// (or its log was replaced), across syncs: a standby resynced often
	// (a lossy link) starts a sync, and a segment, at each, and counted
	// per sync it never reached a checkpoint, its log growing in small
	// segments a promotion then replays one by one.
	sinceCkpt   appendedSince
	ckptBase    *compactBase // the state the last checkpoint built, which its snapshot holds (compact.go)
	behind      behindMark   // since when its log stays behind its primary's (checkBehind)
	syncAsked   int64        // Mono of its last request for a log sync
	epochSeen   uint64       // newest sync epoch started with this primary
	missedSync  uint64       // newest sync epoch whose records came but whose start did not
	replFailure string       // why its last sync failed ("" once synced)

	*env
	conf *configState
	el   *election
}

// appendedSince is what a standby's log took since its last checkpoint:
// the records, and the segments it began (each sync begins one, and a
// promotion reads and fsyncs each: maxCkptSegments); unkept is the
// records since its kept state last moved (a checkpoint or an advance
// began: compact.go); installed, that its log is a snapshot installed
// since (its state is built by its first checkpoint, not an advance).
type appendedSince struct {
	records, segments, unkept int
	installed                 bool
}

// loaded is a verified config: its bytes hash to sum and name.
type loaded struct {
	bytes   []byte
	sum     [32]byte
	tag     uint64
	name    string
	gen     uint64
	modTime int64
}

const timerKinds = int(TimerGroupCommit) + 1

// NewNode builds a node; it does nothing until it receives Boot.
func NewNode(opt Options) (*Node, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	return newNode(opt), nil
}

// newNode wires the concerns to the context and to the siblings each
// names.
func newNode(opt Options) *Node {
	n := &Node{}
	n.env = env{opt: opt, ops: ioTable{pending: map[uint64]pendingOp{}, bulk: map[string]int{}}, disk: &n.diskLog, node: n}
	e := &n.env
	n.el = election{env: e, primary: -1, failedP: -1, ha: haState{vote: -1, durVote: -1}, conf: &n.conf, joined: &n.joined, journal: &n.journal, sb: &n.sb, sw: &n.sw}
	n.conf = configState{env: e, el: &n.el, joined: &n.joined, journal: &n.journal, sb: &n.sb, sw: &n.sw}
	n.journal = journal{env: e, conf: &n.conf, el: &n.el, joined: &n.joined, sw: &n.sw}
	n.sw = switchover{env: e, el: &n.el, conf: &n.conf, journal: &n.journal}
	n.joined = joinedPeers{env: e, el: &n.el, journal: &n.journal, sb: &n.sb}
	n.sb = standbyLog{env: e, conf: &n.conf, el: &n.el}
	n.diskLog = jobLog{env: e, el: &n.el, sb: &n.sb}
	return n
}

// resumeNow resumes a continuation at once, as a completion would.
func (n *Node) resumeNow(c cont, r result) { c.resume(n, r) }

// Step feeds one input and returns the effects to execute, in order.
func (n *Node) Step(now Clock, in Input) []Effect {
	n.out = nil
	if n.role == RoleStopped {
		return nil
	}
	n.now = now
	if m := int64(now.Mono); m-n.el.steps.lastStep >= int64(n.opt.FailureTimeout) {
		n.el.steps.resumed = m
	}
	n.el.steps.lastStep = int64(now.Mono)
	switch x := in.(type) {
	case Boot:
		n.boot(x)
	case TimerFired:
		if int(x.Kind) < timerKinds && n.timerGen[x.Kind] == x.Gen {
			n.timerGen[x.Kind]++ // a fired timer is spent
			n.onTimer(x.Kind)
		}
	case Recv:
		if x.From >= 0 && x.From < len(n.opt.Peers) && x.From != n.opt.Self {
			n.onMsg(x.From, x.Msg)
		} else {
			n.log(Warn, "msg.bad-sender", fmt.Sprintf("dropping %s from unknown peer index %d", x.Msg.Type, x.From))
		}
	case ClientOp:
		n.journal.onClientOp(x)
	case ClientGone:
		n.sw.drop(x.ID)
		n.journal.dropPoll(x.ID)
	case UpgradeConfig:
		n.conf.onUpgrade(x)
	case Switchover:
		n.sw.onSwitchover(x)
	case IODone:
		p, ok := n.ops.pending[x.ID]
		if !ok {
			n.log(Error, "io.unknown", fmt.Sprintf("completion for unknown file operation id %d", x.ID))
			break
		}
		delete(n.ops.pending, x.ID)
		if p.op.Bulk {
			n.bulkDone(p.op.Path)
		}
		n.complete(p, result{IODone: x})
	case Computed:
		p, ok := n.ops.pending[x.ID]
		if !ok {
			n.log(Error, "io.unknown", fmt.Sprintf("completion for unknown compute id %d", x.ID))
			break
		}
		delete(n.ops.pending, x.ID)
		n.complete(p, result{IODone: IODone{ID: x.ID, Err: x.Err, Detail: x.Detail, Data: x.Data}, loaded: x.Loaded})
	}
	out := n.out
	n.out = nil
	return out
}

// onMsg routes a peer's message. The config's peer list and the election
// see every message first; then the table hands it to the concern that
// owns its type.
func (n *Node) onMsg(from int, m Msg) {
	if !n.conf.peersMatch(from, m) {
		return // never vote for, follow or count a node with another cluster list
	}
	if n.role == RoleBooting {
		if m.Type == MsgProbe {
			n.el.send(from, Msg{Type: MsgProbeReply, ReqID: m.ReqID})
		}
		return
	}
	n.el.maxTerm = max(n.el.maxTerm, m.Term)
	n.el.noteView(from, m)
	switch m.Type {
	case MsgPreVote: // never changes a term
		n.el.onPreVote(from, m)
		return
	case MsgVote: // must not depose a live primary: its own term rules
		n.el.onVote(from, m)
		return
	}
	if !n.el.observe(from, m) {
		return
	}
	switch m.Type {
	case MsgProbe:
		n.el.send(from, Msg{Type: MsgProbeReply, ReqID: m.ReqID})
	case MsgPreVoteReply:
		n.el.onVoteReply(from, m, true)
	case MsgVoteReply:
		n.el.onVoteReply(from, m, false)
	case MsgProbeReply, MsgHeartbeat:
		if m.Type == MsgHeartbeat && n.el.heartbeatFromPrimary(from, m) {
			n.conf.checkPrimaryTag(m.ConfigTag)
			n.sb.ackRepl() // liveness and position, every heartbeat
			n.sb.checkBehind(m)
			n.sb.missedSyncStart()
		}
	case MsgJoin:
		n.joined.onJoin(from, m)
	case MsgJoinReply:
		n.conf.onJoinReply(from, m)
	case MsgReplConfig:
		n.conf.onReplConfig(from, m)
	case MsgReplConfigReply:
		n.conf.onReplConfigReply(from, m)
	case MsgReplConfigPush:
		n.conf.onPush(from, m)
	case MsgReplConfigPushReply:
		n.conf.onPushReply(from, m)
	case MsgReplSnapshot:
		n.sb.onReplSnapshot(from, m)
	case MsgReplRecords:
		n.sb.onReplRecords(from, m)
	case MsgReplAck:
		n.joined.onReplAck(from, m)
	case MsgTimeoutNow:
		n.el.onTimeoutNow(from, m)
	default:
		n.log(Warn, "msg.unknown", fmt.Sprintf("unknown message type %d from %s", m.Type, n.peerName(from)))
	}
}

// onTimer routes a timer that fired to the concern that set it. A
// data/term write that failed is retried first: messages wait for it.
func (n *Node) onTimer(k TimerKind) {
	n.el.syncHA()
	switch k {
	case TimerElection:
		n.el.onElectionTimer()
	case TimerProbe:
		n.el.onProbeTimer()
	case TimerHeartbeat:
		n.el.onHeartbeatTimer()
	case TimerFailure:
		n.el.onFailureTimer()
	case TimerFetch:
		n.conf.onFetchTimeout()
	case TimerMaintenance:
		n.journal.maintain()
	case TimerPush:
		n.conf.onPushTimer()
	case TimerLongPoll:
		n.journal.expirePolls()
	case TimerHandover:
		n.sw.onTimer()
	case TimerGroupCommit:
		n.journal.groupWaitOver()
	}
}

// --- accessors (the daemon's status and the simulator's checkers) ---

// Role is the node's current HA role.
func (n *Node) Role() Role { return n.role }

// Term is the node's current term.
func (n *Node) Term() uint64 { return n.el.ha.term }

// QuorumMode reports whether the node runs in quorum mode.
func (n *Node) QuorumMode() bool { return n.quorumMode() }

// ViewTerm is the term the node acts in: its own as primary, else the
// highest term it knows (its primary's).
func (n *Node) ViewTerm() uint64 { return n.el.viewTerm() }

// Primary is the index of the primary this node follows (Self when
// primary), or -1.
func (n *Node) Primary() int { return n.el.primary }

// Serving reports whether the node runs with a config (Phase 2 reached).
func (n *Node) Serving() bool { return n.conf.serving }

// Ready reports that the node does its job: a serving standby, or a
// primary that has also recovered its job state (systemd READY=1).
func (n *Node) Ready() bool {
	return n.conf.serving && (n.role == RoleStandby || n.role == RolePrimary && n.journal.jobs != nil && n.journal.jobs.recovered)
}

// HandingOver reports that a switchover holds this node's writes.
func (n *Node) HandingOver() bool { return n.sw.frozen() }

// Stale reports the config_stale flag.
func (n *Node) Stale() bool { return n.conf.stale }

// ConfigTag is the tag of the running config, 0 if none.
func (n *Node) ConfigTag() uint64 { return n.conf.runningTag() }

// runningTag is the tag of the config this node runs with, 0 if none.
func (cs *configState) runningTag() uint64 {
	if cs.cfg == nil {
		return 0
	}
	return cs.cfg.tag
}

// Config returns the running config's bytes and versioned file name.
func (n *Node) Config() ([]byte, string, bool) {
	if n.conf.cfg == nil {
		return nil, "", false
	}
	return n.conf.cfg.bytes, n.conf.cfg.name, true
}

// ConfigGeneration is the running config's generation (0 if none).
func (n *Node) ConfigGeneration() uint64 {
	if n.conf.cfg == nil {
		return 0
	}
	return n.conf.cfg.gen
}

// SavedTags lists the tags whose config save completed durably, in order.
func (n *Node) SavedTags() []uint64 { return n.conf.savedTags }

// StoreBusy reports whether a config save or trim is in progress.
func (n *Node) StoreBusy() bool { return n.conf.store.busy }

// FatalReason is why the node stopped, "" while running.
func (n *Node) FatalReason() string { return n.fatal }

// Options returns the node's options.
func (n *Node) Options() Options { return n.opt }

func (ot *ioTable) id() uint64 { ot.nextID++; return ot.nextID }

// die logs FATAL and exits non-zero.
func (n *Node) die(key, text string) {
	if n.role == RoleStopped {
		return
	}
	n.log(Fatal, key, text)
	n.emit(Exit{Code: 1, Reason: text})
	n.fatal = text
	n.el.setRole(RoleStopped)
	n.conf.serving = false
}

// verify checks blob against the versioned name it was stored under and
// decodes it; the returned problem is the seed's §10 wording.
// cfgDecoded is the running config, decoded (it was validated on load).
func (cs *configState) cfgDecoded() *schema.ClusterConfig {
	if cs.cfg == nil {
		return &schema.ClusterConfig{}
	}
	c, err := schema.DecodeClusterConfig(cs.cfg.bytes)
	if err != nil {
		return &schema.ClusterConfig{}
	}
	return c
}

// JobState exposes the job queues for checkers (nil until recovered).
func (n *Node) JobState() (*queue.Queues, uint64, bool) {
	if n.journal.jobs == nil {
		return nil, 0, false
	}
	return n.journal.jobs.q, n.journal.jobs.durableLSN, n.journal.jobs.recovered
}

// RecoveredLSN is the LSN this primary's last recovery ended at.
func (n *Node) RecoveredLSN() uint64 {
	if n.journal.jobs == nil {
		return 0
	}
	return n.journal.jobs.recoveredLSN
}

// LostAndFoundCount is lost_and_found_job_count (seed 002 §6.5): the
// jobs the last recovery routed to lost_and_found, 0 again after a
// lost-and-found drain.
func (n *Node) LostAndFoundCount() int {
	if n.journal.jobs == nil {
		return 0
	}
	return n.journal.jobs.r.routed
}

// verifyBlob checks a config blob; name is its versioned file name in
// conf/, or "" for a blob with no such name (one to install, a file
// outside conf/), which the refusal then calls "The config blob".
func verifyBlob(name string, blob []byte, modTime int64) (*loaded, string) {
	what := fmt.Sprintf("Config file '%s'", name)
	if name == "" {
		what = "The config blob"
	}
	if len(blob) == 0 {
		return nil, what + " is empty — not a valid ClusterConfig blob"
	}
	if len(blob) > MaxConfigSize {
		return nil, fmt.Sprintf("%s exceeds CONF_MAX_SIZE (%d bytes)", what, MaxConfigSize)
	}
	sum := sha256.Sum256(blob)
	if name != "" && !NameMatches(name, sum) {
		return nil, fmt.Sprintf("%s does not match its SHA-256 (%s) — corrupted", what, VersionName(sum))
	}
	gen, err := decodeGeneration(blob)
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", what, err)
	}
	return &loaded{bytes: blob, sum: sum, tag: Tag(sum), name: VersionName(sum), gen: gen, modTime: modTime}, ""
}

// NextLSN is the LSN the next record this primary logs gets (0 while it
// has no job state): a checker that delivers a request knows the record
// it will be logged at.
func (n *Node) NextLSN() uint64 {
	if n.journal.jobs == nil {
		return 0
	}
	return n.journal.jobs.nextLSN
}

// LogPosition is the freshness of the node's durable job log: the term of
// its last record, then its LSN.
func (n *Node) LogPosition() (term, lsn uint64) { return n.disk.logPos.term, n.disk.logPos.lsn }
