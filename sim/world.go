// Package sim is xce's deterministic simulator: virtual time, a simulated
// network and crashable disks execute the effects of real sm.Nodes, with
// faults drawn from one seed, and checkers assert the properties of
// DESIGN §5 after every step. `go test ./sim -seed=N -v` replays one
// schedule and prints its trace.
package sim

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/xce-hpc/xce/host/loop"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// epoch is the simulated wall clock at t=0 (2026-01-01T00:00:00Z).
const epoch = int64(1767225600) * int64(time.Second)

// Bounds the liveness checkers hold the cluster to.
const (
	bootBound     = 30 * time.Second // L1: converge after the liveness phase starts
	failoverBound = 5 * time.Second  // L2: one primary again after a primary crash
	settle        = 2 * time.Second  // convergence must hold this long
	startLimit    = 3                // systemd StartLimitBurst
	startWindow   = 60 * time.Second // systemd StartLimitIntervalSec
	eventBudget   = 1_000_000        // a schedule needs ~1,000; more is a message storm
)

type evKind uint8

const (
	evInput evKind = iota // deliver In to node (if still the same incarnation)
	evStart               // (re)start node
	evNetFault
	evPrimaryFault // a fault aimed at the current primary
	evLiveness
	evWallStep
	evIO          // a file operation or Compute completes (executes on the disk, then its result is delivered)
	evClientWake  // client node issues its next request
	evClientReq   // client request call arrives at node
	evClientReply // the reply to call arrives at its client
	evClientGiveUp
	evPause     // SIGSTOP node for dur
	evResume    // SIGCONT (trace only: held events are already queued for then)
	evPowerLoss // every node loses power at once
	evLinkFree  // a link's writer is free for its next queued message (link.go)
	evLinkReset // a connection reset (link.go)
)

type event struct {
	at   time.Duration
	seq  uint64
	kind evKind
	lgen uint32 // evInput of a shaped link: the connection it was sent on
	node int
	inc  int
	in   sm.Input
	nf   *NetFault
	ws   *WallStep
	op   *sm.FileOp    // evIO of a file operation
	comp *sm.Compute   // evIO of a Compute
	call uint64        // client events: the request id
	dur  time.Duration // evPause
	pf   *PrimaryFault
}

// evHeap is a binary min-heap of events by (at, seq). The heap orders
// small pointer-free keys; the events wait in slots (reused through a
// free list) until popped. Sifting a key moves 24 bytes with no write
// barrier, where sifting the event itself moved ~110 bytes of pointers
// (the heap's swaps were a tenth of the simulator's time, much of it in
// the garbage collector's write barriers).
type evHeap struct {
	keys  []evKey
	slots []event
	free  []int32
}

type evKey struct {
	at   time.Duration
	seq  uint64
	slot int32
}

func (a evKey) less(b evKey) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// len is the number of events queued.
func (h *evHeap) len() int { return len(h.keys) }

// next is the time of the earliest event; the heap must not be empty.
func (h *evHeap) next() time.Duration { return h.keys[0].at }

func (h *evHeap) push(e event) {
	var slot int32
	if n := len(h.free); n > 0 {
		slot = h.free[n-1]
		h.free = h.free[:n-1]
		h.slots[slot] = e
	} else {
		slot = int32(len(h.slots))
		h.slots = append(h.slots, e)
	}
	k := evKey{at: e.at, seq: e.seq, slot: slot}
	q := append(h.keys, k)
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !k.less(q[p]) {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = k
	h.keys = q
}

func (h *evHeap) pop() event {
	q := h.keys
	top := q[0]
	last := len(q) - 1
	k := q[last]
	q = q[:last]
	if last > 0 {
		i := 0
		for {
			l := 2*i + 1
			if l >= last {
				break
			}
			m := l
			if r := l + 1; r < last && q[r].less(q[l]) {
				m = r
			}
			if !q[m].less(k) {
				break
			}
			q[i] = q[m]
			i = m
		}
		q[i] = k
	}
	h.keys = q
	e := h.slots[top.slot]
	h.slots[top.slot] = event{}
	h.free = append(h.free, top.slot)
	return e
}

// simNode is one controller process and its disk.
type simNode struct {
	id        int
	node      *sm.Node
	disk      *simdisk.Disk
	snapAt    map[uint64][]byte // checkpoint bytes at issue, by op ID (io.go)
	up        bool
	inc       int // incarnation: events of a dead process are dropped
	starts    []time.Duration
	gaveUp    bool // systemd start limit hit
	opts      sm.Options
	chk       nodeCheck
	restart   bool      // a start event is queued
	lastClaim claimSeen // checkDurableClaim's last checked claim
	rot       rotState  // bit rot injected in data/ (rot.go)
	// checkSnapshotTerm: the terms of the records this incarnation appended.
	appended    map[uint64]uint64
	appendedInc int
	// appendedTerm is the term of the promotion appended belongs to.
	appendedTerm uint64
	// snapWritten: the data/snap files this promotion wrote (snapterm.go).
	snapWritten map[string]bool
	termFile    termParse  // the parse of its durable data/term (termclaim.go)
	timers      [16]uint64 // armed generation per timer kind (stale fires are dropped)
	// busy is when each lane's worker (loop.LaneOf) finishes the file
	// operations queued on it so far: each lane runs them strictly in
	// issue order, apart from the other.
	busy [loop.NumLanes]time.Duration
	// openBulk and openChange count, by incarnation and file, the bulk
	// reads and the operations that change a file (a write, an append, a
	// rename from or to it, a removal, a checkpoint's write) issued and
	// not yet completed (checkBulk).
	openBulk, openChange map[fileAt]int
	// pausedUntil: the process is stopped (SIGSTOP) until then; events
	// for it are held and delivered at that time, each source in its
	// original order, the sources in the pause's burst order (pause.go).
	pausedUntil time.Duration
	burst       *burstOrder
	// monoBase/monoOff: each incarnation's monotonic clock starts near 0
	// (monoOff) at its start time (monoBase), as CLOCK_MONOTONIC does
	// after a reboot; nothing may compare mono times across incarnations.
	monoBase, monoOff time.Duration
	host              loop.Host // simHost{w, this node}
}

// Report is what one schedule measured.
type Report struct {
	Scenario       Scenario
	Events         int
	SimTime        time.Duration
	BootTime       time.Duration // liveness start -> converged (L1)
	FailoverTime   time.Duration // primary killed -> one primary again (L2)
	RejoinTime     time.Duration // old primary restarted -> converged again
	RestartTime    time.Duration // every node restarted at the end -> a primary serving its recovered jobs
	DualPrimary    time.Duration // total time with two or more primaries
	NoConfigLeft   bool          // no disk held a valid config at liveness start
	FirstConverged time.Duration // first time the cluster converged (L1 shape), -1 if never
	ClientOps      int           // client requests sent
	Unknown        int           // ... whose outcome the client never learned
	Unanswered     int           // L6 candidates: requests to the serving primary in the liveness phase that it never answered
	Acked          int           // acknowledged writes the durability check holds the cluster to
	AckedLost      int           // ... found lost (seed mode, or excused by a disk wipe; otherwise S5)
	CatchUps       int           // standby syncs from the log (repl.catch-up)
	SnapshotSyncs  int           // standby syncs by snapshot install (repl.synced)
	Truncations    int           // divergent log suffixes cut (repl.truncated)
	Compactions    int           // standby checkpoints written (repl.compacted)
	BufferFulls    int           // snapshot syncs whose held records overflowed (repl.sync-buffer-full)
	Behinds        int           // standbys that asked to be caught up after waiting behind (repl.behind)
	// Switchovers by outcome (switchover.go): Switchovers[sm.SwitchoverOK]
	// completed; UpgradeHandovers, handovers a config upgrade began.
	Switchovers      [8]int
	UpgradeHandovers int
	TraceHash        uint64
}

// Failure is a violated property.
type Failure struct {
	Property string // S1..S7, L1..L3
	At       time.Duration
	Detail   string
	Seed     uint64
	Cmd      string // the reproduce command, when not the default
}

func (f *Failure) Error() string {
	cmd := f.Cmd
	if cmd == "" {
		cmd = fmt.Sprintf("go test ./sim -run 'TestSimulate$' -seed=%d -v", f.Seed)
	}
	return fmt.Sprintf("%s violated at t=%v: %s\nreproduce: %s", f.Property, f.At, f.Detail, cmd)
}

// World runs one scenario.
type World struct {
	walker   wal.Walker  // checkSnapshotTerm's reader of appends (one decoder)
	opSlab   []sm.FileOp // the file operations in flight, for their events (keepOp)
	sc       Scenario
	rng      *rand.Rand
	now      time.Duration
	seq      uint64
	q        evHeap
	net      *network
	nodes    []*simNode
	tr       *tracer
	fail     *Failure
	rep      Report
	liveness bool
	// cleanSyncs: every sync running began with every fault off (after the
	// liveness phase's failover), so a standby may never see a gap (L4) —
	// but for a standby still in a sync of the primary that failover
	// killed (l2Killed), which may have begun under the faults: it drains
	// what it had queued before it notices the kill.
	cleanSyncs bool
	l2Killed   int
	// served: from this time (the liveness phase's failover converged),
	// a request the primary took in its term is answered (L6).
	served time.Duration
	// bufferFulls: syncs whose records written during the snapshot's
	// encode overflowed the primary's bound (repl.sync-buffer-full), each
	// excusing one gap after its install.
	bufferFulls int
	config      []byte // the current cluster config blob
	old         []byte // an older config some nodes hold
	maxDrift    float64
	wallOff     []time.Duration // per-node wall offset, moved by wall steps
	s4          s4State
	faultsOff   bool // no crashes at effect boundaries (tests that want a clean run)
	wl          *workload
	final       []queue.Job     // the jobs recovered after the final restart of every node
	ec          electionCheck   // election safety, leader completeness
	hc          handleCheck     // handles and ids name one history (S8)
	rc          roundCheck      // heartbeat round echoes are genuine (S9)
	pc          provenanceCheck // a standby logs only its primary's records (S10)
	cc          chainCheck      // the canonical chain (chain.go)
	ans         answerCheck     // S4 judged on answers (answers.go)
	js          jobStateCheck   // recovery replay, S6 on live state (jobstate.go)
	sx          syncCheck       // acks and records judged by their sync (synccheck.go)
	bf          blindFaults     // message corruption, live conf/ rot, upgrades (corrupt.go)
	swc         switchovers     // admin switchovers and their checker (switchover.go)
}

// NewWorld builds the world for a scenario. trace receives trace lines
// when non-nil.
func NewWorld(sc Scenario, trace func(string)) *World {
	w := &World{sc: sc, rng: rand.New(rand.NewPCG(sc.Seed, 0x51a)), tr: newTracer(trace)}
	w.net = newNetwork(sc.Nodes, rand.New(rand.NewPCG(sc.Seed, 0xe7)))
	for from := 0; from < sc.Nodes; from++ {
		for to := 0; to < sc.Nodes; to++ {
			l := w.net.l(from, to)
			l.minDelay, l.maxDelay, l.loss, l.dup = sc.MinDelay, sc.MaxDelay, sc.Loss, sc.Dup
			l.faulty = sc.Loss > 0 || sc.Dup > 0
			if sc.LinkRate != nil && from != to {
				l.rate = sc.LinkRate[from*sc.Nodes+to]
				w.net.rated = true
			}
		}
	}
	w.net.resets = len(sc.Resets) > 0
	for _, d := range sc.Drift {
		w.maxDrift = max(w.maxDrift, d, -d)
	}
	w.wallOff = append([]time.Duration(nil), sc.WallOffset...)
	w.config = sampleConfig(sc.Seed, 7)
	w.old = sampleConfig(sc.Seed^0xdead, 3)
	peers := make([]string, sc.Nodes)
	for i := range peers {
		peers[i] = fmt.Sprintf("n%d", i)
	}
	for i := 0; i < sc.Nodes; i++ {
		o := sm.DefaultOptions(i, peers)
		o.StaleTimeout = sc.StaleTimeout
		o.SeedLiteralP0 = sc.SeedLiteralP0
		o.SeedMode = sc.SeedMode || sc.SeedLiteralP0            // the literal rule is the seed's election
		o.PeersHash = 0x5eed                                    // one --peers list: the check runs, and must never drop a message
		o.EnableUpgrade = sc.Upgrades > 0 || sc.Switchovers > 0 // the admin calls of corrupt.go and switchover.go
		if sc.SnapshotChunk > 0 {
			o.SnapshotChunk = sc.SnapshotChunk
		}
		if sc.MaxWALRecords > 0 {
			o.MaxWALRecords, o.RetainWALRecords = sc.MaxWALRecords, sc.RetainWALRecords
		}
		if sc.SyncBuffer > 0 {
			o.SyncBufferBytes = sc.SyncBuffer
		}
		d := simdisk.New()
		d.SetRand(rand.New(rand.NewPCG(sc.Seed, uint64(i)+100)))
		nd := &simNode{id: i, disk: d, opts: o}
		mtime := epoch + int64(sc.WallOffset[i]) - int64(sc.ConfigAge)
		var err error
		switch {
		case sc.ConfigOn[i]:
			err = provision(d, w.config, mtime)
		case sc.OldConfigOn[i]:
			err = provision(d, w.old, mtime)
		}
		if err != nil {
			w.violate("S7", "n%d: %v", i, err)
		}
		d.SetFaults(simdisk.Faults{WriteErr: sc.DiskWriteErr, NoSpace: sc.DiskNoSpace, FsyncErr: sc.DiskFsyncErr, ReadErr: sc.DiskReadErr,
			ShortWrite: sc.ShortWrite, FsyncGate: sc.FsyncGate, TornGarbage: sc.TornGarbage})
		nd.chk.reset(d)
		w.nodes = append(w.nodes, nd)
	}
	w.s4.init(sc.Nodes)
	w.wl = newWorkload(sc)
	return w
}

// sampleConfig builds a valid ClusterConfig blob (static and valid, so
// Encode cannot fail; an empty blob would show up as a missing config).
func sampleConfig(seed uint64, queues int) []byte {
	c := &schema.ClusterConfig{ConfigGeneration: 1, ClusterName: fmt.Sprintf("sim-%d", seed), Port: 7000}
	for q := 0; q < queues; q++ {
		c.Queues = append(c.Queues, sampleQueue(q))
	}
	c.Hosts = []*schema.Host{{Name: "h0"}, {Name: "h1"}}
	b, _ := schema.Encode(c)
	return b
}

// sampleQueue is queue q of sampleConfig; the workload uses q0 and q1.
func sampleQueue(q int) *schema.Queue {
	// The idempotency window is a week, the longest: keys are windowed
	// by the primary's clock, and the scenarios step a node's clock
	// forward by up to 48 hours, 3 times, which would end a 5-minute
	// window early (docs/client-api.md, "Idempotent submits").
	qu := &schema.Queue{Id: uint32(q + 1), Name: fmt.Sprintf("q%d", q), VisibilityTimeoutS: 30, MaxAttempts: 5, BackoffBaseS: 2, DeadLetterRetentionS: 86400,
		IdempotencyWindowS: schema.MaxIdempotencyWindowS}
	switch q {
	case 0: // the workload's main queue: dead jobs are kept forever, so every acknowledged job must stay visible
		qu.DeadLetterRetentionS = 0
	case 1: // short claims, few attempts, short retention: reclaims, dead-letter moves and purges within a run
		qu.VisibilityTimeoutS, qu.MaxAttempts, qu.BackoffBaseS, qu.DeadLetterRetentionS = 3, 2, 1, 5
	}
	return qu
}

// provision installs a config the way `xce-config install` would, durably;
// an error means the simulated disk refused a fresh, fault-free install.
func provision(d *simdisk.Disk, blob []byte, mtime int64) error {
	name := sm.VersionName(sha256Sum(blob))
	for _, op := range []sm.FileOp{
		{Op: sm.OpMkdir, Path: sm.ConfDir},
		{Op: sm.OpFsyncDir, Path: ""},
		{Op: sm.OpWrite, Path: "conf/" + name, Data: blob},
		{Op: sm.OpFsync, Path: "conf/" + name},
		{Op: sm.OpWrite, Path: sm.PointerPath, Data: sm.PointerContents(name)},
		{Op: sm.OpFsync, Path: sm.PointerPath},
		{Op: sm.OpFsyncDir, Path: sm.ConfDir},
	} {
		if r := d.Exec(op, mtime); r.Err != sm.IOOK {
			return fmt.Errorf("provision %s %s: %v %s", op.Op, op.Path, r.Err, r.Detail)
		}
	}
	return nil
}

func (w *World) push(e event) {
	w.seq++
	e.seq = w.seq
	w.q.push(e)
}

// majority is how many of the cluster's nodes make a majority: the
// checkers' own arithmetic, apart from the node's (sm/quorum).
func (w *World) majority() int { return len(w.nodes)/2 + 1 }

func (w *World) violate(prop, format string, args ...any) {
	if w.fail != nil {
		return
	}
	w.fail = &Failure{Property: prop, At: w.now, Detail: fmt.Sprintf(format, args...), Seed: w.sc.Seed}
	w.tr.line(w.now, -1, "VIOLATION "+prop+": "+w.fail.Detail)
	for _, nd := range w.nodes { // what each live node had in flight
		if nd.node == nil || !nd.up {
			continue
		}
		for _, p := range nd.node.PendingOps() {
			w.tr.line(w.now, nd.id, "pending "+p)
		}
	}
}

func (w *World) mono(i int) time.Duration {
	nd := w.nodes[i]
	return nd.monoOff + time.Duration(float64(w.now-nd.monoBase)*(1+w.sc.Drift[i]))
}

func (w *World) wall(i int) int64 { return epoch + int64(w.now) + int64(w.wallOff[i]) }

// Run executes the scenario: safety phase, liveness phase (L1), then a
// primary kill (L2) and its rejoin. It returns the report and the first
// violated property, if any.
func (w *World) Run() (Report, *Failure) {
	w.rep.Scenario = w.sc
	w.rep.FirstConverged = -1
	for i := range w.nodes {
		if w.sc.Order == BootOneMissing && i == int(w.sc.Seed%uint64(w.sc.Nodes)) {
			continue
		}
		w.push(event{at: w.sc.Start[i], kind: evStart, node: i})
		w.nodes[i].restart = true
	}
	for i := range w.sc.NetFaults {
		w.push(event{at: w.sc.NetFaults[i].At, kind: evNetFault, nf: &w.sc.NetFaults[i]})
	}
	for i := range w.sc.PrimaryFaults {
		w.push(event{at: w.sc.PrimaryFaults[i].At, kind: evPrimaryFault, pf: &w.sc.PrimaryFaults[i]})
	}
	for i := range w.sc.WallSteps {
		w.push(event{at: w.sc.WallSteps[i].At, kind: evWallStep, ws: &w.sc.WallSteps[i]})
	}
	for _, p := range w.sc.Pauses {
		w.push(event{at: p.At, kind: evPause, node: p.Node, dur: p.Dur})
	}
	if w.sc.PowerLossAt > 0 {
		w.push(event{at: w.sc.PowerLossAt, kind: evPowerLoss})
	}
	for _, r := range w.sc.Resets {
		w.push(event{at: r.At, kind: evLinkReset, node: r.From, call: uint64(r.To)})
	}
	w.startWorkload()
	w.push(event{at: w.sc.Safety, kind: evLiveness})
	w.runUntil(w.sc.Safety, nil)
	if w.fail == nil {
		w.livenessPhase()
	}
	if w.fail == nil {
		w.finalRestart()
	}
	w.wl.report(&w.rep)
	w.rep.SimTime = w.now
	w.rep.TraceHash = w.tr.hash
	w.s4.finish(w.now, &w.rep)
	return w.rep, w.fail
}

// runUntil processes events up to time end, or until done() holds.
func (w *World) runUntil(end time.Duration, done func() bool) bool {
	for w.q.len() > 0 && w.fail == nil {
		if w.q.next() > end {
			w.now = end
			return false
		}
		e := w.q.pop()
		w.now = e.at
		w.rep.Events++
		if w.rep.Events > eventBudget {
			w.violate("L1", "event storm: more than %d events (a message loop?)", eventBudget)
			return false
		}
		w.dispatch(e)
		w.checkGlobal()
		if w.rep.FirstConverged < 0 && w.primaryOf(-1) >= 0 {
			w.rep.FirstConverged = w.now
		}
		if done != nil && done() {
			return true
		}
	}
	return false
}

func (w *World) dispatch(e event) {
	switch e.kind {
	case evInput:
		nd := w.nodes[e.node]
		if tf, ok := e.in.(sm.TimerFired); ok && int(tf.Kind) < len(nd.timers) && nd.timers[tf.Kind] != tf.Gen {
			return // re-armed or cancelled since
		}
		if nd.up && nd.inc == e.inc && !w.stale(e) && !w.hold(e) {
			w.deliver(e.node, e.in)
		}
	case evIO:
		nd := w.nodes[e.node]
		if nd.up && nd.inc == e.inc && !w.hold(e) {
			if e.comp != nil {
				w.completeCompute(nd, *e.comp)
			} else {
				w.completeIO(nd, *e.op)
			}
		}
	case evClientReq:
		nd := w.nodes[e.node]
		if nd.up && nd.inc == e.inc && !w.hold(e) {
			w.deliverRequest(nd, e.call)
		}
	case evClientWake:
		w.clientWake(e.node)
	case evClientReply:
		w.clientReply(e.call)
	case evClientGiveUp:
		w.clientGiveUp(e.call)
	case evPause:
		w.pause(e.node, e.dur, false)
	case evResume:
		if nd := w.nodes[e.node]; nd.up && nd.inc == e.inc {
			w.tr.line(w.now, e.node, "SIGCONT")
		}
	case evPowerLoss:
		w.powerLossAll()
	case evLinkFree:
		w.linkFree(e.node, int(e.call))
	case evLinkReset:
		w.resetLink(LinkReset{At: e.at, From: e.node, To: int(e.call)})
	case evStart:
		w.start(e.node)
	case evNetFault:
		w.applyNetFault(*e.nf)
	case evPrimaryFault:
		w.strikePrimary(*e.pf)
	case evWallStep:
		if e.ws.Node >= 0 && e.ws.Node < len(w.wallOff) {
			w.wallOff[e.ws.Node] += e.ws.By
			w.tr.line(w.now, e.ws.Node, "wall clock stepped by "+e.ws.By.String())
		}
	case evLiveness:
		w.tr.line(w.now, -1, "liveness phase: faults off, every node started")
	}
}

func (w *World) applyNetFault(f NetFault) {
	if w.liveness {
		return
	}
	until := w.now + f.Dur
	w.tr.line(w.now, -1, fmt.Sprintf("netfault %s n%d n%d for %v", f.Kind, f.A, f.B, f.Dur))
	switch f.Kind {
	case PartIsolate:
		for j := 0; j < w.sc.Nodes; j++ {
			if j != f.A {
				w.net.block(f.A, j, until)
				w.net.block(j, f.A, until)
			}
		}
	case PartSymmetric:
		// {A, B} against the rest.
		for i := 0; i < w.sc.Nodes; i++ {
			for j := 0; j < w.sc.Nodes; j++ {
				in1, in2 := i == f.A || i == f.B, j == f.A || j == f.B
				if in1 != in2 {
					w.net.block(i, j, until)
				}
			}
		}
	case PartAsymmetric:
		if f.A != f.B {
			w.net.block(f.A, f.B, until)
		}
	case PartClog:
		if f.A != f.B {
			w.net.clog(f.A, f.B, until)
			w.net.clog(f.B, f.A, until)
		}
	}
}

// start boots a fresh process on the node's disk, as systemd would.
func (w *World) start(i int) {
	nd := w.nodes[i]
	nd.restart = false
	if nd.up || nd.rot.lost {
		return // a node lost to bit rot stays down (rot.go)
	}
	if !w.liveness {
		recent := 0
		for _, t := range nd.starts {
			if w.now-t < startWindow {
				recent++
			}
		}
		if recent >= startLimit {
			nd.gaveUp = true
			w.tr.line(w.now, i, "systemd: start limit hit, not restarting")
			return
		}
		if len(nd.starts) > 0 && w.sc.WipeOnRestart > 0 && w.rng.Float64() < w.sc.WipeOnRestart {
			nd.disk.Wipe()
			nd.chk.wiped()
			w.wl.led.wiped = true
			w.tr.line(w.now, i, "disk wiped")
		}
		if len(nd.starts) > 0 && w.sc.CorruptConf > 0 && w.rng.Float64() < w.sc.CorruptConf {
			if p := w.corruptConf(nd); p != "" {
				nd.chk.excuse()
				w.tr.line(w.now, i, "bit rot in "+p)
			}
		}
		if len(nd.starts) > 0 && w.sc.CorruptData > 0 && w.rng.Float64() < w.sc.CorruptData {
			w.corruptData(nd)
		}
	}
	nd.starts = append(nd.starts, w.now)
	w.durableChanged(nd)
	n, err := sm.NewNode(nd.opts)
	if err != nil {
		w.violate("S7", "node %d options rejected: %v", i, err)
		return
	}
	nd.node, nd.up = n, true
	nd.inc++
	for l := range nd.busy {
		nd.busy[l] = w.now
	}
	nd.pausedUntil = 0
	nd.snapAt = nil
	nd.monoBase, nd.monoOff = w.now, time.Duration(1+w.rng.IntN(1000))*time.Millisecond
	nd.chk.booting = true
	w.tr.line(w.now, i, "process start")
	w.deliver(i, sm.Boot{Seed: w.rng.Uint64()})
}

func (w *World) corruptConf(nd *simNode) string {
	var names []string
	for _, p := range nd.disk.Paths() {
		if len(p) > 5 && p[:5] == "conf/" {
			names = append(names, p)
		}
	}
	if len(names) == 0 {
		return ""
	}
	p := names[w.rng.IntN(len(names))]
	if nd.disk.Corrupt(p, w.rng) {
		return p
	}
	return ""
}

// kill is kill -9 (power: a machine crash too): the process vanishes; on
// a power loss the disk keeps only an allowed crash state. systemd restarts
// the process after RestartSec.
func (w *World) kill(i int, why string, power bool) {
	nd := w.nodes[i]
	if !nd.up {
		return
	}
	w.processGone(nd, power)
	nd.up = false
	nd.inc++
	if power {
		nd.disk.Crash(w.rng)
		why += ", power loss"
		if s := nd.disk.LastCrash(); s != "" {
			why += ": unsynced files " + s
		}
		w.durableChanged(nd)
	}
	w.tr.line(w.now, i, "kill -9 ("+why+")")
	nd.chk.crashed()
	w.scheduleRestart(i)
}

func (w *World) scheduleRestart(i int) {
	nd := w.nodes[i]
	if nd.restart {
		return
	}
	nd.restart = true
	w.push(event{at: w.now + w.sc.RestartDelay, kind: evStart, node: i})
}

// deliver steps node i with one input and executes its effects (package
// loop, through the node's simHost, as the daemon's runner does).
func (w *World) deliver(i int, in sm.Input) {
	nd := w.nodes[i]
	switch in.(type) {
	case sm.IODone, sm.Computed: // completeIO, completeCompute trace it with what it did
	default:
		w.tr.input(w.now, i, in)
	}
	clk := sm.Clock{Mono: w.mono(i), Wall: w.wall(i)}
	w.beforeStep(nd)
	if w.step(nd, clk, in) {
		w.checkNode(nd)
	}
}

// step runs one loop step; a panic in the node is an S7 violation.
func (w *World) step(nd *simNode, clk sm.Clock, in sm.Input) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			w.violate("S7", "node n%d panicked on %T: %v\n%s", nd.id, in, r, debug.Stack())
			ok = false
		}
	}()
	if nd.host == nil {
		nd.host = simHost{w, nd} // boxed once, not at every step
	}
	loop.Step(nd.node, clk, in, nd.host)
	return nd.up && w.fail == nil
}

// simHost is a simulated node's loop.Host: the simulated network, timers
// in simulated time, the node's lanes on its simulated disk, and
// the checkers, which see every effect.
type simHost struct {
	w  *World
	nd *simNode
}

func (h simHost) Stepped(in sm.Input, effs []sm.Effect) bool {
	// A promotion is recorded before its effects run: a node killed
	// among them was still primary of that term (SW1 and S4 need it).
	h.w.checkPromotion(h.nd)
	h.w.checkStep(h.nd, in, effs)
	h.w.checkSyncs(h.nd, in, effs)
	h.w.checkProvenance(h.nd, in, effs)
	h.w.checkSweepDue(h.nd, in)
	h.w.checkConfigIssued(h.nd, effs)
	h.w.strikeLogWork(h.nd, effs)
	return true
}

func (h simHost) Proceed(sm.Effect) bool {
	w, nd := h.w, h.nd
	if !nd.up || w.fail != nil {
		return false
	}
	if !w.liveness && !w.faultsOff && w.sc.CrashPerEffect > 0 && w.rng.Float64() < w.sc.CrashPerEffect {
		w.kill(nd.id, "at effect boundary", w.rng.IntN(3) == 0)
		return false
	}
	return true
}

func (h simHost) Send(x sm.Send) {
	w, nd := h.w, h.nd
	w.checkSend(nd, x)
	w.checkDurableClaim(nd, x)
	w.checkTermClaim(nd, x)
	if x.To < 0 || x.To >= w.sc.Nodes {
		w.violate("S7", "n%d sent to unknown peer %d", nd.id, x.To)
		return
	}
	w.sendMsg(nd.id, x.To, x.Msg)
}

func (h simHost) SetTimer(x sm.SetTimer) {
	w, nd := h.w, h.nd
	if int(x.Kind) < len(nd.timers) {
		nd.timers[x.Kind] = x.Gen
	}
	after := time.Duration(float64(x.After) / (1 + w.sc.Drift[nd.id]))
	w.push(event{at: w.now + after, kind: evInput, node: nd.id, inc: nd.inc, in: sm.TimerFired{Kind: x.Kind, Gen: x.Gen}})
}

func (h simHost) CancelTimer(x sm.CancelTimer) {
	if int(x.Kind) < len(h.nd.timers) {
		h.nd.timers[x.Kind] = 0
	}
}

func (h simHost) File(x sm.FileOp)     { h.w.issueIO(h.nd, x) }
func (h simHost) Compute(x sm.Compute) { h.w.issueCompute(h.nd, x) }

func (h simHost) Log(x sm.Log) {
	t := h.w.tr.begin(h.w.now, h.nd.id) // level, key and text, without a string of them
	t.buf = append(append(append(append(t.buf, x.Level.String()...), ' '), x.Key...), ": "...)
	t.buf = append(t.buf, x.Text...)
	t.end()
	h.w.checkLog(h.nd, x)
}

func (h simHost) Reply(x sm.Reply) {
	h.w.judgeReply(h.nd, x)
	h.w.judgeHeldWrite(h.nd, x)
	h.w.noteAckedWrite(h.nd, x)
	h.w.nodeReply(h.nd, x)
}

// UpgradeReply answers UpgradeConfig inputs, which only the upgrade tests
// send.
func (simHost) UpgradeReply(sm.UpgradeReply) {}

// SwitchoverReply answers a Switchover input (nemesis.go sends them).
func (h simHost) SwitchoverReply(x sm.SwitchoverReply) { h.w.noteSwitchover(h.nd, x) }

func (h simHost) Exit(x sm.Exit) {
	w, nd := h.w, h.nd
	w.tr.line(w.now, nd.id, fmt.Sprintf("exit %d: %s", x.Code, x.Reason))
	w.processGone(nd, false)
	nd.up = false
	nd.inc++
	nd.chk.crashed()
	w.scheduleRestart(nd.id)
}

func (h simHost) Unknown(e sm.Effect) { h.w.violate("S7", "n%d emitted unknown effect %T", h.nd.id, e) }
