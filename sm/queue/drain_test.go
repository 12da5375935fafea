package queue

import "testing"

const lf = "lost_and_found"

// sidelined builds: job 1 pending in lf, job 2 claimed in lf (its
// claimant holds h2), job 3 dead in lf, job 4 pending in "a" pinned to
// lf, job 5 pending in "a" (not sidelined).
func sidelined(t *testing.T) (*Queues, Handle) {
	t.Helper()
	q := New()
	st := Stamps{VisibilityTimeoutS: 60, MaxAttempts: 1}
	mustEnqueue(t, q, 1, lf, st, EnqueueOpts{})
	mustEnqueue(t, q, 1, lf, st, EnqueueOpts{Priority: 5})
	mustEnqueue(t, q, 1, lf, st, EnqueueOpts{Priority: 1})
	mustEnqueue(t, q, 1, "a", st, EnqueueOpts{Host: lf})
	mustEnqueue(t, q, 1, "a", st, EnqueueOpts{})
	claim := func(now int64) Job {
		got := q.ClaimBatch(now, lf, "w", 1, stampAt(now))
		if len(got) != 1 {
			t.Fatalf("claim at %d: %d jobs", now, len(got))
		}
		return got[0]
	}
	h2 := claim(2).Handle() // job 2: the highest priority
	if j := claim(3); j.ID != 3 || !q.Fail(3, j.Handle(), "x") {
		t.Fatalf("claimed %d", j.ID)
	}
	if n := q.CountSidelined(lf); n != 4 {
		t.Fatalf("sidelined %d, want 4", n)
	}
	return q, h2
}

func TestDrainSidelinedMoves(t *testing.T) {
	q, h2 := sidelined(t)
	if n := q.DrainSidelined(10, lf, "b", "n7", false); n != 4 {
		t.Fatalf("drained %d, want 4", n)
	}
	if err := q.checkIndexes(); err != nil {
		t.Fatal(err)
	}
	if n := q.CountSidelined(lf); n != 0 {
		t.Fatalf("%d still sidelined", n)
	}
	want := map[uint64]struct {
		queue, pin string
		st         State
	}{1: {"b", "", Pending}, 2: {"b", "", Processing}, 3: {"b", "", Dead}, 4: {"a", "n7", Pending}, 5: {"a", "", Pending}}
	for id, w := range want {
		j, ok := q.Get(id)
		if !ok || j.Queue != w.queue || j.Pin != w.pin || j.State != w.st {
			t.Fatalf("job %d: %+v, want %+v", id, j, w)
		}
	}
	if p, r, d := q.Counts("b"); p != 1 || r != 1 || d != 1 {
		t.Fatalf("counts of b: %d %d %d", p, r, d)
	}
	if p, r, d := q.Counts(lf); p+r+d != 0 || len(q.QueueNames()) != 2 {
		t.Fatalf("lf still counted (%d %d %d), queues %v", p, r, d, q.QueueNames())
	}
	// The claimant's handle survives the move; the moved jobs are claimable
	// in their new queue, the re-pinned one only by its new host.
	if !q.Heartbeat(11, h2) {
		t.Fatal("the claim of a moved job was lost")
	}
	if j := q.ClaimBatch(12, "b", "w", 5, stampAt(12)); len(j) != 1 || j[0].ID != 1 {
		t.Fatalf("claim of b: %+v", j)
	}
	if j := q.ClaimBatch(12, "a", "w", 5, stampAt(13)); len(j) != 1 || j[0].ID != 5 {
		t.Fatalf("claim of a by w: %+v", j)
	}
	if j := q.ClaimBatch(12, "a", "n7", 5, stampAt(14)); len(j) != 1 || j[0].ID != 4 {
		t.Fatalf("claim of a by n7: %+v", j)
	}
}

func TestDrainSidelinedCancels(t *testing.T) {
	q, h2 := sidelined(t)
	if n := q.DrainSidelined(10, lf, "", "", true); n != 4 {
		t.Fatalf("cancelled %d, want 4", n)
	}
	if err := q.checkIndexes(); err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 4; id++ {
		if _, ok := q.Get(id); ok {
			t.Fatalf("job %d kept", id)
		}
	}
	if _, ok := q.Get(5); !ok {
		t.Fatal("job 5, not sidelined, was deleted")
	}
	if q.Ack(11, h2) {
		t.Fatal("the handle of a deleted job was accepted")
	}
	if n := q.DrainSidelined(12, lf, "", "", true); n != 0 {
		t.Fatalf("second drain: %d", n)
	}
}

func TestDrainSidelinedRefuses(t *testing.T) {
	for _, c := range []struct{ queue, host string }{{"", ""}, {lf, ""}, {"b", lf}} {
		q, _ := sidelined(t)
		if n := q.DrainSidelined(10, lf, c.queue, c.host, false); n != 0 || q.CountSidelined(lf) != 4 {
			t.Fatalf("drain to %q/%q: %d", c.queue, c.host, n)
		}
	}
}
