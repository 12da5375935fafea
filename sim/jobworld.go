package sim

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"xce/schema"
	"xce/sim/simdisk"
	"xce/sm"
	"xce/sm/queue"
	"xce/sm/wal"
)

// JobScenario is one schedule of the durable-job-state simulation: a
// single controller under a random client workload, crashed at effect
// boundaries (kill -9 or power loss) with disk faults, checked for S5
// (prefix durability), S6 (queue contract) and S7, and its client history
// for linearizability (porcupine).
type JobScenario struct {
	Seed           uint64
	Duration       time.Duration
	Clients        int
	CrashPerEffect float64
	PowerLoss      float64 // share of crashes that also lose unsynced data
	DiskWriteErr   float64
	DiskFsyncErr   float64
	MaxWALRecords  int
	// DropQueue removes queue q1 from the config at a restart: its jobs
	// must be routed to lost_and_found by recovery (seed 002 §6.5).
	DropQueue bool
}

// GenerateJobs draws a job scenario from a seed.
func GenerateJobs(seed uint64) JobScenario {
	r := rand.New(rand.NewPCG(seed, 0x10b5))
	s := JobScenario{Seed: seed, Duration: time.Duration(30+r.IntN(120)) * time.Second, Clients: 1 + r.IntN(4),
		MaxWALRecords: 100 + r.IntN(200), PowerLoss: r.Float64()}
	if r.IntN(4) > 0 {
		s.CrashPerEffect = r.Float64() * 0.01
	}
	if r.IntN(4) == 0 {
		s.DiskWriteErr = r.Float64() * 0.01
		s.DiskFsyncErr = r.Float64() * 0.002
	}
	s.DropQueue = r.IntN(5) == 0
	return s
}

func jobConfig(dropQ1 bool) *schema.ClusterConfig {
	c := &schema.ClusterConfig{ConfigGeneration: 1, ClusterName: "jobs", Port: 7000,
		Queues: []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 5, MaxAttempts: 3, BackoffBaseS: 1, DeadLetterRetentionS: 30}},
		Hosts:  []*schema.Host{{Name: "h0"}, {Name: "h1"}}}
	if !dropQ1 {
		c.Queues = append(c.Queues, &schema.Queue{Id: 2, Name: "q1", VisibilityTimeoutS: 10, MaxAttempts: 2, BackoffBaseS: 2, DeadLetterRetentionS: 0, Priority: 1})
	}
	return c
}

// clientCall is one operation of the client history.
type clientCall struct {
	client  int
	req     sm.JobRequest
	now     int64  // the second the node applied (or would apply) it at
	term    uint64 // ... in this term (the node's when it was delivered)
	lsn     uint64 // ... as the record at this LSN (the one node logs it at once)
	call    time.Duration
	ret     time.Duration // -1: outcome unknown (the node crashed)
	reply   sm.Reply
	refused bool // EAGAIN/EINVAL: certainly not applied
}

// JobWorld runs a JobScenario.
type JobWorld struct {
	sc      JobScenario
	rng     *rand.Rand
	now     time.Duration
	seq     uint64
	q       evHeap
	disk    *simdisk.Disk
	node    *sm.Node
	up      bool
	inc     int
	timers  [16]uint64
	cfg     *schema.ClusterConfig
	fail    *Failure
	tr      *tracer
	issued  []*schema.WalRecord // by LSN-1, as appended
	acked   uint64              // highest LSN a client was told is done
	wasRec  bool
	stamps  map[uint64]queue.Stamps
	calls   []*clientCall
	pending map[uint64]*clientCall // request id -> call in flight
	nextReq uint64
	handles [][]queue.Handle // per client: handles from its claims
	maxID   uint64
	ids     []uint64 // the newest job ids seen in replies
	Events  int
	Routed  int           // jobs routed to lost_and_found by recoveries
	reconf  time.Duration // when queue q1 was removed (0: never)
	// unsynced: a WAL append executed and its fsync not yet: crashes are
	// ten times likelier then (the window where durability bugs show).
	unsynced bool
	ioBusy   time.Duration // when the I/O worker is free
}

// NewJobWorld builds the world; trace receives trace lines when non-nil.
func NewJobWorld(sc JobScenario, trace func(string)) *JobWorld {
	w := &JobWorld{sc: sc, rng: rand.New(rand.NewPCG(sc.Seed, 0x70b)), disk: simdisk.New(), tr: newTracer(trace),
		stamps: map[uint64]queue.Stamps{}, pending: map[uint64]*clientCall{}, handles: make([][]queue.Handle, sc.Clients)}
	w.disk.SetRand(rand.New(rand.NewPCG(sc.Seed, 0xd15c)))
	w.cfg = jobConfig(false)
	blob, _ := schema.Encode(w.cfg) // static and valid
	if err := provision(w.disk, blob, epoch); err != nil {
		w.violate("S7", "%v", err)
	}
	w.disk.SetFaults(simdisk.Faults{WriteErr: sc.DiskWriteErr, FsyncErr: sc.DiskFsyncErr})
	return w
}

func (w *JobWorld) push(e event) {
	w.seq++
	e.seq = w.seq
	w.q.push(e)
}

func (w *JobWorld) violate(prop, format string, args ...any) {
	if w.fail == nil {
		w.fail = &Failure{Property: prop, At: w.now, Detail: fmt.Sprintf(format, args...), Seed: w.sc.Seed}
		w.fail.Cmd = fmt.Sprintf("go test ./sim -run 'TestJobs$' -jobseed=%d -v", w.sc.Seed)
		w.tr.line(w.now, -1, "VIOLATION "+prop+": "+w.fail.Detail)
	}
}

func (w *JobWorld) wall() int64 { return epoch + int64(w.now) }

// Run executes the schedule and checks the client history at the end.
func (w *JobWorld) Run() *Failure {
	w.push(event{kind: evStart})
	for c := 0; c < w.sc.Clients; c++ {
		w.push(event{at: time.Duration(w.rng.IntN(1000)) * time.Millisecond, kind: evNetFault, node: c}) // client wake-up
	}
	for len(w.q) > 0 && w.fail == nil {
		e := w.q.pop()
		if e.at > w.sc.Duration {
			break
		}
		w.now = e.at
		w.Events++
		if w.Events > eventBudget {
			w.violate("L1", "event storm in the job world")
			break
		}
		switch e.kind {
		case evStart:
			w.start()
		case evNetFault:
			w.clientStep(e.node)
		case evIO:
			if w.up && w.inc == e.inc {
				w.completeIO(*e.op)
			}
		case evInput:
			if tf, ok := e.in.(sm.TimerFired); ok && int(tf.Kind) < len(w.timers) && w.timers[tf.Kind] != tf.Gen {
				continue
			}
			if w.up && w.inc == e.inc {
				w.deliver(e.in)
			}
		}
	}
	if w.fail == nil {
		w.checkLinearizable()
	}
	return w.fail
}

func (w *JobWorld) start() {
	if w.up {
		return
	}
	if w.sc.DropQueue && w.inc > 0 && len(w.cfg.GetQueues()) > 1 {
		w.reconfigure(jobConfig(true))
	}
	opt := sm.DefaultOptions(0, []string{"n0"})
	opt.MaxWALRecords = w.sc.MaxWALRecords
	opt.MaintenanceInterval = 0 // the clients sweep and tick: every change is in the history porcupine checks
	n, err := sm.NewNode(opt)
	if err != nil {
		w.violate("S7", "options rejected: %v", err)
		return
	}
	w.node, w.up, w.wasRec, w.unsynced = n, true, false, false
	w.inc++
	w.tr.line(w.now, 0, "process start")
	w.deliver(sm.Boot{Seed: w.rng.Uint64()})
}

// reconfigure installs a new config the way `xce-config install` does.
func (w *JobWorld) reconfigure(c *schema.ClusterConfig) {
	blob, _ := schema.Encode(c) // static and valid
	w.disk.SetFaults(simdisk.Faults{})
	if err := provision(w.disk, blob, w.wall()); err != nil {
		w.violate("S7", "reconfigure: %v", err)
	}
	w.disk.SetFaults(simdisk.Faults{WriteErr: w.sc.DiskWriteErr, FsyncErr: w.sc.DiskFsyncErr})
	w.cfg = c
	w.reconf = w.now
	w.tr.line(w.now, -1, "config changed: queue q1 removed")
}

func (w *JobWorld) crash(why string) {
	w.up = false
	w.inc++
	power := w.rng.Float64() < w.sc.PowerLoss
	if power {
		w.disk.Crash(w.rng)
		why += ", power loss"
	}
	w.tr.line(w.now, 0, "kill -9 ("+why+")")
	for id, c := range w.pending {
		c.ret = -1 // outcome unknown
		delete(w.pending, id)
	}
	w.push(event{at: w.now + time.Second, kind: evStart})
}

func (w *JobWorld) deliver(in sm.Input) {
	w.tr.input(w.now, 0, in)
	var effs []sm.Effect
	func() {
		defer func() {
			if r := recover(); r != nil {
				w.violate("S7", "node panicked on %T: %v", in, r)
			}
		}()
		effs = w.node.Step(sm.Clock{Mono: w.now, Wall: w.wall()}, in)
	}()
	if w.fail != nil {
		return
	}
	if d, ok := in.(sm.IODone); ok && d.Err != sm.IOOK && d.Err != sm.IONotExist && !reportsError(effs) {
		w.violate("S7", "I/O error %s (%s) swallowed", d.Err, d.Detail)
	}
	for _, e := range effs {
		if !w.up || w.fail != nil {
			return
		}
		p := w.sc.CrashPerEffect
		if w.unsynced {
			p *= 10
		}
		if p > 0 && w.rng.Float64() < p {
			w.crash("at effect boundary")
			return
		}
		w.execute(e)
	}
	w.checkState()
}

func reportsError(effs []sm.Effect) bool {
	for _, e := range effs {
		switch x := e.(type) {
		case sm.Log:
			if x.Level >= sm.Warn {
				return true
			}
		case sm.Exit:
			return true
		}
	}
	return false
}

func (w *JobWorld) execute(e sm.Effect) {
	switch x := e.(type) {
	case sm.SetTimer:
		w.timers[x.Kind] = x.Gen
		w.push(event{at: w.now + x.After, kind: evInput, inc: w.inc, in: sm.TimerFired{Kind: x.Kind, Gen: x.Gen}})
	case sm.CancelTimer:
		w.timers[x.Kind] = 0
	case sm.Send:
		// single node: nobody to send to
	case sm.FileOp:
		// One I/O worker executes operations in issue order, each taking
		// effect on the disk when it completes (a crash before that and it
		// never happened), as the daemon's runner does.
		lat := time.Duration(20+w.rng.IntN(200)) * time.Microsecond
		if x.Op == sm.OpFsync || x.Op == sm.OpFsyncDir {
			lat = time.Duration(500+w.rng.IntN(15000)) * time.Microsecond // a disk's fsync: wide windows of unsynced writes
		}
		done := max(w.now, w.ioBusy) + lat
		w.ioBusy = done
		op := x
		w.push(event{at: done, kind: evIO, inc: w.inc, op: &op})
	case sm.Log:
		w.tr.line(w.now, 0, x.Level.String()+" "+x.Key+": "+x.Text)
	case sm.Exit:
		w.tr.line(w.now, 0, fmt.Sprintf("exit %d: %s", x.Code, x.Reason))
		w.crash("exit")
	case sm.Reply:
		w.onReply(x)
	default:
		w.violate("S7", "unknown effect %T", e)
	}
}

// completeIO executes a file operation on the disk and delivers its result.
func (w *JobWorld) completeIO(op sm.FileOp) {
	switch op.Op {
	case sm.OpAppend:
		w.noteAppend(op.Data)
		w.unsynced = true
	case sm.OpFsync:
		w.unsynced = false
	}
	res := w.disk.Exec(op, w.wall())
	res.ID = op.ID
	w.deliver(res)
}

// noteAppend records the WAL records the node writes (S5's history).
func (w *JobWorld) noteAppend(data []byte) {
	recs, _, err := wal.Scan(data)
	if err != nil {
		w.violate("S5", "node appended an undecodable WAL batch: %v", err)
		return
	}
	for _, r := range recs {
		if int(r.GetLsn()) != len(w.issued)+1 {
			w.violate("S5", "appended LSN %d, expected %d", r.GetLsn(), len(w.issued)+1)
			return
		}
		w.issued = append(w.issued, r)
	}
}

func (w *JobWorld) onReply(r sm.Reply) {
	c, ok := w.pending[r.ID]
	if !ok {
		w.violate("S7", "reply to unknown request %d", r.ID)
		return
	}
	delete(w.pending, r.ID)
	c.ret, c.reply = w.now, r
	c.refused = r.Status != sm.StatusOK
	if r.Status == sm.StatusOK && r.LSN > w.acked {
		w.acked = r.LSN
	}
	for _, j := range r.Jobs {
		w.maxID = max(w.maxID, j.ID)
		if len(w.ids) == 0 || w.ids[len(w.ids)-1] != j.ID {
			w.ids = append(w.ids, j.ID)
			if len(w.ids) > 64 {
				w.ids = w.ids[1:]
			}
		}
		if c.req.Kind == sm.JobClaim {
			w.handles[c.client] = append(w.handles[c.client], j.Handle())
		}
	}
	// The client thinks a little, then issues its next operation.
	think := time.Duration(w.rng.IntN(20)) * time.Millisecond // often concurrent with other clients' writes
	if w.rng.IntN(4) == 0 {
		think = time.Duration(w.rng.IntN(2000)) * time.Millisecond // and sometimes long, so claims lapse
	}
	w.push(event{at: w.now + think, kind: evNetFault, node: c.client})
}

// clientStep issues one random operation from client c.
func (w *JobWorld) clientStep(c int) {
	if !w.up {
		w.push(event{at: w.now + 500*time.Millisecond, kind: evNetFault, node: c})
		return
	}
	req := w.randomRequest(c)
	w.nextReq++
	call := &clientCall{client: c, req: req, now: w.wall() / 1e9, call: w.now, term: w.node.Term(), lsn: w.node.NextLSN()}
	w.calls = append(w.calls, call)
	w.pending[w.nextReq] = call
	w.deliver(sm.ClientOp{ID: w.nextReq, Req: req})
}

func (w *JobWorld) randomRequest(c int) sm.JobRequest {
	r := w.rng
	queues := []string{"q0", "q1"}
	hosts := []string{"h0", "h1"}
	// Job ids are sparse (each term starts a range, sm.TermIDFloor): draw
	// seen ones, and now and then one past the newest or 0 (no such job).
	id := func() uint64 {
		if len(w.ids) == 0 || r.IntN(6) == 0 {
			return uint64(r.IntN(2)) * (w.maxID + 1)
		}
		return w.ids[r.IntN(len(w.ids))]
	}
	handle := func() queue.Handle {
		hs := w.handles[c]
		switch {
		case len(hs) > 0 && r.IntN(10) == 0:
			h := hs[r.IntN(len(hs))] // the same claim count from another record
			h.Claim.LSN++
			return h
		case len(hs) == 0 || r.IntN(8) == 0:
			return queue.Handle{ID: id(), Attempt: uint32(r.IntN(3))}
		}
		return hs[r.IntN(len(hs))]
	}
	switch k := r.IntN(115); {
	case k < 27:
		return sm.JobRequest{Kind: sm.JobEnqueue, Queue: queues[r.IntN(2)], Payload: []byte{byte(r.IntN(256))}, Priority: int32(r.IntN(3)),
			Delay: int64(r.IntN(3)), Expires: int64(r.IntN(2) * (5 + r.IntN(60)))}
	case k < 30:
		return sm.JobRequest{Kind: sm.JobEnqueueBatch, Queue: queues[r.IntN(2)], Payloads: [][]byte{{1}, {2}, {3}}[:1+r.IntN(3)], Priority: int32(r.IntN(3))}
	case k < 50:
		return sm.JobRequest{Kind: sm.JobClaim, Queue: queues[r.IntN(2)], Host: hosts[r.IntN(2)], Max: 1 + r.IntN(3)}
	case k < 62:
		return sm.JobRequest{Kind: sm.JobAck, Handle: handle()}
	case k < 66:
		return sm.JobRequest{Kind: sm.JobAckBatch, Handles: []queue.Handle{handle(), handle()}}
	case k < 72:
		return sm.JobRequest{Kind: sm.JobHeartbeat, Handle: handle()}
	case k < 77:
		return sm.JobRequest{Kind: sm.JobRetry, Handle: handle(), Error: "retry"}
	case k < 81:
		return sm.JobRequest{Kind: sm.JobFail, Handle: handle(), Error: "boom"}
	case k < 84:
		return sm.JobRequest{Kind: sm.JobCancel, ID: id()}
	case k < 87:
		return sm.JobRequest{Kind: sm.JobRedrive, ID: id()}
	case k < 89:
		return sm.JobRequest{Kind: sm.JobSweep}
	case k < 90:
		return sm.JobRequest{Kind: sm.JobGet, ID: id()}
	case k < 92:
		return sm.JobRequest{Kind: sm.JobGet, ID: w.maxID + uint64(r.IntN(3)) - 1}
	case k < 95, k >= 100:
		return sm.JobRequest{Kind: sm.JobList, Queue: queues[r.IntN(2)]}
	case k < 97:
		return sm.JobRequest{Kind: sm.JobRegister, Name: fmt.Sprintf("s%d", r.IntN(2)), Spec: fmt.Sprintf("@every %ds", 5+r.IntN(20)), Queue: "q0"}
	case k < 98:
		return sm.JobRequest{Kind: sm.JobUnregister, Name: fmt.Sprintf("s%d", r.IntN(2))}
	case k < 100:
		return sm.JobRequest{Kind: sm.JobTick}
	default:
		return sm.JobRequest{Kind: sm.JobList, Queue: queues[r.IntN(2)]}
	}
}

// checkState runs after every step: S5 at the end of each recovery, S6 on
// the live state.
func (w *JobWorld) checkState() {
	q, durable, recovered := w.node.JobState()
	if q == nil || !recovered {
		return
	}
	if !w.wasRec {
		w.wasRec = true
		w.checkRecovered(q, durable)
	}
	w.checkContract(q)
}

// checkRecovered is S5: the recovered state is exactly the replay of a
// prefix of the issued records that contains every acknowledged one.
func (w *JobWorld) checkRecovered(q *queue.Queues, k uint64) {
	if k < w.acked {
		w.violate("S5", "recovered up to LSN %d but LSN %d was acknowledged", k, w.acked)
		return
	}
	if k > uint64(len(w.issued)) {
		w.violate("S5", "recovered up to LSN %d but only %d records were ever written", k, len(w.issued))
		return
	}
	// The new term's no-op (LSN k+1, logged as recovery ends, not durable
	// yet) is applied too: it raises the next job id to the term's range.
	noop := &schema.WalRecord{Lsn: k + 1, Term: w.node.Term(), Op: &schema.WalRecord_Noop{Noop: &schema.WalNoop{}}}
	ref, routed := sm.ReplayRecords(w.cfg, append(w.issued[:k:k], noop))
	if got, want := q.Export(), ref.Export(); !reflect.DeepEqual(got, want) {
		w.violate("S5", "recovered state differs from the replay of LSNs 1..%d and the term's no-op (%d vs %d jobs, next id %d vs %d)", k, len(got.Jobs), len(want.Jobs), got.NextID, want.NextID)
		return
	}
	w.Routed += routed
	// Job ids lost with unsynced records are handed out again: track the
	// stamps of the recovered jobs only.
	w.stamps = map[uint64]queue.Stamps{}
	w.tr.line(w.now, -1, fmt.Sprintf("S5 ok: recovered LSN 1..%d of %d written (acked %d)", k, len(w.issued), w.acked))
	w.issued = w.issued[:k]
}

// checkContract is S6 on the live state: each job in exactly one state with
// consistent fields, stamps immutable, attempts within budget.
func (w *JobWorld) checkContract(q *queue.Queues) {
	seen := map[uint64]bool{}
	for _, j := range q.Export().Jobs {
		if seen[j.ID] {
			w.violate("S6", "job %d appears twice", j.ID)
			return
		}
		seen[j.ID] = true
		if st, ok := w.stamps[j.ID]; ok && st != j.Stamps {
			w.violate("S6", "job %d stamps changed from %+v to %+v", j.ID, st, j.Stamps)
			return
		}
		w.stamps[j.ID] = j.Stamps
		switch j.State {
		case queue.Processing:
			if j.Host == "" || j.ClaimExpiresAt == 0 || j.Attempts == 0 || j.Attempts > j.Stamps.MaxAttempts {
				w.violate("S6", "processing job %d inconsistent: %+v", j.ID, j)
				return
			}
		case queue.Dead:
			if j.DiedAt == 0 || j.LastError == "" {
				w.violate("S6", "dead job %d without died_at/last_error: %+v", j.ID, j)
				return
			}
		case queue.Pending:
			if j.ClaimExpiresAt != 0 {
				w.violate("S6", "pending job %d keeps a claim deadline", j.ID)
				return
			}
		}
	}
}
