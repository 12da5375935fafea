package queue

import "testing"

// oldest is OldestPending of queue "a" as one comparable value (-1: none).
func oldest(q *Queues) int64 {
	at, ok := q.OldestPending("a")
	if !ok {
		return -1
	}
	return at
}

// TestOldestPending follows the earliest ready time of the pending jobs
// through each operation that adds a pending job or takes one away.
func TestOldestPending(t *testing.T) {
	st := Stamps{VisibilityTimeoutS: 10, MaxAttempts: 3, BackoffBaseS: 5}
	type step struct {
		name string
		do   func(t *testing.T, q *Queues)
		want int64 // -1: no pending job
	}
	var h1, h2 Handle
	steps := []step{
		{"empty queue", func(*testing.T, *Queues) {}, -1},
		{"enqueue at t0", func(t *testing.T, q *Queues) { mustEnqueue(t, q, t0, "a", st, EnqueueOpts{}) }, t0},
		{"a delayed job is not older", func(t *testing.T, q *Queues) { mustEnqueue(t, q, t0+1, "a", st, EnqueueOpts{Delay: 100}) }, t0},
		{"a later job is not older", func(t *testing.T, q *Queues) { mustEnqueue(t, q, t0+2, "a", st, EnqueueOpts{Priority: 9}) }, t0},
		{"run_at in the past counts from the enqueue", func(t *testing.T, q *Queues) { mustEnqueue(t, q, t0+3, "a", st, EnqueueOpts{RunAt: t0 - 50}) }, t0},
		// The claim takes the priority-9 job first (ready at t0+2), then
		// the one of t0: the job of t0+3 is the oldest pending left.
		{"claim of the two oldest ready", func(t *testing.T, q *Queues) {
			h1 = claimOne(t, q, t0+4, "w").Handle()
			h2 = claimOne(t, q, t0+4, "w").Handle()
		}, t0 + 3},
		{"ack changes no pending job", func(t *testing.T, q *Queues) {
			if !q.Ack(t0+5, h1) {
				t.Fatal("ack refused")
			}
		}, t0 + 3},
		{"a retry is ready after its backoff", func(t *testing.T, q *Queues) {
			if !q.Retry(t0+6, h2, "again") {
				t.Fatal("retry refused")
			}
		}, t0 + 3},
		{"cancel of the oldest", func(t *testing.T, q *Queues) {
			if j := q.List("a"); !q.Cancel(t0+7, oldestID(j, t0+3)) {
				t.Fatal("cancel refused")
			}
		}, t0 + 6 + 5}, // the retried job: t0+6 plus its 5 s backoff
		{"the delayed job is the only other", func(t *testing.T, q *Queues) {
			if j := q.List("a"); !q.Cancel(t0+8, oldestID(j, t0+11)) {
				t.Fatal("cancel refused")
			}
		}, t0 + 101},
		{"claimed (the delay passed), none pending", func(t *testing.T, q *Queues) { h1 = claimOne(t, q, t0+200, "w").Handle() }, -1},
		{"fail: dead is not pending", func(t *testing.T, q *Queues) {
			if !q.Fail(t0+201, h1, "") {
				t.Fatal("fail refused")
			}
		}, -1},
		{"redrive: pending from the redrive", func(t *testing.T, q *Queues) {
			if !q.Redrive(t0+300, h1.ID) {
				t.Fatal("redrive refused")
			}
		}, t0 + 300},
		{"an expired pending job stays until the sweep", func(t *testing.T, q *Queues) {
			mustEnqueue(t, q, t0+250, "a", st, EnqueueOpts{Expires: 10})
		}, t0 + 250},
		{"the sweep dead-letters it", func(_ *testing.T, q *Queues) { q.SweepExpired(t0 + 400) }, t0 + 300},
		{"time steps back: a job enqueued then is the oldest", func(t *testing.T, q *Queues) { mustEnqueue(t, q, t0+100, "a", st, EnqueueOpts{}) }, t0 + 100},
	}
	q := New()
	for _, s := range steps {
		s.do(t, q)
		if got := oldest(q); got != s.want {
			t.Fatalf("%s: OldestPending = %d, want %d", s.name, got, s.want)
		}
		if err := q.checkIndexes(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		// A restart rebuilds the value from the snapshot alone.
		r, err := Import(q.Export())
		if err != nil {
			t.Fatal(err)
		}
		if got := oldest(r); got != s.want {
			t.Fatalf("%s: after Import(Export()) OldestPending = %d, want %d", s.name, got, s.want)
		}
	}
	if _, ok := q.OldestPending("nosuch"); ok {
		t.Error("a queue that never held a job has an oldest pending job")
	}
}

// oldestID is the ID of the pending job of jobs ready at runAt.
func oldestID(jobs []Job, runAt int64) uint64 {
	for _, j := range jobs {
		if j.State == Pending && j.RunAt == runAt {
			return j.ID
		}
	}
	return 0
}

// TestOldestPendingDrain: a drain out of lost_and_found moves the pending
// jobs' ready times with them.
func TestOldestPendingDrain(t *testing.T) {
	q := New()
	st := Stamps{VisibilityTimeoutS: 10, MaxAttempts: 3}
	mustEnqueue(t, q, t0, "lf", st, EnqueueOpts{})
	mustEnqueue(t, q, t0+5, "a", st, EnqueueOpts{})
	if n := q.DrainSidelined(t0+6, "lf", "a", "", false); n != 1 {
		t.Fatalf("drained %d jobs, want 1", n)
	}
	if got := oldest(q); got != t0 {
		t.Errorf("after the drain OldestPending(a) = %d, want %d (the drained job's)", got, t0)
	}
	if _, ok := q.OldestPending("lf"); ok {
		t.Error("lost_and_found still has a pending job after its drain")
	}
	if err := q.checkIndexes(); err != nil {
		t.Fatal(err)
	}
}

// TestThroughput counts each operation where it happens, a batch per job,
// and every path to dead.
func TestThroughput(t *testing.T) {
	one := Stamps{VisibilityTimeoutS: 10, MaxAttempts: 1}
	two := Stamps{VisibilityTimeoutS: 10, MaxAttempts: 2}
	cases := []struct {
		name string
		do   func(t *testing.T, q *Queues)
		want Throughput
	}{
		{"enqueue", func(t *testing.T, q *Queues) {
			mustEnqueue(t, q, t0, "a", two, EnqueueOpts{})
			if _, err := q.EnqueueID(t0, "a", nil, two, EnqueueOpts{}); err != nil {
				t.Fatal(err)
			}
		}, Throughput{Enqueued: 2}},
		{"a refused enqueue counts nothing", func(t *testing.T, q *Queues) {
			if _, err := q.Enqueue(t0, "a", nil, Stamps{}, EnqueueOpts{}); err == nil {
				t.Fatal("enqueue with bad stamps accepted")
			}
		}, Throughput{}},
		{"scheduler fires", func(t *testing.T, q *Queues) {
			if err := q.Register(t0, "s", "@every 1s", "a", nil, two, FireOpts{}); err != nil {
				t.Fatal(err)
			}
			if n := len(q.Tick(t0 + 3)); n != 3 {
				t.Fatalf("tick fired %d jobs", n)
			}
		}, Throughput{Enqueued: 3}},
		{"a claim batch counts each job", func(t *testing.T, q *Queues) {
			for range 3 {
				mustEnqueue(t, q, t0, "a", two, EnqueueOpts{})
			}
			if n := q.ClaimBatchCount(t0, "a", "w", 5, Budget{}, stampAt(t0)); n != 3 {
				t.Fatalf("claimed %d", n)
			}
		}, Throughput{Enqueued: 3, Claimed: 3}},
		{"ack and a refused ack", func(t *testing.T, q *Queues) {
			mustEnqueue(t, q, t0, "a", two, EnqueueOpts{})
			h := claimOne(t, q, t0, "w").Handle()
			if oks := q.AckBatch(t0+1, []Handle{h, h}); !oks[0] || oks[1] {
				t.Fatalf("ack batch %v", oks)
			}
		}, Throughput{Enqueued: 1, Claimed: 1, Acked: 1}},
		{"retry back to pending, then a reclaim", func(t *testing.T, q *Queues) {
			mustEnqueue(t, q, t0, "a", two, EnqueueOpts{})
			if !q.Retry(t0+1, claimOne(t, q, t0, "w").Handle(), "x") {
				t.Fatal("retry refused")
			}
			claimOne(t, q, t0+2, "w")
		}, Throughput{Enqueued: 1, Claimed: 2, Retried: 1}},
		{"dead by fail", func(t *testing.T, q *Queues) {
			mustEnqueue(t, q, t0, "a", two, EnqueueOpts{})
			if !q.Fail(t0+1, claimOne(t, q, t0, "w").Handle(), "") {
				t.Fatal("fail refused")
			}
		}, Throughput{Enqueued: 1, Claimed: 1, Dead: 1}},
		{"dead by a retry on the last attempt (not a retry)", func(t *testing.T, q *Queues) {
			mustEnqueue(t, q, t0, "a", one, EnqueueOpts{})
			if !q.Retry(t0+1, claimOne(t, q, t0, "w").Handle(), "x") {
				t.Fatal("retry refused")
			}
		}, Throughput{Enqueued: 1, Claimed: 1, Dead: 1}},
		{"dead by a lapse on the last attempt, found by a claim", func(t *testing.T, q *Queues) {
			mustEnqueue(t, q, t0, "a", one, EnqueueOpts{})
			claimOne(t, q, t0, "w")
			if n := q.ClaimBatchCount(t0+20, "a", "w", 1, Budget{}, stampAt(t0+20)); n != 0 {
				t.Fatalf("claimed %d", n)
			}
		}, Throughput{Enqueued: 1, Claimed: 1, Dead: 1}},
		{"dead by a lapse on the last attempt, found by the sweep", func(t *testing.T, q *Queues) {
			mustEnqueue(t, q, t0, "a", one, EnqueueOpts{})
			claimOne(t, q, t0, "w")
			if moved, _ := q.SweepExpired(t0 + 20); moved != 1 {
				t.Fatalf("sweep moved %d", moved)
			}
		}, Throughput{Enqueued: 1, Claimed: 1, Dead: 1}},
		{"a reclaim after a lapse with attempts left", func(t *testing.T, q *Queues) {
			mustEnqueue(t, q, t0, "a", two, EnqueueOpts{})
			claimOne(t, q, t0, "w")
			claimOne(t, q, t0+20, "w")
		}, Throughput{Enqueued: 1, Claimed: 2}},
		{"dead by expiry, pending and processing", func(t *testing.T, q *Queues) {
			mustEnqueue(t, q, t0, "a", two, EnqueueOpts{Expires: 5})
			mustEnqueue(t, q, t0, "a", two, EnqueueOpts{Expires: 5})
			claimOne(t, q, t0, "w")
			if moved, _ := q.SweepExpired(t0 + 5); moved != 2 {
				t.Fatalf("sweep moved %d", moved)
			}
		}, Throughput{Enqueued: 2, Claimed: 1, Dead: 2}},
		{"cancel, redrive, heartbeat and a drain count nothing", func(t *testing.T, q *Queues) {
			j := mustEnqueue(t, q, t0, "a", two, EnqueueOpts{})
			k := mustEnqueue(t, q, t0, "a", two, EnqueueOpts{})
			if !q.Cancel(t0, j.ID) {
				t.Fatal("cancel refused")
			}
			h := claimOne(t, q, t0, "w").Handle()
			if !q.Heartbeat(t0+1, h) || !q.Fail(t0+1, h, "") || !q.Redrive(t0+2, k.ID) {
				t.Fatal("heartbeat, fail or redrive refused")
			}
			if n := q.DrainSidelined(t0+3, "a", "b", "", false); n != 1 {
				t.Fatalf("drained %d", n)
			}
		}, Throughput{Enqueued: 2, Claimed: 1, Dead: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := New()
			c.do(t, q)
			if got := q.Throughput("a"); got != c.want {
				t.Errorf("Throughput(a) = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestThroughputOutlivesItsQueue: the counters of a queue stay once it
// holds no job, start at zero in a state rebuilt by Import, and go back to
// zero on ResetThroughput.
func TestThroughputOutlivesItsQueue(t *testing.T) {
	q := New()
	st := Stamps{VisibilityTimeoutS: 10, MaxAttempts: 2}
	mustEnqueue(t, q, t0, "a", st, EnqueueOpts{})
	mustEnqueue(t, q, t0, "b", st, EnqueueOpts{})
	if !q.Ack(t0, claimOne(t, q, t0, "w").Handle()) {
		t.Fatal("ack refused")
	}
	if p, r, d := q.Counts("a"); p+r+d != 0 {
		t.Fatalf("queue a holds %d jobs", p+r+d)
	}
	if got, want := q.Throughput("a"), (Throughput{Enqueued: 1, Claimed: 1, Acked: 1}); got != want {
		t.Errorf("Throughput(a) of an emptied queue = %+v, want %+v", got, want)
	}
	if got := q.ThroughputQueues(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("ThroughputQueues = %v, want [a b]", got)
	}
	r, err := Import(q.Export())
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Throughput("b"); got != (Throughput{}) {
		t.Errorf("Throughput(b) after Import = %+v, want zero", got)
	}
	q.ResetThroughput()
	if got := q.Throughput("a"); got != (Throughput{}) {
		t.Errorf("Throughput(a) after ResetThroughput = %+v, want zero", got)
	}
	mustEnqueue(t, q, t0, "a", st, EnqueueOpts{})
	if got := q.Throughput("a"); got != (Throughput{Enqueued: 1}) {
		t.Errorf("Throughput(a) counting again after the reset = %+v", got)
	}
}
