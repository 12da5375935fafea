package queue

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The seed 000 contract properties as readable scenarios; the state-machine
// test covers them (and their interleavings) at random.

const t0 = int64(1_700_000_000)

func mustEnqueue(t *testing.T, q *Queues, now int64, queue string, st Stamps, o EnqueueOpts) Job {
	t.Helper()
	j, err := q.Enqueue(now, queue, []byte("x"), st, o)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// stampAt is the claim stamp the scenario tests give a claim at now: a
// record of term 1 at LSN now (one record per second is enough here).
func stampAt(now int64) ClaimStamp { return ClaimStamp{Term: 1, LSN: uint64(now)} }

func claimOne(t *testing.T, q *Queues, now int64, host string) Job {
	t.Helper()
	got := q.ClaimBatch(now, "a", host, 1, stampAt(now))
	if len(got) != 1 {
		t.Fatalf("claim by %s at %d: got %d jobs", host, now, len(got))
	}
	return got[0]
}

func TestEnqueueResolution(t *testing.T) {
	q := New()
	st := testStamps
	for _, c := range []struct {
		name        string
		o           EnqueueOpts
		runAt, expA int64
	}{
		{"now", EnqueueOpts{}, t0, 0},
		{"delay", EnqueueOpts{Delay: 10}, t0 + 10, 0},
		{"run_at", EnqueueOpts{RunAt: t0 + 30}, t0 + 30, 0},
		{"delay wins over run_at", EnqueueOpts{Delay: 10, RunAt: t0 + 30}, t0 + 10, 0},
		{"run_at in the past is now", EnqueueOpts{RunAt: t0 - 30}, t0, 0},
		{"expires is relative to now", EnqueueOpts{Delay: 10, Expires: 60}, t0 + 10, t0 + 60},
	} {
		j := mustEnqueue(t, q, t0, "a", st, c.o)
		if j.RunAt != c.runAt || j.ExpiresAt != c.expA || j.EnqueuedAt != t0 || j.State != Pending || j.Stamps != st {
			t.Errorf("%s: %+v", c.name, j)
		}
	}
	for _, c := range []struct {
		queue string
		st    Stamps
		o     EnqueueOpts
		want  error
	}{
		{"", st, EnqueueOpts{}, ErrEmptyQueueName},
		{"a", Stamps{VisibilityTimeoutS: 1}, EnqueueOpts{}, ErrBadStamps},
		{"a", Stamps{MaxAttempts: 1}, EnqueueOpts{}, ErrBadStamps},
		{"a", st, EnqueueOpts{Delay: -1}, ErrBadOpts},
		{"a", st, EnqueueOpts{Expires: -1}, ErrBadOpts},
	} {
		if _, err := q.Enqueue(t0, c.queue, nil, c.st, c.o); !errors.Is(err, c.want) {
			t.Errorf("Enqueue(%q, %+v, %+v) = %v, want %v", c.queue, c.st, c.o, err, c.want)
		}
	}
}

func TestClaimOrder(t *testing.T) {
	q := New()
	st := testStamps
	a := mustEnqueue(t, q, t0, "a", st, EnqueueOpts{Priority: 1})
	b := mustEnqueue(t, q, t0, "a", st, EnqueueOpts{Priority: 5, RunAt: t0 + 2})
	c := mustEnqueue(t, q, t0, "a", st, EnqueueOpts{Priority: 1, Delay: 1})
	d := mustEnqueue(t, q, t0, "a", st, EnqueueOpts{Priority: 1})
	e := mustEnqueue(t, q, t0, "a", st, EnqueueOpts{Priority: 9, Delay: 100}) // not ready
	f := mustEnqueue(t, q, t0, "a", st, EnqueueOpts{Priority: 9, Host: "h2"}) // pinned elsewhere
	mustEnqueue(t, q, t0, "b", st, EnqueueOpts{Priority: 9})                  // other queue
	got := q.ClaimBatch(t0+2, "a", "h1", 10, stampAt(t0+2))
	var ids []uint64
	for _, j := range got {
		ids = append(ids, j.ID)
	}
	if want := []uint64{b.ID, a.ID, d.ID, c.ID}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("claim order %v, want %v (priority desc, ready time asc, seq asc)", ids, want)
	}
	_ = e
	if got := q.ClaimBatch(t0+2, "a", "h2", 10, stampAt(t0+2)); len(got) != 1 || got[0].ID != f.ID {
		t.Fatalf("pinned job: %+v", got)
	}
	if q.ClaimBatch(t0+2, "a", "", 10, stampAt(t0+2)) != nil || q.ClaimBatch(t0+2, "a", "h1", 0, stampAt(t0+2)) != nil {
		t.Fatal("claim without a host or with max 0 not refused")
	}
}

// TestZombie: a processing job whose claim lapsed with its attempts
// exhausted ends Dead on the next claim or sweep; it is never handed out.
func TestZombie(t *testing.T) {
	st := Stamps{VisibilityTimeoutS: 10, MaxAttempts: 1}
	for _, via := range []string{"claim", "sweep"} {
		q := New()
		j := mustEnqueue(t, q, t0, "a", st, EnqueueOpts{})
		claimOne(t, q, t0, "h1")
		now := t0 + 10 // lapsed
		switch via {
		case "claim":
			if got := q.ClaimBatch(now, "a", "h2", 5, stampAt(now)); len(got) != 0 {
				t.Fatalf("zombie handed out: %+v", got)
			}
		case "sweep":
			if moved, _ := q.SweepExpired(now); moved != 1 {
				t.Fatalf("sweep moved %d", moved)
			}
		}
		g, ok := q.Get(j.ID)
		if !ok || g.State != Dead || g.LastError != ErrMsgExhausted || g.DiedAt != now || g.Host != "h1" || g.Attempts != 1 {
			t.Fatalf("%s: zombie ended as %+v", via, g)
		}
	}
}

// TestAckVersusReclaim: after a claim lapses and another host reclaims the
// job, the first host's ack is refused, the second's succeeds; the reclaim
// consumed an attempt.
func TestAckVersusReclaim(t *testing.T) {
	q := New()
	mustEnqueue(t, q, t0, "a", testStamps, EnqueueOpts{})
	first := claimOne(t, q, t0, "h1")
	second := claimOne(t, q, t0+30, "h2")
	if second.Attempts != 2 || second.Host != "h2" || second.ClaimExpiresAt != t0+60 {
		t.Fatalf("reclaim: %+v", second)
	}
	if q.Ack(t0+31, first.Handle()) {
		t.Fatal("ack with the lapsed, reclaimed handle accepted")
	}
	if !q.Ack(t0+31, second.Handle()) {
		t.Fatal("ack of the current claim refused")
	}
	if _, ok := q.Get(first.ID); ok {
		t.Fatal("acked job still there")
	}
}

// TestLapsedRefusals: all four handle ops refuse a lapsed claim (now ==
// ClaimExpiresAt) as a value, and change nothing.
func TestLapsedRefusals(t *testing.T) {
	q := New()
	mustEnqueue(t, q, t0, "a", testStamps, EnqueueOpts{})
	j := claimOne(t, q, t0, "h1")
	before := q.Export()
	h, at := j.Handle(), j.ClaimExpiresAt
	if q.Ack(at, h) || q.Heartbeat(at, h) || q.Retry(at, h, "e") || q.Fail(at, h, "e") {
		t.Fatal("a lapsed claim was honoured")
	}
	if !reflect.DeepEqual(q.AckBatch(at, []Handle{h, h}), []bool{false, false}) {
		t.Fatal("AckBatch honoured a lapsed claim")
	}
	if !reflect.DeepEqual(before, q.Export()) {
		t.Fatal("a refusal changed the state")
	}
	if !q.Heartbeat(at-1, h) {
		t.Fatal("heartbeat one second before the deadline refused")
	}
}

// TestRedriveHandle: a handle from before a redrive never matches a claim
// after it, though Attempts restarts from 0.
func TestRedriveHandle(t *testing.T) {
	q := New()
	mustEnqueue(t, q, t0, "a", testStamps, EnqueueOpts{})
	old := claimOne(t, q, t0, "h1")
	if !q.Fail(t0+1, old.Handle(), "") || !q.Redrive(t0+2, old.ID) {
		t.Fatal("fail/redrive")
	}
	again := claimOne(t, q, t0+3, "h2")
	if again.Attempts != old.Attempts || again.Claims != 2 {
		t.Fatalf("after redrive: %+v", again)
	}
	if q.Ack(t0+4, old.Handle()) || q.Ack(t0+4, Handle{ID: old.ID, Attempt: again.Attempts}) {
		t.Fatal("a handle from before the redrive acked the new claim")
	}
	if !q.Ack(t0+4, again.Handle()) {
		t.Fatal("current claim refused")
	}
}

// TestDeadVisibility: Get shows a dead job with every field.
func TestDeadVisibility(t *testing.T) {
	q := New()
	st := Stamps{VisibilityTimeoutS: 10, MaxAttempts: 2, BackoffBaseS: 3, DeadLetterRetentionS: 100}
	j := mustEnqueue(t, q, t0, "a", st, EnqueueOpts{Priority: 4, Expires: 500, Resource: 7})
	c := claimOne(t, q, t0+1, "h1")
	q.Retry(t0+2, c.Handle(), "first")
	c = claimOne(t, q, t0+5, "h2")
	if !q.Heartbeat(t0+6, c.Handle()) || !q.Retry(t0+7, c.Handle(), "second") {
		t.Fatal("heartbeat/retry")
	}
	want := Job{ID: j.ID, Queue: "a", Payload: []byte("x"), Priority: 4, State: Dead, RunAt: t0 + 5,
		Seq: j.Seq, EnqueuedAt: t0, ExpiresAt: t0 + 500, Attempts: 2, Stamps: st, Host: "h2", Resource: 7,
		ClaimedAt: t0 + 5, ClaimExpiresAt: t0 + 16, LastError: ErrMsgExhausted, DiedAt: t0 + 7, Claims: 2, Claim: stampAt(t0 + 5)}
	if g, ok := q.Get(j.ID); !ok || !reflect.DeepEqual(g, want) {
		t.Fatalf("dead job\n got %+v\nwant %+v", g, want)
	}
	if _, deleted := q.SweepExpired(t0 + 106); deleted != 0 {
		t.Fatal("deleted before retention")
	}
	if _, deleted := q.SweepExpired(t0 + 107); deleted != 1 {
		t.Fatal("not deleted at retention")
	}
}

// TestRetryBackoff: the ceiling doubles per attempt and never overflows;
// the jittered delay is pinned for a few jobs (the values computed by an
// independent implementation of the documented formula), and stays
// within the ceiling's upper half.
func TestRetryBackoff(t *testing.T) {
	for _, c := range []struct {
		base, attempts uint32
		want           int64
	}{
		{0, 5, 0}, {3, 1, 3}, {3, 2, 6}, {3, 4, 24},
		{1, 31, 1 << 30}, {1, 1000, 1 << 30}, {1<<32 - 1, 1<<32 - 1, (1<<32 - 1) << 30},
	} {
		if got := backoffCeiling(c.base, c.attempts); got != c.want {
			t.Errorf("backoffCeiling(%d, %d) = %d, want %d", c.base, c.attempts, got, c.want)
		}
	}
	for _, c := range []struct {
		base, attempts uint32
		id             uint64
		draw           uint64
		want           int64
	}{
		{0, 5, 1, 8195237237126968761, 0},
		{1, 1, 1, 10451216379200822465, 1},
		{2, 1, 1, 10451216379200822465, 2},
		{2, 1, 2, 10905525725756348110, 1},
		{2, 1, 3, 2092789425003139053, 2},
		{3, 2, 7, 309689372594955804, 3},
		{3, 4, 7, 10753165928301472203, 20},
		{3, 4, 8, 9889543983210544564, 14},
		{10, 3, 1099511627777, 9264205656190100561, 28},
		{1, 31, 42, 14571235658746288501, 811101342},
		{1<<32 - 1, 1<<32 - 1, 9, 1486457292955987315, 3792300301632810355},
	} {
		if got := JitterDraw(c.id, c.attempts); got != c.draw {
			t.Errorf("JitterDraw(%d, %d) = %d, want %d", c.id, c.attempts, got, c.draw)
		}
		if got := Backoff(c.base, c.attempts, c.id); got != c.want {
			t.Errorf("Backoff(%d, %d, %d) = %d, want %d", c.base, c.attempts, c.id, got, c.want)
		}
	}
	q := New()
	st := Stamps{VisibilityTimeoutS: 10, MaxAttempts: 100, BackoffBaseS: 1<<32 - 1}
	mustEnqueue(t, q, t0, "a", st, EnqueueOpts{})
	now := t0
	for range 40 {
		c := claimOne(t, q, now, "h1")
		if !q.Retry(now, c.Handle(), "e") {
			t.Fatal("retry refused")
		}
		j, _ := q.Get(c.ID)
		if j.RunAt < now {
			t.Fatalf("ready time overflowed: %d", j.RunAt)
		}
		if d := backoffCeiling(st.BackoffBaseS, j.Attempts); j.RunAt-now < d-d/2 && j.RunAt != math.MaxInt64 {
			t.Fatalf("attempt %d: delay %d below half the ceiling %d", j.Attempts, j.RunAt-now, d)
		}
		now = j.RunAt
		if now > 1<<62 {
			break
		}
	}
}

// TestSweepBothStates: expiry dead-letters pending and processing jobs.
func TestSweepBothStates(t *testing.T) {
	q := New()
	p := mustEnqueue(t, q, t0, "a", testStamps, EnqueueOpts{Expires: 5, Delay: 100})
	r := mustEnqueue(t, q, t0, "a", testStamps, EnqueueOpts{Expires: 5})
	claimOne(t, q, t0, "h1")
	if moved, _ := q.SweepExpired(t0 + 4); moved != 0 {
		t.Fatal("swept early")
	}
	if moved, _ := q.SweepExpired(t0 + 5); moved != 2 {
		t.Fatalf("moved %d", moved)
	}
	for _, id := range []uint64{p.ID, r.ID} {
		if j, _ := q.Get(id); j.State != Dead || j.LastError != ErrMsgExpired || j.DiedAt != t0+5 {
			t.Fatalf("after sweep: %+v", j)
		}
	}
	if !q.Redrive(t0+10, p.ID) {
		t.Fatal("redrive")
	}
	if j, _ := q.Get(p.ID); j.ExpiresAt != t0+15 || j.State != Pending || j.RunAt != t0+10 {
		t.Fatalf("redriven: %+v", j)
	}
	if q.Cancel(t0, r.ID) || !q.Cancel(t0, p.ID) || q.Cancel(t0, p.ID) {
		t.Fatal("cancel")
	}
	mustEnqueue(t, q, t0, "b", testStamps, EnqueueOpts{})
	if names := q.QueueNames(); !reflect.DeepEqual(names, []string{"a", "b"}) {
		t.Fatalf("queue names %v", names)
	}
	if _, deleted := q.SweepExpired(t0 + 1000); deleted != 1 {
		t.Fatal("retention")
	}
	if names := q.QueueNames(); !reflect.DeepEqual(names, []string{"b"}) {
		t.Fatalf("an emptied queue is still listed: %v", names)
	}
}

// TestHandleOfLostHistory: two histories from one state claim the same job
// with the same claim count (a deposed primary's lost suffix, then the
// next primary's log); the handle of the lost history names another
// claim record, so every handle op refuses it as a value, and only the
// surviving history's handle works.
func TestHandleOfLostHistory(t *testing.T) {
	base := New()
	j := mustEnqueue(t, base, t0, "a", testStamps, EnqueueOpts{})
	snap := base.Export()
	lost := base.ClaimBatch(t0+1, "a", "h1", 1, ClaimStamp{Term: 1, LSN: 7})
	if len(lost) != 1 || lost[0].Claim != (ClaimStamp{Term: 1, LSN: 7}) || lost[0].Handle().Claim != lost[0].Claim {
		t.Fatalf("claim in the lost history: %+v", lost)
	}
	for _, op := range []string{"ack", "ack batch", "heartbeat", "retry", "fail"} {
		q, err := Import(snap)
		if err != nil {
			t.Fatal(err)
		}
		got := q.ClaimBatch(t0+1, "a", "h2", 1, ClaimStamp{Term: 2, LSN: 7})
		if len(got) != 1 || got[0].ID != j.ID || got[0].Claims != lost[0].Claims {
			t.Fatalf("claim in the surviving history: %+v", got)
		}
		stale, cur := lost[0].Handle(), got[0].Handle()
		if stale.ID != cur.ID || stale.Attempt != cur.Attempt || stale == cur {
			t.Fatalf("handles %+v / %+v: want the same id and attempt, different stamps", stale, cur)
		}
		do := func(h Handle) bool {
			switch op {
			case "ack":
				return q.Ack(t0+2, h)
			case "ack batch":
				return q.AckBatch(t0+2, []Handle{h})[0]
			case "heartbeat":
				return q.Heartbeat(t0+2, h)
			case "retry":
				return q.Retry(t0+2, h, "x")
			default:
				return q.Fail(t0+2, h, "x")
			}
		}
		before := q.Export()
		if do(stale) {
			t.Fatalf("%s with the lost history's handle %+v accepted", op, stale)
		}
		if !reflect.DeepEqual(q.Export(), before) {
			t.Fatalf("%s refused but changed the state", op)
		}
		if !do(cur) {
			t.Fatalf("%s with the current handle %+v refused", op, cur)
		}
	}
}

// TestClaimNeedsStamp: a claim that names no record (LSN 0) is refused,
// and a handle without the stamp never matches.
func TestClaimNeedsStamp(t *testing.T) {
	q := New()
	mustEnqueue(t, q, t0, "a", testStamps, EnqueueOpts{})
	if got := q.ClaimBatch(t0, "a", "h1", 1, ClaimStamp{Term: 3}); got != nil {
		t.Fatalf("claim with LSN 0 handed out %+v", got)
	}
	j := claimOne(t, q, t0, "h1")
	if q.Heartbeat(t0, Handle{ID: j.ID, Attempt: j.Claims}) {
		t.Fatal("handle without its claim stamp accepted")
	}
	if !q.Heartbeat(t0, j.Handle()) {
		t.Fatal("the claim's own handle refused")
	}
}

// TestAdvanceNextID: the floor raises the next ID and never lowers it, and
// survives a snapshot round trip.
func TestAdvanceNextID(t *testing.T) {
	q := New()
	a := mustEnqueue(t, q, t0, "a", testStamps, EnqueueOpts{})
	q.AdvanceNextID(1 << 40)
	b := mustEnqueue(t, q, t0, "a", testStamps, EnqueueOpts{})
	q.AdvanceNextID(5) // below: no effect
	c := mustEnqueue(t, q, t0, "a", testStamps, EnqueueOpts{})
	if a.ID != 1 || b.ID != 1<<40 || c.ID != 1<<40+1 {
		t.Fatalf("ids %d, %d, %d; want 1, 2^40, 2^40+1", a.ID, b.ID, c.ID)
	}
	back, err := Import(q.Export())
	if err != nil {
		t.Fatal(err)
	}
	if d := mustEnqueue(t, back, t0, "a", testStamps, EnqueueOpts{}); d.ID != 1<<40+2 {
		t.Fatalf("after import: id %d", d.ID)
	}
}

// TestEnqueueKeepsItsOwnCopy: the queue's payload is its own; the caller
// may reuse its buffer (the job Enqueue returns shows that buffer, the
// caller's), and no later read shows the change.
func TestEnqueueKeepsItsOwnCopy(t *testing.T) {
	q := New()
	buf := []byte("payload")
	j, err := q.Enqueue(t0, "a", buf, Stamps{VisibilityTimeoutS: 30, MaxAttempts: 3}, EnqueueOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if string(j.Payload) != "payload" {
		t.Fatalf("Enqueue returned payload %q", j.Payload)
	}
	copy(buf, "changed")
	got, ok := q.Get(j.ID)
	if !ok || string(got.Payload) != "payload" {
		t.Fatalf("after the caller reused its buffer, Get shows %q (found %v)", got.Payload, ok)
	}
	if c := q.ClaimBatch(t0, "a", "h", 1, stampAt(t0)); len(c) != 1 || string(c[0].Payload) != "payload" {
		t.Fatalf("after the caller reused its buffer, a claim shows %v", c)
	}
}

// TestBackoffProperties: for any base, attempts and job, the delay lies
// in [ceil(d/2), d] of the ceiling d and is the same on every call (so
// on every replica and replay).
func TestBackoffProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := rapid.Uint32().Draw(t, "base")
		attempts := rapid.Uint32Range(0, 64).Draw(t, "attempts")
		id := rapid.Uint64().Draw(t, "id")
		d := backoffCeiling(base, attempts)
		got := Backoff(base, attempts, id)
		if lo := d - d/2; got < lo || got > d {
			t.Fatalf("Backoff(%d, %d, %d) = %d outside [%d, %d]", base, attempts, id, got, lo, d)
		}
		if again := Backoff(base, attempts, id); again != got {
			t.Fatalf("Backoff(%d, %d, %d) = %d, then %d", base, attempts, id, got, again)
		}
	})
}

// TestBackoffSpreads: a thousand jobs that failed together come back
// spread over the window, not all at one time.
func TestBackoffSpreads(t *testing.T) {
	seen := map[int64]int{}
	for id := uint64(1); id <= 1000; id++ {
		seen[Backoff(8, 3, id)]++ // ceiling 32: delays 16..32
	}
	if len(seen) < 15 {
		t.Fatalf("1000 jobs got %d distinct delays: %v", len(seen), seen)
	}
	for d, n := range seen {
		if d < 16 || d > 32 || n > 150 {
			t.Fatalf("delay %d for %d jobs (want 16..32, none above 150 jobs)", d, n)
		}
	}
}

// TestRetryAfter: a worker's delay sets the ready time exactly; a bad one
// is refused and changes nothing; exhausted attempts still dead-letter.
func TestRetryAfter(t *testing.T) {
	for _, d := range []int64{-1, MaxRetryDelayS + 1} {
		if err := CheckRetryDelay(d); !errors.Is(err, ErrBadRetryDelay) || !strings.Contains(err.Error(), strconv.FormatInt(d, 10)) {
			t.Errorf("CheckRetryDelay(%d) = %v, want ErrBadRetryDelay naming it", d, err)
		}
	}
	for _, d := range []int64{0, 1, MaxRetryDelayS} {
		if err := CheckRetryDelay(d); err != nil {
			t.Errorf("CheckRetryDelay(%d) = %v", d, err)
		}
	}
	q := New()
	st := Stamps{VisibilityTimeoutS: 10, MaxAttempts: 2, BackoffBaseS: 1000}
	j := mustEnqueue(t, q, t0, "a", st, EnqueueOpts{})
	c := claimOne(t, q, t0, "h1")
	for _, d := range []int64{-1, MaxRetryDelayS + 1} {
		if q.RetryAfter(t0+1, c.Handle(), "e", d) {
			t.Fatalf("RetryAfter with delay %d accepted", d)
		}
	}
	if g, _ := q.Get(j.ID); g.State != Processing {
		t.Fatalf("a refused retry changed the job: %+v", g)
	}
	if !q.RetryAfter(t0+1, c.Handle(), "later", 2) {
		t.Fatal("retry refused")
	}
	if g, _ := q.Get(j.ID); g.State != Pending || g.RunAt != t0+3 || g.LastError != "later" || g.Host != "" {
		t.Fatalf("after RetryAfter(2): %+v", g)
	}
	if got := q.ClaimBatch(t0+2, "a", "h1", 1, ClaimStamp{Term: 1, LSN: 99}); len(got) != 0 {
		t.Fatal("claimed before the worker's delay passed")
	}
	c = claimOne(t, q, t0+3, "h1")
	if !q.RetryAfter(t0+4, c.Handle(), "again", 60) {
		t.Fatal("second retry refused")
	}
	if g, _ := q.Get(j.ID); g.State != Dead || g.LastError != ErrMsgExhausted {
		t.Fatalf("exhausted job retried with a delay: %+v", g)
	}
}
