package integration

// A Jepsen-style client history for the fault tests (faults_test.go) and
// the chaos campaign (chaos_test.go): concurrent clients submit jobs with
// unique payloads, workers claim and acknowledge them and a reader gets
// acknowledged ones back, all through the xcecli client path
// (package client: peers in --peers order, redirects followed, a
// mutation whose outcome is unknown never retried). Every reply is one
// operation of the history, with its call and return times and its
// outcome: ok, a definite failure (nothing was applied), or unknown
// (maybe applied). An unknown or failed write is never counted as lost.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"

	"connectrpc.com/connect"
)

type opKind uint8

const (
	opEnqueue opKind = iota // payload → ok with the job's id
	opClaim                 // → the jobs handed out (id, attempt, payload)
	opAck                   // one handle of a claim (its payload from the claim)
	opGet                   // id → the payload there, or not found
	opRead                  // the final read-back of one payload (synthesised by the checker)
)

func (k opKind) String() string {
	return [...]string{"enqueue", "claim", "ack", "get", "read"}[k]
}

type outcome uint8

const (
	outOK      outcome = iota
	outFail            // definitely not applied (no primary took it, or refused)
	outUnknown         // maybe applied
)

func (o outcome) String() string { return [...]string{"ok", "fail", "unknown"}[o] }

// claimed is one job of a claim reply.
type claimed struct {
	id      uint64
	attempt uint32
	stamp   claimStamp
	payload string
}

// claimStamp is the record that made a claim (term, LSN), carried by its
// handle.
type claimStamp struct{ term, lsn uint64 }

// handleKey is a handle as xcecli prints it, ID:ATTEMPT:TERM.LSN.
func handleKey(id uint64, attempt uint32, st claimStamp) string {
	return fmt.Sprintf("%d:%d:%d.%d", id, attempt, st.term, st.lsn)
}

// op is one client operation. Times are nanoseconds since the history's
// start (monotonic).
type op struct {
	kind      opKind
	client    int
	call, ret int64
	out       outcome
	payload   string     // enqueue: its payload; ack: the claimed job's; get: the one acknowledged for id
	id        uint64     // enqueue ok: the id given; ack, get: the id asked for
	attempt   uint32     // ack: the handle's attempt
	stamp     claimStamp // ack: the handle's claim stamp
	found     bool       // get: a job with that id exists
	got       string     // get: its payload
	jobs      []claimed
	peer      string // who answered
	err       string
	// enqueue: submitted with an idempotency key (the payload), which the
	// client repeats itself while the outcome is unknown; dedup: the
	// answer named an earlier attempt's job.
	keyed, dedup bool
}

// history is the log of every reply, safe for concurrent use.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []op
	// acked enqueues, for the reader to pick from
	ackedIDs []claimed
	// enqueues acknowledged minus jobs acknowledged done by a worker
	live atomic.Int64
}

func newHistory() *history { return &history{start: time.Now()} }

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(o op) {
	h.mu.Lock()
	h.ops = append(h.ops, o)
	if o.kind == opEnqueue && o.out == outOK {
		h.ackedIDs = append(h.ackedIDs, claimed{id: o.id, payload: o.payload})
		h.live.Add(1)
	}
	if o.kind == opAck && o.out == outOK {
		h.live.Add(-1)
	}
	h.mu.Unlock()
}

func (h *history) snapshot() []op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]op(nil), h.ops...)
}

// count is the number of operations of kind with outcome out returned at
// or after since (nanoseconds of the history); peer "" is any peer.
func (h *history) count(kind opKind, out outcome, since int64, peer string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for i := range h.ops {
		o := &h.ops[i]
		if o.kind == kind && o.out == out && o.ret >= since && (peer == "" || o.peer == peer) {
			n++
		}
	}
	return n
}

// maxGap is the longest stretch within [from, to] (history times) with
// no enqueue acknowledged.
func (h *history) maxGap(from, to int64) time.Duration {
	h.mu.Lock()
	var at []int64
	for i := range h.ops {
		if o := &h.ops[i]; o.kind == opEnqueue && o.out == outOK && o.ret >= from && o.ret <= to {
			at = append(at, o.ret)
		}
	}
	h.mu.Unlock()
	slices.Sort(at)
	gap, last := int64(0), from
	for _, a := range at {
		gap = max(gap, a-last)
		last = a
	}
	return time.Duration(max(gap, to-last))
}

func (h *history) randomAcked(rng *rand.Rand) (claimed, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ackedIDs) == 0 {
		return claimed{}, false
	}
	// Mostly recent ones: those are the ones a fault puts at risk.
	n := len(h.ackedIDs)
	k := n - 1 - rng.IntN(min(n, 200))
	if rng.IntN(4) == 0 {
		k = rng.IntN(n)
	}
	return h.ackedIDs[k], true
}

// classifyErr maps a package client error to an outcome. Only the answers that
// say nothing was applied are failures; anything else (unknown outcome, a
// timeout, a cancelled context, an error this harness does not know) is
// unknown, so that it can never be counted as lost.
func classifyErr(err error) outcome {
	var ne *client.NodeError
	switch {
	case err == nil:
		return outOK
	case errors.Is(err, client.ErrOutcomeUnknown):
		return outUnknown
	case errors.Is(err, client.ErrNoPrimary), errors.As(err, &ne):
		return outFail
	default:
		return outUnknown
	}
}

// ---- the load ----

type loadOpts struct {
	tag       string   // payload prefix, unique per run
	queues    []string // the producers spread over these
	producers int
	workers   int           // claim, hold, ack
	readers   int           // get an acknowledged job back
	budget    int64         // at most this many enqueue attempts in all
	timeout   time.Duration // per answer (client.Options.Timeout)
	backoff   time.Duration // pause after a failed or unknown operation
	hold      time.Duration // a worker holds a claim up to this long before acking
	claimMax  int           // jobs per claim (default 4)
	pace      time.Duration // a producer waits this long between enqueues (0: none)
	maxLive   int64         // producers wait while this many acknowledged jobs are not done (0: no limit)
}

// load runs the clients until stop (or its budget); every client loop is
// bounded in count (budget) and time (stop, then a cancelled context).
type load struct {
	h       *history
	opts    loadOpts
	stopped chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	sent    atomic.Int64
	once    sync.Once
}

func startLoad(peers string, mat *tlsconf.Material, o loadOpts) (*load, error) {
	if o.timeout == 0 {
		o.timeout = 3 * time.Second
	}
	if o.backoff == 0 {
		o.backoff = 30 * time.Millisecond
	}
	if o.hold == 0 {
		o.hold = 400 * time.Millisecond
	}
	if o.claimMax == 0 {
		o.claimMax = 4
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{h: newHistory(), opts: o, stopped: make(chan struct{}), cancel: cancel}
	// Every client first, so that a bad peers string starts nothing.
	n := o.producers + o.workers + o.readers
	doers := make([]*jobDoer, n)
	for id := range doers {
		var err error
		if doers[id], err = newDoer(peers, mat, o.timeout); err != nil {
			cancel()
			return nil, err
		}
	}
	l.wg.Add(n)
	for id, jc := range doers {
		switch {
		case id < o.producers:
			go l.producer(ctx, id, jc)
		case id < o.producers+o.workers:
			go l.worker(ctx, id, jc, o.queues[(id-o.producers)%len(o.queues)])
		default:
			go l.reader(ctx, id, jc)
		}
	}
	return l, nil
}

func closeDoer(d *jobDoer) { d.Close() }

func (l *load) running() bool {
	select {
	case <-l.stopped:
		return false
	default:
		return true
	}
}

// pause sleeps d unless the load stops first.
func (l *load) pause(d time.Duration) {
	select {
	case <-l.stopped:
	case <-time.After(d):
	}
}

// Stop ends every client: no new operation starts; one in flight gets
// 10 s (its per-node timeouts) and is then cancelled (outcome unknown).
func (l *load) Stop() *history {
	l.once.Do(func() {
		close(l.stopped)
		done := make(chan struct{})
		go func() { l.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			l.cancel()
			<-done
		}
		l.cancel()
	})
	return l.h
}

func (l *load) producer(ctx context.Context, client int, jc *jobDoer) {
	defer l.wg.Done()
	defer closeDoer(jc)
	for seq := 0; l.running(); seq++ {
		for l.opts.maxLive > 0 && l.h.live.Load() >= l.opts.maxLive && l.running() {
			l.pause(50 * time.Millisecond) // keep the job state small enough to replicate
		}
		if l.sent.Add(1) > l.opts.budget {
			return
		}
		payload := fmt.Sprintf("%s-p%02d-%06d", l.opts.tag, client, seq)
		queue := l.opts.queues[seq%len(l.opts.queues)]
		// Odd producers key their submits (the key is the payload): the
		// client repeats one whose outcome is unknown, and the checker's
		// "applied twice" is then "two jobs for one key".
		o := op{kind: opEnqueue, client: client, payload: payload, call: l.h.now(), keyed: client%2 == 1}
		req := &schema.SubmitRequest{Queue: queue, Payload: []byte(payload)}
		if o.keyed {
			req.IdempotencyKey = payload
		}
		res, err := jc.Do(ctx, req)
		o.ret, o.out = l.h.now(), classifyErr(err)
		switch {
		case err != nil:
			o.err = err.Error()
		case slices.Equal(res.Reply.GetDeduplicated(), []bool{true}) && len(res.Reply.GetIds()) == 1 && res.Reply.GetIds()[0] != 0:
			// An earlier attempt's job: the answer names it by id alone.
			o.id, o.peer, o.dedup = res.Reply.GetIds()[0], res.Peer, true
		case len(res.Reply.GetJobs()) != 1 || res.Reply.GetJobs()[0].GetId() == 0 || res.Reply.GetJobs()[0].GetQueue() != queue:
			// An ok reply that does not name our job (a submit's reply
			// is the new job without its payload): count it as unknown
			// (never as lost) and keep it visible.
			o.out, o.err, o.peer = outUnknown, fmt.Sprintf("ok reply without the job: %v", res.Reply), res.Peer
		default:
			o.id, o.peer = res.Reply.GetJobs()[0].GetId(), res.Peer
		}
		l.h.add(o)
		if o.out != outOK {
			l.pause(l.opts.backoff)
		} else if l.opts.pace > 0 {
			l.pause(l.opts.pace)
		}
	}
}

func (l *load) worker(ctx context.Context, client int, jc *jobDoer, queue string) {
	defer l.wg.Done()
	defer closeDoer(jc)
	rng := rand.New(rand.NewPCG(uint64(client), uint64(time.Now().UnixNano())))
	var carried []claimed // acked on the next claim (ClaimRequest.ack)
	for l.running() {
		o := op{kind: opClaim, client: client, call: l.h.now()}
		res, err := jc.Do(ctx, &schema.ClaimRequest{Queue: queue, Host: "node001", Max: uint32(l.opts.claimMax), Ack: claimedHandles(carried)})
		o.ret, o.out = l.h.now(), classifyErr(err)
		if err != nil {
			o.err = err.Error()
		} else {
			o.peer = res.Peer
			for _, j := range res.Reply.GetJobs() {
				o.jobs = append(o.jobs, claimed{id: j.GetId(), attempt: j.GetClaims(), stamp: claimStamp{j.GetClaimTerm(), j.GetClaimLsn()}, payload: string(j.GetPayload())})
			}
		}
		l.h.add(o)
		l.addAcks(client, carried, o.call, res, err)
		carried = nil
		if len(o.jobs) == 0 {
			l.pause(l.opts.backoff + 20*time.Millisecond)
			continue
		}
		// Hold the claim a while, so that acks straddle the faults.
		l.pause(time.Duration(rng.Int64N(int64(l.opts.hold) + 1)))
		if rng.IntN(2) == 0 {
			carried = o.jobs // a worker's usual way: acked by its next claim
			continue
		}
		call := l.h.now()
		res, err = jc.Do(ctx, &schema.AckBatchRequest{Handles: claimedHandles(o.jobs)})
		l.addAcks(client, o.jobs, call, res, err)
		if err != nil {
			l.pause(l.opts.backoff)
		}
	}
	if len(carried) > 0 { // the run ends: ack what the next claim would have
		call := l.h.now()
		res, err := jc.Do(context.WithoutCancel(ctx), &schema.AckBatchRequest{Handles: claimedHandles(carried)})
		l.addAcks(client, carried, call, res, err)
	}
}

// claimedHandles is the handles of the claimed jobs js (nil for none).
func claimedHandles(js []claimed) []*schema.WalHandle {
	var hs []*schema.WalHandle
	for _, j := range js {
		hs = append(hs, &schema.WalHandle{Id: j.id, Attempt: j.attempt, ClaimTerm: j.stamp.term, ClaimLsn: j.stamp.lsn})
	}
	return hs
}

// addAcks records the acks of js sent at call (in an ack batch, or
// carried on a claim) with the call's result: each handle's from the
// reply's oks.
func (l *load) addAcks(client int, js []claimed, call int64, res *jobResult, err error) {
	ret, out := l.h.now(), classifyErr(err)
	for i, j := range js {
		a := op{kind: opAck, client: client, call: call, ret: ret, out: out, payload: j.payload, id: j.id, attempt: j.attempt, stamp: j.stamp}
		if err != nil {
			a.err = err.Error()
		} else {
			a.peer = res.Peer
			if oks := res.Reply.GetOks(); i >= len(oks) || !oks[i] {
				a.out = outFail // refused: the claim is not valid there
			}
		}
		l.h.add(a)
	}
}

func (l *load) reader(ctx context.Context, client int, jc *jobDoer) {
	defer l.wg.Done()
	defer closeDoer(jc)
	rng := rand.New(rand.NewPCG(uint64(client), uint64(time.Now().UnixNano())))
	for l.running() {
		want, ok := l.h.randomAcked(rng)
		if !ok {
			l.pause(50 * time.Millisecond)
			continue
		}
		o := op{kind: opGet, client: client, id: want.id, payload: want.payload, call: l.h.now()}
		res, err := jc.Do(ctx, &schema.GetRequest{Id: want.id})
		o.ret = l.h.now()
		switch {
		case connect.CodeOf(err) == connect.CodeNotFound: // answered: not there
		case err != nil:
			o.out, o.err = outUnknown, err.Error() // a read without an answer says nothing
		default:
			o.peer = res.Peer
			if js := res.Reply.GetJobs(); len(js) > 0 {
				o.found, o.got = true, string(js[0].GetPayload())
			}
		}
		l.h.add(o)
		l.pause(20 * time.Millisecond)
	}
}
