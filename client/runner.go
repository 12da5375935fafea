package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/schema"
)

// A Runner is a worker process's loop: it claims jobs of the queues it
// has handlers for, runs each job's handler, heartbeats the claim while
// the handler runs, and settles the job by its result:
//
//   - nil: acked. The ack rides on the slot's next claim (one call and
//     one durable write for both), sent as soon as the handler returned.
//     That claim does not wait for work (wait 0): its reply, which says
//     whether the ack was taken, comes at once, and a shutdown never has
//     to cut off a claim whose acks are in flight. The next claim, which
//     carries no acks, long-polls.
//   - an error: handed back with Retry and the error's text (bounded to
//     MaxRetryText bytes). The queue's backoff and attempt budget apply:
//     the job runs again later, or is dead-lettered once its attempts are
//     spent ("max attempts exceeded").
//   - FailJob(err): dead-lettered at once with Fail and err's text.
//   - a panic: recovered, logged with a short stack, and handed back with
//     Retry and the panic's value as the error.
//
// Concurrency is per queue: each queue's Concurrency slots claim on their
// own Work stream (Client.Worker), one job at a time, so a slot claims
// only when it is free and a queue never has more handlers running than
// slots. An idle slot's claim waits on the node (long poll, Wait) instead
// of polling.
//
// Heartbeats: while a handler runs, its claim is extended every third of
// the job's lease (the visibility timeout stamped on the job), or every
// HeartbeatInterval. A heartbeat refused because the claim is no longer
// current (it lapsed, an operator's action, a failover that lost it)
// cancels the handler's context; the job is then neither acked nor
// retried: it is another claim's now.
//
// Shutdown: when Run's context ends, every slot stops claiming at once
// (a waiting claim carries no acks and is dropped by the node), handlers
// that are running may finish within DrainTimeout and are settled as
// usual, and the acks still owed go in one AckBatch per slot. At the
// deadline the remaining handlers' contexts are cancelled and their jobs
// handed back with Retry (there is no other way to release a claim, so
// the release uses one of the job's attempts and its backoff), and Run
// returns without waiting for a handler that ignores its context.
//
// Outcomes are Client's (see the package comment): a claim, ack, retry
// or fail whose answer never came (ErrOutcomeUnknown) is logged and never
// sent again. A job whose ack's outcome is unknown may run again when its
// claim lapses; one whose claim's outcome is unknown is handed out again
// when that claim lapses. A claim the node did not apply (no primary, a
// failover) is sent again after a backoff, its acks with it.
type Runner struct {
	c   *Client
	opt RunnerOptions
	log *slog.Logger

	mu      sync.Mutex
	queues  []*runnerQueue
	started bool
}

// Runner defaults and bounds.
const (
	// DefaultRunnerWait is an idle claim's long-poll wait.
	DefaultRunnerWait = 10 * time.Second
	// MaxRunnerWait is the API's longest claim wait.
	MaxRunnerWait = 20 * time.Second
	// DefaultDrainTimeout is how long a shutdown lets running handlers
	// finish.
	DefaultDrainTimeout = 30 * time.Second
	// MaxRetryText bounds the error text a Retry or Fail carries (it is
	// stored with the job as its last error).
	MaxRetryText = 1024
	// maxLogStack bounds the stack of a recovered panic in the log.
	maxLogStack = 4096
	// minHeartbeat: a lease of one second still gets heartbeats this
	// often rather than a busy loop.
	minHeartbeat = 100 * time.Millisecond
	// Claim errors are retried after claimBackoffMin, doubling up to
	// claimBackoffMax while they keep failing.
	claimBackoffMin = 100 * time.Millisecond
	claimBackoffMax = 5 * time.Second
)

// RunnerOptions configure a Runner. Host is required; the zero value of
// every other field is its default.
type RunnerOptions struct {
	// Host is the claimant: a host name of the cluster config.
	Host string
	// Concurrency is the number of handlers each queue may run at once;
	// 0 = 1.
	Concurrency int
	// Wait is how long an idle claim waits for a job on the node; 0 =
	// DefaultRunnerWait, at most MaxRunnerWait.
	Wait time.Duration
	// DrainTimeout is how long a shutdown lets running handlers finish
	// before their contexts are cancelled and their jobs handed back; 0 =
	// DefaultDrainTimeout.
	DrainTimeout time.Duration
	// HeartbeatInterval overrides the heartbeat period; 0 = a third of
	// each job's lease.
	HeartbeatInterval time.Duration
	// Logger receives the runner's structured log (claims that failed,
	// retries, panics, lost claims, acks); nil = none.
	Logger *slog.Logger
	// OnResult, if set, is called once per settled job with how it was
	// settled, from the slot's goroutine (it should return quickly).
	OnResult func(Result)
}

// Outcome is how a job was settled.
type Outcome int

const (
	Acked      Outcome = iota // the ack was taken
	AckRefused                // the ack was refused: the claim was no longer current
	AckUnknown                // the ack was sent and no answer came (ErrOutcomeUnknown)
	Retried                   // handed back with Retry after an error or a panic
	Failed                    // dead-lettered with Fail (FailJob)
	Released                  // handed back with Retry at the drain deadline
	ClaimLost                 // a heartbeat found the claim gone; nothing sent
	NotSettled                // the Retry, Fail or ack could not be sent or was refused: the claim lapses
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case AckRefused:
		return "ack refused"
	case AckUnknown:
		return "ack outcome unknown"
	case Retried:
		return "retried"
	case Failed:
		return "failed"
	case Released:
		return "released"
	case ClaimLost:
		return "claim lost"
	case NotSettled:
		return "not settled"
	default:
		return fmt.Sprintf("outcome(%d)", int(o))
	}
}

// Result is one settled job: its outcome and the error behind it (the
// handler's for Retried and Failed, the call's for the others).
type Result struct {
	Job     *Job
	Outcome Outcome
	Err     error
}

// Handler works one job; see Runner for what its result does. ctx ends
// when the claim is lost or the shutdown's drain deadline passes.
type Handler func(ctx context.Context, job *Job) error

// Job is a claimed job as a Handler sees it.
type Job struct {
	ID      uint64
	Queue   string
	Payload []byte
	// Attempt counts the attempts used, this one included (1 on the
	// first run); MaxAttempts is the job's budget.
	Attempt, MaxAttempts uint32
	// LastError is the previous attempt's error, if any.
	LastError string
	// Lease is the claim's visibility timeout: heartbeats extend it.
	Lease time.Duration
	// Snapshot is the job as the claim answered it.
	Snapshot *schema.SnapshotJob
}

// Handle is the handle of the claim that handed the job out.
func (j *Job) Handle() *schema.WalHandle { return handleOf(j.Snapshot) }

func handleOf(s *schema.SnapshotJob) *schema.WalHandle {
	return &schema.WalHandle{Id: s.GetId(), Attempt: s.GetClaims(), ClaimTerm: s.GetClaimTerm(), ClaimLsn: s.GetClaimLsn()}
}

func jobOf(s *schema.SnapshotJob) *Job {
	return &Job{ID: s.GetId(), Queue: s.GetQueue(), Payload: s.GetPayload(), Attempt: s.GetAttempts(),
		MaxAttempts: s.GetStamps().GetMaxAttempts(), LastError: s.GetLastError(),
		Lease: time.Duration(s.GetStamps().GetVisibilityTimeoutS()) * time.Second, Snapshot: s}
}

// FailError marks a handler's error as final: the job is dead-lettered
// (Fail) instead of retried.
type FailError struct{ Err error }

func (e *FailError) Error() string { return e.Err.Error() }
func (e *FailError) Unwrap() error { return e.Err }

// FailJob wraps err so that the Runner dead-letters the job with err's
// text instead of retrying it. FailJob(nil) is nil.
func FailJob(err error) error {
	if err == nil {
		return nil
	}
	return &FailError{Err: err}
}

// PanicError is a handler's recovered panic.
type PanicError struct {
	Value any
	Stack []byte // bounded
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

type runnerQueue struct {
	name string
	h    Handler
}

// NewRunner is a Runner of c's cluster. c must outlive it.
func NewRunner(c *Client, opt RunnerOptions) (*Runner, error) {
	switch {
	case c == nil:
		return nil, errors.New("client: NewRunner needs a Client")
	case opt.Host == "":
		return nil, errors.New("client: RunnerOptions.Host is empty: name this worker's host as in the cluster config")
	case opt.Concurrency < 0:
		return nil, fmt.Errorf("client: RunnerOptions.Concurrency %d is negative", opt.Concurrency)
	case opt.Wait < 0 || opt.Wait > MaxRunnerWait:
		return nil, fmt.Errorf("client: RunnerOptions.Wait %v outside 0..%v", opt.Wait, MaxRunnerWait)
	case opt.DrainTimeout < 0:
		return nil, fmt.Errorf("client: RunnerOptions.DrainTimeout %v is negative", opt.DrainTimeout)
	case opt.HeartbeatInterval < 0:
		return nil, fmt.Errorf("client: RunnerOptions.HeartbeatInterval %v is negative", opt.HeartbeatInterval)
	}
	if opt.Concurrency == 0 {
		opt.Concurrency = 1
	}
	if opt.Wait == 0 {
		opt.Wait = DefaultRunnerWait
	}
	if opt.DrainTimeout == 0 {
		opt.DrainTimeout = DefaultDrainTimeout
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{c: c, opt: opt, log: log}, nil
}

// Handle makes h the handler of queue's jobs. One handler per queue;
// before Run only.
func (r *Runner) Handle(queue string, h Handler) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.started:
		return fmt.Errorf("client: Handle(%q) after Run", queue)
	case queue == "":
		return errors.New("client: Handle: empty queue name")
	case h == nil:
		return fmt.Errorf("client: Handle(%q): nil handler", queue)
	}
	for _, q := range r.queues {
		if q.name == queue {
			return fmt.Errorf("client: Handle(%q): the queue has a handler already", queue)
		}
	}
	r.queues = append(r.queues, &runnerQueue{name: queue, h: h})
	return nil
}

// Run claims and works jobs until ctx ends, then shuts down (see Runner)
// and returns nil. A claim the node refuses for good (an unknown queue or
// host, a certificate without the right, a request over the API's
// limits) shuts the runner down the same way and is returned. Run may be
// called once.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("client: Runner.Run called twice")
	}
	if len(r.queues) == 0 {
		r.mu.Unlock()
		return errors.New("client: Runner.Run without a handler (Handle)")
	}
	r.started = true
	queues := r.queues
	r.mu.Unlock()

	// claimCtx ends claiming; hardCtx, which outlives ctx, ends the
	// handlers at the drain deadline.
	claimCtx, stopClaiming := context.WithCancel(ctx)
	defer stopClaiming()
	hardCtx, kill := context.WithCancel(context.WithoutCancel(ctx))
	defer kill()
	var (
		fmu   sync.Mutex
		fatal []error
	)
	onFatal := func(err error) {
		fmu.Lock()
		fatal = append(fatal, err)
		fmu.Unlock()
		stopClaiming()
	}
	var wg sync.WaitGroup
	for _, q := range queues {
		for i := range r.opt.Concurrency {
			wg.Go(func() { r.slot(claimCtx, hardCtx, q, i, onFatal) })
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	r.log.Info("runner started", "host", r.opt.Host, "queues", len(queues), "concurrency", r.opt.Concurrency)
	select {
	case <-done:
	case <-claimCtx.Done():
		r.log.Info("runner draining", "deadline", r.opt.DrainTimeout)
		t := time.NewTimer(r.opt.DrainTimeout)
		select {
		case <-done:
			t.Stop()
		case <-t.C:
			r.log.Warn("drain deadline passed: cancelling the running handlers and handing their jobs back")
			kill()
			<-done
		}
	}
	r.log.Info("runner stopped")
	fmu.Lock()
	defer fmu.Unlock()
	return errors.Join(fatal...)
}

// slot is one claiming goroutine of queue q: claim one job, work it,
// claim the next with its ack, until claiming stops.
func (r *Runner) slot(claimCtx, hardCtx context.Context, q *runnerQueue, slot int, onFatal func(error)) {
	w := r.c.Worker()
	defer w.Close()
	log := r.log.With("queue", q.name, "slot", slot)
	var done []*Job // worked without error: acked on the next claim
	pause := claimBackoffMin
	for claimCtx.Err() == nil {
		req := &schema.ClaimRequest{Queue: q.name, Host: r.opt.Host, Max: 1, WaitMs: uint32(r.opt.Wait / time.Millisecond)}
		cctx := claimCtx
		if len(done) > 0 {
			// Acks: answered at once, and never cut off by the
			// shutdown (their outcome would become unknown). The
			// client's Timeout bounds it.
			req.WaitMs = 0
			req.Ack = handlesOf(done)
			cctx = context.WithoutCancel(claimCtx)
		}
		rep, err := w.Claim(cctx, req)
		if err != nil {
			switch {
			case claimCtx.Err() != nil && len(done) == 0:
				// The shutdown cut a waiting claim off: the node drops
				// it with the stream (no job is claimed for nobody).
				continue
			case errors.Is(err, ErrOutcomeUnknown):
				log.Warn("claim outcome unknown: not repeated (a job it took is handed out again when its claim lapses)",
					"err", bound(err.Error()), "acks", len(done))
				r.settleAll(done, AckUnknown, err)
				done = nil
			case claimCtx.Err() != nil:
				continue // shutting down; nothing was applied, the acks go in the last AckBatch
			case refusedForGood(err):
				log.Error("claim refused", "err", bound(err.Error()))
				onFatal(fmt.Errorf("client: claim of queue %q for host %q: %w", q.name, r.opt.Host, err))
				continue
			default:
				log.Warn("claim failed, trying again", "err", bound(err.Error()), "after", pause)
			}
			sleepCtx(claimCtx, pause)
			pause = min(2*pause, claimBackoffMax)
			continue
		}
		pause = claimBackoffMin
		r.acked(log, done, rep.GetOks())
		done = nil
		for _, sj := range rep.GetJobs() {
			if j := r.work(hardCtx, log, q, sj); j != nil {
				done = append(done, j)
			}
		}
	}
	if len(done) > 0 {
		r.ackLast(log, done)
	}
}

// refusedForGood: the node's answer to a claim that will never change by
// asking again.
func refusedForGood(err error) bool {
	if errors.Is(err, ErrRefusedLocally) {
		return true
	}
	ne := new(NodeError)
	if !errors.As(err, &ne) {
		return false
	}
	switch ne.Code() {
	case connect.CodeInvalidArgument, connect.CodePermissionDenied, connect.CodeUnauthenticated, connect.CodeResourceExhausted:
		return true
	}
	return false
}

func handlesOf(jobs []*Job) []*schema.WalHandle {
	hs := make([]*schema.WalHandle, len(jobs))
	for i, j := range jobs {
		hs[i] = j.Handle()
	}
	return hs
}

func (r *Runner) settle(j *Job, o Outcome, err error) {
	if r.opt.OnResult != nil {
		r.opt.OnResult(Result{Job: j, Outcome: o, Err: err})
	}
}

func (r *Runner) settleAll(jobs []*Job, o Outcome, err error) {
	for _, j := range jobs {
		r.settle(j, o, err)
	}
}

// acked reports the ack results oks of jobs, in order.
func (r *Runner) acked(log *slog.Logger, jobs []*Job, oks []bool) {
	for i, j := range jobs {
		if i < len(oks) && oks[i] {
			log.Info("job acked", "job", j.ID, "attempt", j.Attempt)
			r.settle(j, Acked, nil)
			continue
		}
		log.Warn("ack refused: the claim is not current (it lapsed); the job runs again", "job", j.ID)
		r.settle(j, AckRefused, nil)
	}
}

// ackLast acks the jobs a stopping slot still owes, in one AckBatch.
func (r *Runner) ackLast(log *slog.Logger, jobs []*Job) {
	rep, err := r.c.AckBatch(context.Background(), &schema.AckBatchRequest{Handles: handlesOf(jobs)})
	switch {
	case err == nil:
		r.acked(log, jobs, rep.GetOks())
	case errors.Is(err, ErrOutcomeUnknown):
		log.Warn("last acks' outcome unknown: not repeated", "jobs", len(jobs), "err", bound(err.Error()))
		r.settleAll(jobs, AckUnknown, err)
	default:
		log.Warn("last acks not sent: their claims lapse and the jobs run again", "jobs", len(jobs), "err", bound(err.Error()))
		r.settleAll(jobs, NotSettled, err)
	}
}

var errClaimLost = errors.New("the claim is no longer current")

// work runs q's handler on sj with heartbeats and settles it; the job is
// returned when it is to be acked.
func (r *Runner) work(hardCtx context.Context, log *slog.Logger, q *runnerQueue, sj *schema.SnapshotJob) *Job {
	j := jobOf(sj)
	log = log.With("job", j.ID, "attempt", j.Attempt)
	jctx, cancel := context.WithCancelCause(hardCtx)
	defer cancel(nil)
	hctx, stopBeats := context.WithCancel(jctx)
	var beats sync.WaitGroup
	beats.Go(func() { r.heartbeat(hctx, log, j, func() { cancel(errClaimLost) }) })
	res := make(chan error, 1)
	go func() { res <- runHandler(jctx, q.h, j) }()
	var err error
	select {
	case err = <-res:
	case <-hardCtx.Done():
		stopBeats()
		beats.Wait()
		r.handBack(log, j, Released, nil, "worker shut down: the drain deadline passed while the job ran")
		return nil
	}
	stopBeats()
	beats.Wait()
	if context.Cause(jctx) == errClaimLost {
		log.Warn("claim lost while the handler ran: the job is not settled by this worker", "result", errText(err))
		r.settle(j, ClaimLost, errClaimLost)
		return nil
	}
	if err == nil {
		return j
	}
	if pe := (*PanicError)(nil); errors.As(err, &pe) {
		log.Error("handler panicked", "panic", bound(fmt.Sprint(pe.Value)), "stack", string(pe.Stack))
	}
	if fe := (*FailError)(nil); errors.As(err, &fe) {
		r.handBack(log, j, Failed, err, bound(err.Error()))
		return nil
	}
	r.handBack(log, j, Retried, err, bound(err.Error()))
	return nil
}

func errText(err error) string {
	if err == nil {
		return "nil"
	}
	return bound(err.Error())
}

// runHandler runs h, a panic becoming a *PanicError.
func runHandler(ctx context.Context, h Handler, j *Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			st := debug.Stack()
			if len(st) > maxLogStack {
				st = st[:maxLogStack]
			}
			err = &PanicError{Value: v, Stack: st}
		}
	}()
	return h(ctx, j)
}

// handBack sends Retry (o Retried or Released) or Fail (o Failed) for j
// with text, once.
func (r *Runner) handBack(log *slog.Logger, j *Job, o Outcome, cause error, text string) {
	// Not the runner's context: a shutdown must not cut the call off
	// (its outcome would become unknown). The client's Timeout bounds it.
	ctx := context.Background()
	var err error
	if o == Failed {
		_, err = r.c.Fail(ctx, &schema.FailRequest{Handle: j.Handle(), Error: text})
	} else {
		_, err = r.c.Retry(ctx, &schema.RetryRequest{Handle: j.Handle(), Error: text})
	}
	switch {
	case err == nil:
		log.Warn("job "+o.String(), "err", text)
		if cause == nil {
			cause = errors.New(text)
		}
		r.settle(j, o, cause)
	case errors.Is(err, ErrOutcomeUnknown):
		log.Warn(o.String()+": outcome unknown, not repeated", "err", bound(err.Error()))
		r.settle(j, NotSettled, err)
	default:
		log.Warn(o.String()+": not applied; the claim lapses and the job is handed out again", "err", bound(err.Error()))
		r.settle(j, NotSettled, err)
	}
}

// heartbeat extends j's claim until ctx ends; lost is called, and the
// heartbeats end, when the node says the claim is gone.
func (r *Runner) heartbeat(ctx context.Context, log *slog.Logger, j *Job, lost func()) {
	every := r.opt.HeartbeatInterval
	if every == 0 {
		every = j.Lease / 3
	}
	every = max(every, minHeartbeat)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := r.c.Heartbeat(ctx, &schema.HeartbeatRequest{Handle: j.Handle()})
		ne := new(NodeError)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return
		case errors.As(err, &ne) && ne.Code() == connect.CodeFailedPrecondition:
			log.Warn("heartbeat refused: the claim is gone; cancelling the handler")
			lost()
			return
		default:
			// No primary, an unknown outcome: a heartbeat applied twice
			// does no harm, so the next one simply goes out on time.
			log.Warn("heartbeat failed", "err", bound(err.Error()))
		}
	}
}

// bound cuts s to MaxRetryText bytes on a rune boundary.
func bound(s string) string {
	if len(s) <= MaxRetryText {
		return s
	}
	cut := MaxRetryText - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
