// Package runner is the one goroutine that owns an sm.Node: it feeds the
// node its inputs (boot, messages, timer fires, I/O completions) with the
// real clock, and executes the effects each step returns, in order, with
// the real adapters (DESIGN §3.2).
//
// Goroutines: Run's own (the loop, the only caller of Node.Step), an I/O
// worker per lane (loop.LaneOf) executing its FileOps strictly in the
// order they were issued, and
// time.AfterFunc callbacks posting timer fires. All of them have ended when
// Run returns; FileOps still queued then are dropped, as a crash would
// (the state machine is crash-safe at every effect boundary).
package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/xce-hpc/xce/adapters/fileio"
	"github.com/xce-hpc/xce/adapters/logging"
	"github.com/xce-hpc/xce/host/loop"
	"github.com/xce-hpc/xce/sm"
)

// Inbound is a message received from peer From (its index in --peers, as
// authenticated by the transport).
type Inbound struct {
	From int
	Msg  sm.Msg
}

// Transport sends to peers. Send is best effort and must not block: drop
// the message if the connection is down or its queue is full (the node's
// timers cover loss). It is called from the Run goroutine only.
type Transport interface {
	Send(to int, m sm.Msg)
}

// Config wires a Runner.
type Config struct {
	Node  *sm.Node         // required; owned by the Runner from New on
	Files *fileio.Executor // required: the node's ${workdir}/${name}
	// Transport may be nil for a single-node cluster: sends are dropped.
	Transport Transport
	// Inbound delivers received messages; nil means none. A closed channel
	// is treated as "no more messages" (the loop stops reading it).
	Inbound <-chan Inbound
	Log     *zap.Logger // nil: no logs
	Seed    uint64      // Boot.Seed: election jitter (use crypto/rand in the daemon)
	// AfterStep, if set, is called on the loop goroutine after every step
	// with the input and the step's duration, effects included (the
	// metrics' step and checkpoint timing); it must be quick and not keep
	// n.
	AfterStep func(n *sm.Node, in sm.Input, took time.Duration)
}

// SlowStep: a step that takes longer is logged (loop.slow-step). Every
// request and heartbeat waits for the step ahead of it, so this is the
// longest delay the loop adds by itself (issue 9's stall bound).
const SlowStep = 50 * time.Millisecond

// Status is a snapshot of the node, published after every step.
type Status struct {
	Role       sm.Role
	Term       uint64
	Primary    int // index of the primary followed (self when primary), -1 if none
	ConfigTag  uint64
	Generation uint64
	Stale      bool
	Serving    bool
	Fatal      string // FatalReason once stopped
	Config     []byte // the running config blob (never modified in place)
	// Replication (DESIGN §4.4): the mode, seed mode's count of writes
	// acknowledged with no standby, and the primary's log positions and
	// view of each standby.
	Quorum              bool
	AckedWithoutStandby uint64
	DurableLSN          uint64
	CommitLSN           uint64
	Standbys            []sm.StandbyStatus
	PeersMismatch       []int // peers whose --peers list differs (their messages are dropped)
}

// ExitError is returned by Run when the node emits sm.Exit: Code 0 for a
// requested restart (or a finished install), non-zero for FATAL. The
// daemon exits with Code.
type ExitError struct {
	Code   int
	Reason string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("node exited with code %d: %s", e.Code, e.Reason)
}

// Runner runs one node. Build it with New; call Run once.
type Runner struct {
	cfg     Config
	log     *zap.Logger
	started atomic.Bool

	mu          sync.Mutex
	status      Status
	ready       chan struct{}
	readyClosed bool

	// Owned by the Run goroutine.
	start  time.Time
	timers map[sm.TimerKind]*time.Timer
	armed  map[sm.TimerKind]uint64
	fired  chan sm.TimerFired
	stop   chan struct{}
	// lanes executes file operations and Computes, one worker per lane
	// (loop.LaneOf), each in issue order: a checkpoint's encode and write
	// and a snapshot's import at recovery take long with a large state,
	// and WAL appends and fsyncs must not queue behind them.
	lanes [loop.NumLanes]*ioWorker

	// Client operations: Do and Upgrade post, the loop feeds them to the
	// node and hands each Reply (UpgradeReply) effect back to its waiter.
	ops       chan clientCall
	waiters   map[uint64]chan sm.Reply
	upWaiters map[uint64]chan sm.UpgradeReply
	swWaiters map[uint64]chan sm.SwitchoverReply
	nextOp    uint64

	// Timer callbacks register here so Run can wait for them.
	tmu    sync.Mutex
	closed bool
	cbs    sync.WaitGroup
}

// New builds a runner; nothing runs before Run.
func New(cfg Config) *Runner {
	r := &Runner{cfg: cfg, log: cfg.Log, ready: make(chan struct{}), ops: make(chan clientCall), stop: make(chan struct{}),
		waiters: map[uint64]chan sm.Reply{}, upWaiters: map[uint64]chan sm.UpgradeReply{}, swWaiters: map[uint64]chan sm.SwitchoverReply{}}
	if r.log == nil {
		r.log = zap.NewNop()
	}
	r.publish()
	return r
}

// Status returns the latest snapshot; safe from any goroutine.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Ready is closed the first time the node is ready: a serving standby, or
// a primary whose job state is recovered (the daemon then tells systemd
// READY=1). It is never closed if the node stops first:
// wait on it together with Run's result.
func (r *Runner) Ready() <-chan struct{} { return r.ready }

func (r *Runner) publish() {
	n := r.cfg.Node
	if n == nil {
		return
	}
	st := Status{
		Role: n.Role(), Term: n.ViewTerm(), Primary: n.Primary(),
		ConfigTag: n.ConfigTag(), Generation: n.ConfigGeneration(),
		Stale: n.Stale(), Serving: n.Serving(), Fatal: n.FatalReason(),
		Quorum: n.QuorumMode(), AckedWithoutStandby: n.AckedWithoutStandby(),
		DurableLSN: n.DurableLSN(), CommitLSN: n.CommitLSN(), Standbys: n.ReplicationStatus(),
		PeersMismatch: n.PeersMismatch(),
	}
	st.Config, _, _ = n.Config() // immutable once loaded
	ready := n.Ready()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = st
	if ready && !r.readyClosed {
		r.readyClosed = true
		close(r.ready)
	}
}

// clientCall is a job operation (req, reply) or, when up is set, an
// OP_upgradeConfig (up, upReply).
type clientCall struct {
	req     sm.JobRequest
	reply   chan sm.Reply
	up      *sm.UpgradeConfig
	upReply chan sm.UpgradeReply
	sw      *sm.Switchover
	swReply chan sm.SwitchoverReply
	inspect *inspectCall // set: not a client operation (inspect.go)
	// gone, set alone: the caller of the operation answering on this
	// channel went away (sm.ClientGone).
	gone chan sm.Reply
}

// ErrStopped is returned by Do, Upgrade and Switchover when the node
// stops after taking the call and before answering it: the operation's
// outcome is unknown. A call made once the node has stopped is
// ErrNotRunning instead: it was never taken.
var ErrStopped = errors.New("runner: node stopped; outcome unknown")

// Do runs one client operation through the node and waits for its reply
// (sent only once everything it depends on is durable).
func (r *Runner) Do(ctx context.Context, req sm.JobRequest) (sm.Reply, error) {
	c := clientCall{req: req, reply: make(chan sm.Reply, 1)}
	if err := r.post(ctx, c); err != nil {
		return sm.Reply{}, err
	}
	rep, err := await(ctx, c.reply, r.stop)
	if err != nil && ctx.Err() != nil {
		// Gone before the answer: the node drops what it holds for us (a
		// long-poll claim must not take a job for nobody).
		_ = r.post(context.Background(), clientCall{gone: c.reply})
	}
	return rep, err
}

// Upgrade runs one OP_upgradeConfig (seed 002 §6) through the node: u's
// blob and its caller-computed SHA-256, Peer the caller's name for the
// log (sanitised by the caller), Restart to restart without a handover;
// its ID is the runner's to set. It waits for the node's UpgradeReply. An
// accepted upgrade is followed, in the same step, once a running
// checkpoint ends or once the handover to a standby ended, by
// sm.Exit{Code: 0}: the reply is delivered before Run returns that
// *ExitError.
func (r *Runner) Upgrade(ctx context.Context, u sm.UpgradeConfig) (sm.UpgradeReply, error) {
	c := clientCall{up: &u, upReply: make(chan sm.UpgradeReply, 1)}
	if err := r.post(ctx, c); err != nil {
		return sm.UpgradeReply{}, err
	}
	return await(ctx, c.upReply, r.stop)
}

// Switchover asks the node, as primary, to hand its role to the peer of
// index to (-1: the best synced standby) for the admin peer, and waits
// for the node's SwitchoverReply: after the target leads, or once the
// handover failed (sm.HandoverTimeout).
func (r *Runner) Switchover(ctx context.Context, to int, peer string) (sm.SwitchoverReply, error) {
	c := clientCall{sw: &sm.Switchover{To: to, Peer: peer}, swReply: make(chan sm.SwitchoverReply, 1)}
	if err := r.post(ctx, c); err != nil {
		return sm.SwitchoverReply{}, err
	}
	return await(ctx, c.swReply, r.stop)
}

// post hands c to the loop. ops is unbuffered: nil means the loop took
// c, and steps it before anything else; ErrNotRunning (or ctx's error)
// means it never will.
func (r *Runner) post(ctx context.Context, c clientCall) error {
	select {
	case r.ops <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stop:
		return ErrNotRunning
	}
}

// await waits for the reply to a posted call. A reply delivered in the
// step that ended Run (an upgrade's reply, then the node's exit) is sent
// on ch before stop is closed, so it is found here and wins over stop; it
// also wins over a ctx that ends at the same moment.
func await[T any](ctx context.Context, ch <-chan T, stop <-chan struct{}) (T, error) {
	var zero T
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
	case <-stop:
	}
	select {
	case v := <-ch:
		return v, nil
	default:
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	return zero, ErrStopped
}

// ErrRunTwice is returned by a second call to Run.
var ErrRunTwice = errors.New("runner: Run called more than once")

// Run boots the node (Boot{Seed}) and runs it until it exits (*ExitError)
// or ctx is done (ctx.Err()). Every goroutine it started has ended when
// it returns.
func (r *Runner) Run(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return ErrRunTwice
	}
	switch {
	case r.cfg.Node == nil:
		return errors.New("runner: Config.Node is nil")
	case r.cfg.Files == nil:
		return errors.New("runner: Config.Files is nil")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r.start = time.Now()
	r.timers = map[sm.TimerKind]*time.Timer{}
	r.armed = map[sm.TimerKind]uint64{}
	r.fired = make(chan sm.TimerFired)
	done := make(chan sm.Input) // IODone, Computed
	var wg sync.WaitGroup
	for i := range r.lanes {
		w := &ioWorker{exec: r.cfg.Files, wake: make(chan struct{}, 1), done: done, stop: r.stop, log: r.log}
		r.lanes[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run()
		}()
	}
	defer func() {
		r.tmu.Lock()
		r.closed = true // no timer callback registers from now on
		r.tmu.Unlock()
		for _, t := range r.timers {
			t.Stop()
		}
		close(r.stop)
		r.cbs.Wait()
		wg.Wait()
		if err := r.cfg.Files.Close(); err != nil {
			r.log.Warn("closing the kept WAL file: "+err.Error(), zap.String("key", "runner.close"))
		}
	}()

	if err := r.step(sm.Boot{Seed: r.cfg.Seed}); err != nil {
		return err
	}
	inbound := r.cfg.Inbound
	for {
		var in sm.Input
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-inbound:
			if !ok {
				inbound = nil
				r.log.Warn("inbound channel closed; no more peer messages", zap.String("key", "runner.inbound-closed"))
				continue
			}
			in = sm.Recv{From: m.From, Msg: m.Msg}
		case tf := <-r.fired:
			if r.armed[tf.Kind] != tf.Gen {
				continue // re-armed or cancelled since it fired
			}
			delete(r.armed, tf.Kind)
			delete(r.timers, tf.Kind)
			in = tf
		case d := <-done:
			in = d
		case c := <-r.ops:
			if c.inspect != nil {
				c.inspect.run(r.cfg.Node)
				continue
			}
			if c.gone != nil {
				id, ok := r.waiterOf(c.gone)
				if !ok {
					continue // answered meanwhile
				}
				delete(r.waiters, id)
				if err := r.step(sm.ClientGone{ID: id}); err != nil {
					return err
				}
				continue
			}
			r.nextOp++
			switch {
			case c.up != nil:
				u := *c.up
				u.ID = r.nextOp
				r.upWaiters[u.ID] = c.upReply
				in = u
			case c.sw != nil:
				s := *c.sw
				s.ID = r.nextOp
				r.swWaiters[s.ID] = c.swReply
				in = s
			default:
				r.waiters[r.nextOp] = c.reply
				in = sm.ClientOp{ID: r.nextOp, Req: c.req}
			}
		}
		if err := r.step(in); err != nil {
			return err
		}
	}
}

// step feeds one input with the current clock, executes the effects in
// order (package loop, through host) and publishes the status. It returns
// *ExitError on sm.Exit.
func (r *Runner) step(in sm.Input) error {
	now := time.Now()
	clk := sm.Clock{Mono: now.Sub(r.start), Wall: now.UnixNano()}
	defer r.publish()
	_, x := loop.Step(r.cfg.Node, clk, in, host{r})
	took := time.Since(now)
	if took > SlowStep {
		r.log.Warn(fmt.Sprintf("slow step: %s took %v", inputName(in), took.Round(time.Millisecond)), zap.String("key", "loop.slow-step"))
	}
	if r.cfg.AfterStep != nil {
		r.cfg.AfterStep(r.cfg.Node, in, took)
	}
	if x != nil {
		return &ExitError{Code: x.Code, Reason: x.Reason}
	}
	return nil
}

// inputName names an input for the slow-step log: its type, and the
// message, request or timer kind.
func inputName(in sm.Input) string {
	switch x := in.(type) {
	case sm.Recv:
		return fmt.Sprintf("Recv %s from %d", x.Msg.Type, x.From)
	case sm.ClientOp:
		return "ClientOp " + x.Req.Kind.String()
	case sm.TimerFired:
		return "TimerFired " + x.Kind.String()
	default:
		return strings.TrimPrefix(fmt.Sprintf("%T", in), "sm.")
	}
}

// host is the runner's loop.Host: real sockets, real timers, an I/O
// worker per lane, zap, and the callers waiting for replies.
type host struct{ r *Runner }

func (h host) Send(x sm.Send) {
	if h.r.cfg.Transport != nil {
		h.r.cfg.Transport.Send(x.To, x.Msg)
	}
}

func (h host) SetTimer(x sm.SetTimer) {
	r := h.r
	if t := r.timers[x.Kind]; t != nil {
		t.Stop()
	}
	r.armed[x.Kind] = x.Gen
	tf := sm.TimerFired{Kind: x.Kind, Gen: x.Gen}
	r.timers[x.Kind] = time.AfterFunc(max(x.After, 0), func() { r.postTimer(tf) })
}

func (h host) CancelTimer(x sm.CancelTimer) {
	r := h.r
	if t := r.timers[x.Kind]; t != nil {
		t.Stop()
	}
	delete(r.timers, x.Kind)
	delete(r.armed, x.Kind)
}

func (h host) File(x sm.FileOp)     { h.submit(x) }
func (h host) Compute(x sm.Compute) { h.submit(x) }

func (h host) submit(e sm.Effect) {
	lane, _ := loop.LaneOf(e) // File and Compute: always on one
	h.r.lanes[lane].submit(e)
}

func (h host) Log(x sm.Log) { h.r.logEffect(x) }

func (h host) Reply(x sm.Reply) {
	if ch, ok := h.r.waiters[x.ID]; ok {
		ch <- x // buffered: never blocks the loop
		delete(h.r.waiters, x.ID)
	}
}

func (h host) UpgradeReply(x sm.UpgradeReply) {
	if ch, ok := h.r.upWaiters[x.ID]; ok {
		ch <- x // buffered, and sent before a following Exit ends Run
		delete(h.r.upWaiters, x.ID)
	}
}

func (h host) SwitchoverReply(x sm.SwitchoverReply) {
	if ch, ok := h.r.swWaiters[x.ID]; ok {
		ch <- x // buffered: never blocks the loop
		delete(h.r.swWaiters, x.ID)
	}
}

func (h host) Exit(x sm.Exit) {
	lvl := zapcore.InfoLevel
	if x.Code != 0 {
		lvl = zapcore.ErrorLevel
	}
	h.r.log.Log(lvl, "node exit", zap.String("key", "runner.exit"), zap.Int("code", x.Code), zap.String("reason", x.Reason))
}

func (h host) Unknown(e sm.Effect) {
	h.r.log.Error("unknown effect", zap.String("key", "runner.unknown-effect"), zap.String("type", fmt.Sprintf("%T", e)))
}

// postTimer runs in a time.AfterFunc goroutine.
func (r *Runner) postTimer(tf sm.TimerFired) {
	r.tmu.Lock()
	if r.closed {
		r.tmu.Unlock()
		return
	}
	r.cbs.Add(1)
	r.tmu.Unlock()
	defer r.cbs.Done()
	select {
	case r.fired <- tf:
	case <-r.stop:
	}
}

// logEffect writes a node log line with field key=Log.Key. sm.Fatal is
// written at zap's FatalLevel through the core, so zap does not call
// os.Exit: the node's Exit effect ends Run instead.
func (r *Runner) logEffect(l sm.Log) {
	key := zap.String("key", l.Key)
	switch l.Level {
	case sm.Debug:
		r.log.Debug(l.Text, key)
	case sm.Info:
		r.log.Info(l.Text, key)
	case sm.Warn:
		r.log.Warn(l.Text, key)
	case sm.Error:
		r.log.Error(l.Text, key)
	default:
		logging.Fatal(r.log, l.Text, key)
	}
}

// ioWorker executes a lane's effects (FileOps or Computes) one at a time,
// in submission order, and posts each completion back to the loop. submit
// never blocks the loop.
type ioWorker struct {
	exec *fileio.Executor
	mu   sync.Mutex
	q    []sm.Effect
	wake chan struct{} // capacity 1
	done chan<- sm.Input
	stop <-chan struct{}
	log  *zap.Logger
}

func (w *ioWorker) submit(op sm.Effect) {
	w.mu.Lock()
	w.q = append(w.q, op)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func (w *ioWorker) run() {
	for {
		w.mu.Lock()
		if len(w.q) == 0 {
			w.mu.Unlock()
			select {
			case <-w.wake:
				continue
			case <-w.stop:
				return
			}
		}
		op := w.q[0]
		w.q[0] = nil // release its data
		w.q = w.q[1:]
		w.mu.Unlock()
		select {
		case <-w.stop:
			return // do not start an op after Run ended
		default:
		}
		var d sm.Input
		switch x := op.(type) {
		case sm.FileOp:
			start := time.Now()
			r := w.exec.Exec(x)
			r.ID = x.ID
			d = r
			if msg := slowFileOp(x, r, time.Since(start), w.queued()); msg != "" {
				w.log.Warn(msg, zap.String("key", "files.slow-op"))
			}
		case sm.Compute:
			r := w.exec.Compute(x)
			r.ID = x.ID
			d = r
		default:
			continue // submit is given only these
		}
		select {
		case w.done <- d:
		case <-w.stop:
			return
		}
	}
}

// slowFileOp is the warning for a file operation that took longer than
// SlowStep, "" for one that did not or for an fsync (the daemon's fsync
// observer logs those, files.slow-fsync, beside their metric). Each lane
// runs its operations one at a time, so the ones queued behind a slow one
// waited as long: on the I/O lane the WAL's appends, and every reply.
func slowFileOp(op sm.FileOp, d sm.IODone, took time.Duration, queued int) string {
	if took <= SlowStep || op.Op == sm.OpFsync || op.Op == sm.OpFsyncDir {
		return ""
	}
	lane, _ := loop.LaneOf(op)
	return fmt.Sprintf("slow file operation: %s %s took %v (%d bytes written, %d read; %d operations queued behind it on the %s lane)",
		op.Op, op.Path, took.Round(time.Millisecond), len(op.Data), len(d.Data), queued, lane)
}

// queued is how many operations wait on the lane.
func (w *ioWorker) queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.q)
}

// waiterOf finds the operation whose answer goes to ch.
func (r *Runner) waiterOf(ch chan sm.Reply) (uint64, bool) {
	for id, w := range r.waiters {
		if w == ch {
			return id, true
		}
	}
	return 0, false
}
