package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// queueDoor is a fake node's door backed by a real queue (sm/queue) on
// the wall clock: claims (with their acks), acks, heartbeats, retries
// and fails as the primary applies them, and a long poll that answers
// empty after a short sleep (it cannot see the client leave, so it never
// claims after waiting).
type queueDoor struct {
	mu          sync.Mutex
	q           *queue.Queues
	lsn         uint64
	st          queue.Stamps
	refuseHB    bool           // heartbeats refused (the claim "lapsed")
	kinds       map[string]int // requests seen per kind
	retryText   []string
	acksOnClaim int
}

func newQueueDoor(st queue.Stamps) *queueDoor {
	return &queueDoor{q: queue.New(), st: st, kinds: map[string]int{}}
}

func (d *queueDoor) submit(t *testing.T, payloads ...string) []uint64 {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []uint64
	for _, p := range payloads {
		j, err := d.q.Enqueue(time.Now().Unix(), "q", []byte(p), d.st, queue.EnqueueOpts{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

func (d *queueDoor) count(kind string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.kinds[kind]
}

func (d *queueDoor) get(id uint64) (queue.Job, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.q.Get(id)
}

func (d *queueDoor) answer(req *wire.Request) *wire.Reply {
	if req.Job == nil {
		return &wire.Reply{Job: &sm.Reply{OK: true}} // a new connection's status check
	}
	jr := req.Job
	d.mu.Lock()
	defer d.mu.Unlock()
	d.kinds[jr.Kind.String()]++
	now := time.Now().Unix()
	d.lsn++
	rep := &sm.Reply{LSN: d.lsn, At: now}
	switch jr.Kind {
	case sm.JobClaim:
		if jr.Queue != "q" {
			return &wire.Reply{Status: sm.StatusEINVAL, Error: fmt.Sprintf("unknown queue %q", jr.Queue)}
		}
		d.acksOnClaim += len(jr.Handles)
		rep.OKs = d.q.AckBatch(now, jr.Handles)
		rep.Jobs = d.q.ClaimBatch(now, "q", jr.Host, jr.Max, queue.ClaimStamp{Term: 1, LSN: d.lsn})
		if len(rep.Jobs) == 0 && jr.Wait > 0 {
			d.mu.Unlock()
			time.Sleep(min(jr.Wait, 20*time.Millisecond))
			d.mu.Lock()
		}
	case sm.JobAck:
		rep.OK = d.q.Ack(now, jr.Handle)
	case sm.JobAckBatch:
		rep.OKs = d.q.AckBatch(now, jr.Handles)
	case sm.JobHeartbeat:
		rep.OK = !d.refuseHB && d.q.Heartbeat(now, jr.Handle)
	case sm.JobRetry:
		d.retryText = append(d.retryText, jr.Error)
		rep.OK = d.q.Retry(now, jr.Handle, jr.Error)
	case sm.JobFail:
		rep.OK = d.q.Fail(now, jr.Handle, jr.Error)
	default:
		return &wire.Reply{Status: sm.StatusEINVAL, Error: "the fake does not serve " + jr.Kind.String()}
	}
	return &wire.Reply{Job: rep}
}

// results collects a Runner's OnResult calls.
type results struct {
	mu  sync.Mutex
	all []client.Result
	ch  chan client.Result
}

func newResults() *results { return &results{ch: make(chan client.Result, 1000)} }

func (r *results) add(x client.Result) {
	r.mu.Lock()
	r.all = append(r.all, x)
	r.mu.Unlock()
	r.ch <- x
}

// wait waits for n results.
func (r *results) wait(t *testing.T, n int, within time.Duration) []client.Result {
	t.Helper()
	deadline := time.After(within)
	var got []client.Result
	for len(got) < n {
		select {
		case x := <-r.ch:
			got = append(got, x)
		case <-deadline:
			t.Fatalf("%d of %d results within %v: %v", len(got), n, within, got)
		}
	}
	return got
}

// run is a Runner's Run in the background.
type run struct {
	finished chan struct{} // closed when Run returned
	err      error         // Run's result, once finished
}

func startRunner(t *testing.T, d *queueDoor, opt client.RunnerOptions, h client.Handler) (*results, context.CancelFunc, *run) {
	t.Helper()
	f := startFake(t, true)
	f.c.Nodes[0].Set(d.answer)
	cl := newClient(t, f.peers(), f.mat, client.Options{})
	res := newResults()
	opt.Host = "h"
	opt.OnResult = res.add
	r, err := client.NewRunner(cl, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Handle("q", h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rn := &run{finished: make(chan struct{})}
	go func() { rn.err = r.Run(ctx); close(rn.finished) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-rn.finished:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10 s of the cancel")
		}
	})
	return res, cancel, rn
}

func waitRun(t *testing.T, rn *run, within time.Duration) error {
	t.Helper()
	select {
	case <-rn.finished:
		return rn.err
	case <-time.After(within):
		t.Fatalf("Run did not return within %v", within)
		return nil
	}
}

// Every job is worked and settled by its handler's result: nil acked
// (on the next claim), an error retried with its text and acked on the
// next attempt, a panic retried the same way, FailJob dead-lettered; at
// most Concurrency handlers at once, and more than one.
func TestRunnerSettlesByResult(t *testing.T) {
	d := newQueueDoor(queue.Stamps{VisibilityTimeoutS: 30, MaxAttempts: 3})
	var payloads []string
	for k := range 16 {
		payloads = append(payloads, fmt.Sprintf("ok %d", k))
	}
	payloads = append(payloads, "flaky", "panic", "fatal")
	ids := d.submit(t, payloads...)
	var running, peak atomic.Int32
	var mu sync.Mutex
	runs := map[uint64]int{}
	h := func(ctx context.Context, j *client.Job) error {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		mu.Lock()
		runs[j.ID]++
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		switch p := string(j.Payload); {
		case p == "flaky" && j.Attempt == 1:
			return errors.New("flaky the first time")
		case p == "panic" && j.Attempt == 1:
			panic("boom " + strings.Repeat("x", 3000))
		case p == "fatal":
			return client.FailJob(errors.New("cannot ever do it"))
		}
		return nil
	}
	res, cancel, done := startRunner(t, d, client.RunnerOptions{Concurrency: 4, Wait: time.Second}, h)
	// 16 + 2 acked, 2 retried, 1 failed.
	got := res.wait(t, 21, 20*time.Second)
	cancel()
	if err := waitRun(t, done, 10*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	count := map[client.Outcome]int{}
	for _, x := range got {
		count[x.Outcome]++
	}
	if count[client.Acked] != 18 || count[client.Retried] != 2 || count[client.Failed] != 1 {
		t.Fatalf("outcomes %v: want 18 acked, 2 retried, 1 failed", count)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, id := range ids {
		j, ok := d.get(id)
		want := 1
		switch payloads[i] {
		case "flaky", "panic":
			want = 2
		}
		if runs[id] != want {
			t.Errorf("job %d (%s) ran %d times, want %d", id, payloads[i], runs[id], want)
		}
		if payloads[i] == "fatal" {
			if !ok || j.State != queue.Dead || j.LastError != "cannot ever do it" {
				t.Errorf("the failed job: %+v (found %v), want dead with its error", j, ok)
			}
			continue
		}
		if ok {
			t.Errorf("job %d (%s) still in the queue: %+v", id, payloads[i], j)
		}
	}
	if p := peak.Load(); p > 4 || p < 2 {
		t.Errorf("at most %d handlers at once, want 2..4", p)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.retryText) != 2 || !slicesHas(d.retryText, "flaky the first time") {
		t.Errorf("retry texts %q", d.retryText)
	}
	for _, s := range d.retryText {
		if len(s) > client.MaxRetryText {
			t.Errorf("a retry text of %d bytes, above %d", len(s), client.MaxRetryText)
		}
		if !strings.HasPrefix(s, "panic: boom xxx") && s != "flaky the first time" {
			t.Errorf("retry text %.60q: want the panic's value", s)
		}
	}
	// The acks rode on the claims: every result came before the
	// shutdown, so no ack was left for a last AckBatch.
	if d.acksOnClaim != 18 || d.kinds["ack-batch"] != 0 || d.kinds["ack"] != 0 {
		t.Errorf("%d acks on claims, %d ack batches, %d acks: want the 18 acks on the claims", d.acksOnClaim, d.kinds["ack-batch"], d.kinds["ack"])
	}
}

func slicesHas(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// A handler that runs longer than the lease keeps its claim through
// heartbeats, and its job is acked once.
func TestRunnerHeartbeatsKeepTheClaim(t *testing.T) {
	d := newQueueDoor(queue.Stamps{VisibilityTimeoutS: 2, MaxAttempts: 3})
	id := d.submit(t, "slow")[0]
	var runs atomic.Int32
	res, _, _ := startRunner(t, d, client.RunnerOptions{Wait: time.Second}, func(ctx context.Context, j *client.Job) error {
		runs.Add(1)
		if j.Lease != 2*time.Second {
			return fmt.Errorf("lease %v, want 2s", j.Lease)
		}
		select {
		case <-time.After(5 * time.Second):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	got := res.wait(t, 1, 15*time.Second)
	if got[0].Outcome != client.Acked || runs.Load() != 1 {
		t.Fatalf("result %v after %d runs: want acked after one", got[0], runs.Load())
	}
	if _, ok := d.get(id); ok {
		t.Fatal("the job is still queued after its ack")
	}
	if n := d.count("heartbeat"); n < 5 {
		t.Fatalf("%d heartbeats in 5 s with a 2 s lease, want a heartbeat every 2/3 s", n)
	}
}

// A heartbeat refused (the claim is gone) cancels the handler's context,
// and the job is neither acked nor retried by this worker.
func TestRunnerLostClaimCancelsTheHandler(t *testing.T) {
	d := newQueueDoor(queue.Stamps{VisibilityTimeoutS: 30, MaxAttempts: 3})
	d.refuseHB = true
	d.submit(t, "x")
	cause := make(chan error, 1)
	res, _, _ := startRunner(t, d, client.RunnerOptions{Wait: time.Second, HeartbeatInterval: 100 * time.Millisecond},
		func(ctx context.Context, j *client.Job) error {
			<-ctx.Done()
			cause <- ctx.Err()
			return nil // ignored: the claim is not ours any more
		})
	got := res.wait(t, 1, 10*time.Second)
	if got[0].Outcome != client.ClaimLost || !errors.Is(<-cause, context.Canceled) {
		t.Fatalf("result %v: want the claim lost and the handler cancelled", got[0])
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := d.kinds["retry"] + d.kinds["ack-batch"] + d.kinds["fail"]; n != 0 || d.acksOnClaim != 0 {
		t.Fatalf("%d settling calls and %d acks for a lost claim, want none", n, d.acksOnClaim)
	}
}

// Shutdown: claiming stops at once, a running handler finishing within
// the drain deadline is acked (in a last AckBatch), and Run returns nil.
func TestRunnerDrainLetsTheHandlerFinish(t *testing.T) {
	d := newQueueDoor(queue.Stamps{VisibilityTimeoutS: 30, MaxAttempts: 3})
	id := d.submit(t, "x")[0]
	started := make(chan struct{})
	res, cancel, done := startRunner(t, d, client.RunnerOptions{Wait: time.Second, DrainTimeout: 10 * time.Second},
		func(ctx context.Context, j *client.Job) error {
			close(started)
			time.Sleep(500 * time.Millisecond)
			return ctx.Err() // not cancelled: the drain lets it finish
		})
	<-started
	cancel()
	claims := d.count("claim")
	if err := waitRun(t, done, 10*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := res.wait(t, 1, time.Second)
	if got[0].Outcome != client.Acked || d.count("ack-batch") != 1 {
		t.Fatalf("result %v, %d ack batches: want acked by the last AckBatch", got[0], d.count("ack-batch"))
	}
	if _, ok := d.get(id); ok {
		t.Fatal("the job is still queued after its ack")
	}
	if n := d.count("claim"); n != claims {
		t.Fatalf("%d claims after the shutdown began, want none", n-claims)
	}
}

// Shutdown past the drain deadline: the handler's context is cancelled,
// its job handed back with Retry (released), and Run returns even though
// the handler ignores its context.
func TestRunnerDrainDeadlineReleases(t *testing.T) {
	d := newQueueDoor(queue.Stamps{VisibilityTimeoutS: 30, MaxAttempts: 3})
	id := d.submit(t, "x")[0]
	started := make(chan struct{})
	unblock := make(chan struct{})
	defer close(unblock)
	res, cancel, done := startRunner(t, d, client.RunnerOptions{Wait: time.Second, DrainTimeout: 300 * time.Millisecond},
		func(ctx context.Context, j *client.Job) error {
			close(started)
			<-unblock // ignores ctx
			return nil
		})
	<-started
	t0 := time.Now()
	cancel()
	if err := waitRun(t, done, 5*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if el := time.Since(t0); el < 300*time.Millisecond {
		t.Fatalf("Run returned %v after the cancel, before the drain deadline", el)
	}
	got := res.wait(t, 1, time.Second)
	if got[0].Outcome != client.Released {
		t.Fatalf("result %v, want released", got[0])
	}
	j, ok := d.get(id)
	if !ok || j.State != queue.Pending || !strings.Contains(j.LastError, "drain deadline") {
		t.Fatalf("job %+v (found %v): want pending again with the release's text", j, ok)
	}
}

// A claim the node refuses for good (an unknown queue) ends Run with an
// error naming the queue.
func TestRunnerUnknownQueueEndsRun(t *testing.T) {
	d := newQueueDoor(queue.Stamps{VisibilityTimeoutS: 30, MaxAttempts: 3})
	f := startFake(t, true)
	f.c.Nodes[0].Set(d.answer)
	cl := newClient(t, f.peers(), f.mat, client.Options{})
	r, err := client.NewRunner(cl, client.RunnerOptions{Host: "h", Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Handle("nope", func(context.Context, *client.Job) error { return nil }); err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), `unknown queue "nope"`) || !strings.Contains(err.Error(), `claim of queue "nope"`) {
		t.Fatalf("Run: %v; want the unknown queue named", err)
	}
	if err := r.Run(context.Background()); err == nil {
		t.Fatal("a second Run was accepted")
	}
}

// Bad options and registrations are definite errors.
func TestRunnerRefusesBadSetup(t *testing.T) {
	f := startFake(t, true)
	cl := newClient(t, f.peers(), f.mat, client.Options{})
	for _, c := range []struct {
		opt  client.RunnerOptions
		want string
	}{
		{client.RunnerOptions{}, "Host is empty"},
		{client.RunnerOptions{Host: "h", Concurrency: -1}, "Concurrency -1"},
		{client.RunnerOptions{Host: "h", Wait: 21 * time.Second}, "Wait 21s outside"},
		{client.RunnerOptions{Host: "h", DrainTimeout: -time.Second}, "DrainTimeout -1s"},
		{client.RunnerOptions{Host: "h", HeartbeatInterval: -time.Second}, "HeartbeatInterval -1s"},
	} {
		if _, err := client.NewRunner(cl, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewRunner(%+v): %v, want %q", c.opt, err, c.want)
		}
	}
	r, err := client.NewRunner(cl, client.RunnerOptions{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "without a handler") {
		t.Errorf("Run without handlers: %v", err)
	}
	r, _ = client.NewRunner(cl, client.RunnerOptions{Host: "h"})
	h := func(context.Context, *client.Job) error { return nil }
	if err := r.Handle("q", h); err != nil {
		t.Fatal(err)
	}
	if err := r.Handle("q", h); err == nil || !strings.Contains(err.Error(), "has a handler already") {
		t.Errorf("a second handler for q: %v", err)
	}
	if err := r.Handle("", h); err == nil {
		t.Error("an empty queue name was accepted")
	}
	if err := r.Handle("r", nil); err == nil {
		t.Error("a nil handler was accepted")
	}
	if client.FailJob(nil) != nil {
		t.Error("FailJob(nil) is not nil")
	}
}
