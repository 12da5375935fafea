package daemon

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

func TestGCPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, scan uint64
		pct        int
		min        uint64
		want       int
	}{
		{live: 1000 * mib, pct: 10, min: 16 * mib, want: 10},           // the fraction
		{live: 100 * mib, pct: 10, min: 16 * mib, want: 16},            // the floor
		{live: 10 * mib, pct: 10, min: 16 * mib, want: 100},            // never above Go's default
		{live: 1000 * mib, scan: 1000 * mib, pct: 10, min: 0, want: 5}, // Go counts the scan in the goal
		{live: 1000 * mib, pct: 0, min: 1, want: 1},                    // at least 1
		{live: 0, scan: 0, pct: 10, min: 16 * mib, want: 100},
	} {
		if got := gcPercent(c.live, c.scan, c.pct, c.min); got != c.want {
			t.Errorf("gcPercent(%d, %d, %d, %d) = %d, want %d", c.live, c.scan, c.pct, c.min, got, c.want)
		}
	}
}

// gcPercentPast puts the goal past the live heap by the extra bytes too.
func TestGCPercentPast(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, scan, extra uint64
		want              int
	}{
		{live: 1000 * mib, extra: 0, want: 10},                           // gcPercent's
		{live: 1000 * mib, extra: 65 * mib, want: 17},                    // a read's buffer: 65 MiB more
		{live: 1000 * mib, extra: 2000 * mib, want: 100},                 // never above Go's default
		{live: 1000 * mib, scan: 1000 * mib, extra: 100 * mib, want: 10}, // the scan counted
	} {
		if got := gcPercentPast(c.live, c.scan, c.extra, 10, 16*mib); got != c.want {
			t.Errorf("gcPercentPast(%d, %d, %d, 10, 16 MiB) = %d, want %d", c.live, c.scan, c.extra, got, c.want)
		}
	}
}

func TestGCEnvSet(t *testing.T) {
	env := func(set ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for _, s := range set {
				if s == k {
					return "50", true
				}
			}
			return "", false
		}
	}
	if k := gcEnvSet(env()); k != "" {
		t.Errorf("nothing set: %q", k)
	}
	if k := gcEnvSet(env("GOMEMLIMIT")); k != "GOMEMLIMIT" {
		t.Errorf("GOMEMLIMIT set: %q", k)
	}
	if k := gcEnvSet(env("GOGC")); k != "GOGC" {
		t.Errorf("GOGC set: %q", k)
	}
}

// heapSample reads one of the runtime's byte metrics.
func heapSample(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A hold's goal: past the heap in use by as much again as is live plus
// the policy's headroom; its percent never below Go's default.
func TestHoldGoalAndPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, scan, inUse uint64
		pct               int
		min               uint64
		goal              uint64
		percent           int
	}{
		// 1M jobs on a primary: 450 MiB live, 580 in use; Go's default
		// would be 900, the hold gives 1,075.
		{live: 450 * mib, inUse: 580 * mib, pct: 10, min: 32 * mib, goal: 1075 * mib, percent: 139},
		// a recovery's import: little live, Go's default is more.
		{live: 10 * mib, inUse: 12 * mib, pct: 10, min: 32 * mib, goal: 54 * mib, percent: 440},
		{live: 0, inUse: 0, pct: 10, min: 32 * mib, goal: 32 * mib, percent: 100},
		{live: 100 * mib, scan: 100 * mib, inUse: 100 * mib, pct: 10, min: 0, goal: 210 * mib, percent: 100}, // the scan counts: never below 100
	} {
		goal := holdGoal(c.live, c.inUse, c.pct, c.min)
		if goal != c.goal {
			t.Errorf("holdGoal(%d, %d, %d, %d) = %d MiB, want %d MiB", c.live>>20, c.inUse>>20, c.pct, c.min>>20, goal>>20, c.goal>>20)
		}
		if p := holdPercent(c.live, c.scan, goal); p != c.percent {
			t.Errorf("holdPercent(%d, %d, %d MiB) = %d, want %d", c.live>>20, c.scan>>20, goal>>20, p, c.percent)
		}
	}
}

func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestGCHeadroomFollowsLiveHeap: with 64 MiB live and a 10% headroom
// (floor 1 MiB), the policy sets GOGC to about 10 after a collection,
// and stop restores 100.
func TestGCHeadroomFollowsLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	live := make([]byte, 64<<20)
	stop := startGCHeadroom(10, 1<<20).stop
	deadline := time.Now().Add(10 * time.Second)
	for gogc() > 11 {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("GOGC %d after collections with 64 MiB live, want <= 11", gogc())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(live)
	stop()
	if p := gogc(); p != 100 {
		t.Errorf("GOGC %d after stop, want 100", p)
	}
	// Stopped: a collection no longer changes it.
	debug.SetGCPercent(50)
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if p := gogc(); p != 50 {
		t.Errorf("GOGC %d after a collection once stopped, want 50 (the policy is still running)", p)
	}
}

// TestGCHoldGivesRoom: while a hold is in force the heap goal leaves room
// past the heap in use for as much again as is live, and the percent is
// at least Go's default, collections or not; after its release the next
// collection sets the policy's again. The hold is taken with the heap in
// use well past the live heap (a 60% headroom, 16 MiB of garbage not yet
// collected), where Go's default goal, twice the live heap, would leave
// less room than is live.
func TestGCHoldGivesRoom(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	live := make([]byte, 64<<20)
	g := startGCHeadroom(60, 1<<20)
	defer g.stop()
	waitGOGC := func(ok func(int) bool, what string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(gogc()); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("GOGC %d, want %s", gogc(), what)
			}
			runtime.GC()
		}
	}
	waitGOGC(func(p int) bool { return p <= 61 }, "<= 61 under the policy")
	garbage := make([]byte, 16<<20)
	garbage[len(garbage)-1] = 1
	runtime.KeepAlive(garbage)
	garbage = nil
	inUse := heapSample("/memory/classes/heap/objects:bytes")
	if liveNow := heapSample("/gc/heap/live:bytes"); inUse < liveNow+8<<20 {
		t.Fatalf("heap in use %d MiB, live %d MiB: the garbage was collected before the hold", inUse>>20, liveNow>>20)
	}
	release := g.hold()
	want := inUse + uint64(len(live))
	if p, goal := gogc(), heapSample("/gc/heap/goal:bytes"); p < 100 || goal < want {
		t.Fatalf("GOGC %d, goal %d MiB once held, want >= 100 and >= the heap in use (%d MiB) + the live 64 MiB", p, goal>>20, inUse>>20)
	}
	for range 3 {
		runtime.GC()
	}
	time.Sleep(50 * time.Millisecond)
	if p, goal := gogc(), heapSample("/gc/heap/goal:bytes"); p < 100 || goal < want {
		t.Fatalf("GOGC %d, goal %d MiB after collections while held, want >= 100 and >= %d MiB", p, goal>>20, want>>20)
	}
	release()
	waitGOGC(func(p int) bool { return p <= 61 }, "<= 61 after the release")
	runtime.KeepAlive(live)
}

// An out-of-range headroom is a startup error naming the flag.
func TestRunRefusesBadGCHeadroom(t *testing.T) {
	for _, c := range []struct{ pct, min int }{{-1, 16}, {101, 16}, {10, -1}} {
		cfg := DefaultConfig()
		cfg.GCHeadroom, cfg.GCHeadroomMinMiB = c.pct, c.min
		var out strings.Builder
		if code := Run(context.Background(), cfg, &out); code != 1 || !strings.Contains(out.String(), "--gc-headroom") {
			t.Errorf("--gc-headroom %d --gc-headroom-min-mib %d: exit %d, log %q", c.pct, c.min, code, out.String())
		}
	}
}

// TestSyncHoldHoldsWhileASnapshotSyncs: a snapshot sync holds Go's
// default through collections, once however many steps it lasts; its
// end releases the hold and starts a collection, after which the
// policy's percent is back.
func TestSyncHoldHoldsWhileASnapshotSyncs(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	live := make([]byte, 64<<20)
	g, h, collected := underPolicy(t)
	defer g.stop()
	h.update(false)
	if g.held != 0 {
		t.Fatalf("%d holds with no sync", g.held)
	}
	h.update(true)
	h.update(true) // a second step of the same sync: one hold
	for range 3 {
		runtime.GC()
	}
	time.Sleep(50 * time.Millisecond)
	if p := gogc(); p < 100 || g.held != 1 {
		t.Fatalf("GOGC %d, %d holds after collections during a sync, want >= 100 and 1", p, g.held)
	}
	h.update(false)
	policyBackAfter(t, g, collected, "the sync")
	runtime.KeepAlive(live)
}

// TestAroundHoldsForOneReadThenSetsTheGoal: a background read's hold
// (holdRead, the executor's AroundRead) keeps Go's default through
// collections while it lasts; its end starts no collection but sets the
// policy's goal from the heap in use at once, past the read's garbage by
// the policy's headroom; the next collection puts the policy's own
// percent back.
func TestAroundHoldsForOneReadThenSetsTheGoal(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	live := make([]byte, 64<<20)
	g, _, _ := underPolicy(t)
	defer g.stop()
	after := g.holdRead()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if p := gogc(); p < 100 || g.held != 1 {
		t.Fatalf("GOGC %d, %d holds during the read, want >= 100 and 1", p, g.held)
	}
	buf := make([]byte, 32<<20) // the read's buffer, garbage once read
	buf[len(buf)-1] = 1
	runtime.KeepAlive(buf)
	cycles := gcCycles()
	after()
	if g.held != 0 {
		t.Fatalf("%d holds after the read", g.held)
	}
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	goal, inUse, liveHeap := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
	head := max(uint64(1<<20), liveHeap/10)
	if goal < inUse || goal > inUse+head+head/2 {
		t.Errorf("goal %d MiB after the read, want the heap in use (%d MiB) + about the policy's headroom (%d MiB)", goal>>20, inUse>>20, head>>20)
	}
	if p := gogc(); p <= 11 || p >= 100 {
		t.Errorf("GOGC %d after the read, want between the policy's and Go's default", p)
	}
	time.Sleep(100 * time.Millisecond)
	if n := gcCycles() - cycles; n != 0 {
		t.Errorf("a collection was forced at the read's end (%d cycles since)", n)
	}
	for deadline := time.Now().Add(10 * time.Second); gogc() > 11; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after the next collection, want the policy's (<= 11)", gogc())
		}
		runtime.GC()
	}
	runtime.KeepAlive(live)
}

// underPolicy starts the policy (10%, 1 MiB) and waits for its percent,
// with a syncHold whose collection reports on collected.
func underPolicy(t *testing.T) (*gcHeadroom, *syncHold, chan struct{}) {
	t.Helper()
	g := startGCHeadroom(10, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); gogc() > 11; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			g.stop()
			t.Fatalf("GOGC %d under the policy, want <= 11", gogc())
		}
		runtime.GC()
	}
	collected := make(chan struct{}, 1)
	return g, &syncHold{hold: g.hold, collect: func() { runtime.GC(); collected <- struct{}{} }}, collected
}

// gcCycles is how many collections the runtime has completed.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// policyBackAfter: once what is over, a collection starts, after which
// the policy's percent is back and no hold is left.
func policyBackAfter(t *testing.T, g *gcHeadroom, collected chan struct{}, what string) {
	t.Helper()
	select {
	case <-collected:
	case <-time.After(10 * time.Second):
		t.Fatalf("no collection started at the end of %s", what)
	}
	for deadline := time.Now().Add(5 * time.Second); gogc() > 11; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after %s's collection, want the policy's (<= 11)", gogc(), what)
		}
	}
	if g.held != 0 {
		t.Errorf("%d holds left after %s", g.held, what)
	}
}
