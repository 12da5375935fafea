package sm_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// A primary recovering a large snapshot stays a primary to its peers: the
// import runs in the executor, not in a Step, so while it runs (its
// operation held here: the executor is busy) the node's heartbeats go
// out and its standbys, whose failure timeout is 1.5 s, elect nobody.
// Once the import completes, no Step of the recovery does work
// proportional to the jobs: each allocates far fewer objects than the
// snapshot has jobs (a Step that decoded it would allocate several per
// job).
func TestRecoveryImportKeepsHeartbeating(t *testing.T) {
	const jobs = 20_000
	blob := testConfig(t, "offstep", 1)
	q := queue.New()
	for i := 0; i < jobs; i++ {
		if _, err := q.Enqueue(100, "q0", []byte(fmt.Sprintf("job-%d", i)), queue.Stamps{VisibilityTimeoutS: 30, MaxAttempts: 5}, queue.EnqueueOpts{}); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := wal.EncodeSnapshot(sm.SnapshotOf(q, jobs, 1))
	if err != nil {
		t.Fatal(err)
	}
	snapPath := wal.SnapshotPath(jobs)
	h := newHarness(t, 3)
	for i := 0; i < 3; i++ {
		install(t, h.add(i, nil, nil).disk, blob, epoch)
	}
	if err := h.node(0).disk.PutDurable(snapPath, snap, epoch); err != nil {
		t.Fatal(err)
	}
	p := h.node(0)
	// Every operation on the snapshot once n0 is primary is recovery's
	// (its read, its import): held, as by an executor still at work, and
	// run outside the Steps when released.
	h.hold = func(i int, e sm.Effect) bool {
		var path string
		switch x := e.(type) {
		case sm.FileOp:
			path = x.Path
		case sm.Compute:
			path = x.Path
		}
		return i == 0 && path == snapPath && p.n.Role() == sm.RolePrimary
	}
	recovered := func() bool { _, _, ok := p.n.JobState(); return ok }
	h.boot(0, 1, 2)
	if !h.advanceUntil(20*time.Second, func() bool { return p.n.Role() == sm.RolePrimary }) {
		t.Fatalf("n0 (the longest log) did not become primary:\n%s", p.logDump())
	}
	term, from := p.n.Term(), h.now
	h.advance(5 * time.Second) // more than three failure timeouts
	if len(h.held) == 0 {
		t.Fatalf("recovery issued no operation on %s once n0 was primary: the snapshot is read and imported in a Step", snapPath)
	}
	if recovered() {
		t.Fatalf("n0 recovered with its snapshot's operation held (held: %d)", len(h.held))
	}
	for _, s := range []int{1, 2} {
		var at []time.Duration
		for _, m := range p.sentOf(sm.MsgHeartbeat) {
			if m.To == s && m.At > from {
				at = append(at, m.At)
			}
		}
		if len(at) < 8 { // every 500 ms for 5 s: ~10
			t.Errorf("n0 sent n%d %d heartbeats in the 5 s its import ran (%v)", s, len(at), at)
		}
		sn := h.node(s)
		if sn.n.Role() != sm.RoleStandby || sn.n.Term() != term {
			t.Errorf("n%d is %v in term %d (n0 is primary in term %d): it timed out on a recovering primary", s, sn.n.Role(), sn.n.Term(), term)
		}
		for _, typ := range []sm.MsgType{sm.MsgProbe, sm.MsgPreVote, sm.MsgVote} {
			for _, m := range sn.sentOf(typ) {
				if m.At > from {
					t.Errorf("n%d sent %s at %v while n0 recovered", s, typ, m.At)
				}
			}
		}
	}
	if p.n.Role() != sm.RolePrimary || p.n.Term() != term {
		t.Fatalf("n0 is %v in term %d, was primary in %d", p.n.Role(), p.n.Term(), term)
	}
	// Let the executor finish: measure each Step from here to recovered.
	var most uint64
	var mostIn string
	var ms runtime.MemStats
	for !recovered() {
		h.releaseHeld()
		if len(h.queue) == 0 {
			t.Fatalf("recovery stalled:\n%s", p.logDump())
		}
		for len(h.queue) > 0 && !recovered() {
			in := h.queue[0]
			h.queue = h.queue[1:]
			runtime.ReadMemStats(&ms)
			before := ms.Mallocs
			h.step(in.node, in.in)
			runtime.ReadMemStats(&ms)
			if n := ms.Mallocs - before; in.node == 0 && n > most {
				most, mostIn = n, fmt.Sprintf("%T", in.in)
			}
		}
	}
	if most > jobs/10 {
		t.Errorf("a Step of n0's recovery (%s) allocated %d objects, for a snapshot of %d jobs: the import ran in it", mostIn, most, jobs)
	}
	got, _, _ := p.n.JobState()
	if n := len(got.List("")); n != jobs || p.n.RecoveredLSN() != jobs {
		t.Fatalf("recovered %d jobs to lsn %d, want %d:\n%s", n, p.n.RecoveredLSN(), jobs, p.logDump())
	}
	if !strings.Contains(p.logDump(), "loaded snapshot "+snapPath) {
		t.Fatalf("no wal.snapshot-loaded line:\n%s", p.logDump())
	}
}
