package daemon

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The collector's policy (issue 9 item 5; docs/operations.md, "Memory").
// A node's live heap is its queue, and Go's default (GOGC=100) lets the
// heap grow to twice what was live at the last collection, pages the
// process then keeps: 1M queued jobs cost twice their bytes in RSS. The
// headroom policy sets the GC percent after each collection so the next
// goal is live + max(min, pct% of live), and never above Go's default.

// gcPercent is the GOGC that puts the heap goal at live + max(min,
// pct% of live): Go's goal is live + (live+scan)*GOGC/100, scan being the
// stacks and globals. At most 100 (no looser than Go's default), at
// least 1 (0 would collect without pause).
func gcPercent(live, scan uint64, pct int, min uint64) int {
	return gcPercentPast(live, scan, 0, pct, min)
}

// gcPercentPast is gcPercent with the goal past the live heap by extra
// more: the heap allocated since the last collection, when the goal is set
// between collections (holdRead).
func gcPercentPast(live, scan, extra uint64, pct int, min uint64) int {
	head := extra + max(min, uint64(float64(live)*float64(pct)/100))
	base := live + scan
	if base == 0 {
		return 100
	}
	p := math.Ceil(float64(head) * 100 / float64(base))
	return int(math.Max(1, math.Min(100, p)))
}

// gcEnvSet names the environment variable that sets the collector's
// policy (GOGC or GOMEMLIMIT), "" if neither: an operator's choice wins.
func gcEnvSet(lookup func(string) (string, bool)) string {
	for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, ok := lookup(k); ok {
			return k
		}
	}
	return ""
}

// gcHeadroom re-applies gcPercent after every collection: a cleanup on a
// sentinel runs once the collection that found it unreachable has swept,
// and arms the next one.
type gcHeadroom struct {
	pct     int
	min     uint64
	mu      sync.Mutex
	stopped bool
	held    int    // holds in force: holdGoal meanwhile
	goal    uint64 // the holds' heap goal in bytes (holdGoal); 0: none held
	samples []metrics.Sample
}

// startGCHeadroom starts the policy (pct > 0); stop ends it and restores
// Go's default (GOGC=100).
func startGCHeadroom(pct int, min uint64) *gcHeadroom {
	g := &gcHeadroom{pct: pct, min: min, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
	}}
	g.arm()
	return g
}

func (g *gcHeadroom) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	debug.SetGCPercent(100)
}

// hold gives the heap room until release is called: around an
// allocation in proportion to the job state. A snapshot encoded whole for
// a standby (270 MB at 1M jobs) overran the policy's goal at once, and
// the collector then charged its marking of the whole heap to whatever
// goroutine allocated next, the node's event loop included: steps of
// 335–375 ms while a standby synced. A recovery's import builds the whole
// state, and under the policy the collector marked it again every 10% of
// growth: exec to recovered at 1M jobs took 2.2–2.7 s, with Go's default
// 1.5–1.6 s. The room is Go's default, or more (holdGoal): Go's default
// alone is twice the live heap, and a primary whose heap in use was
// already past its live heap (1M jobs: 450 MB live, 580 MB in use) met
// it halfway through its 325 MB encoding, its loop's step held 60 ms by
// the collector's assists. The next collection after release sets the
// policy's goal again, with what was built counted in the live heap.
func (g *gcHeadroom) hold() (release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held++
	if !g.stopped {
		live, scan, inUse := g.read()
		g.goal = max(g.goal, holdGoal(live, inUse, g.pct, g.min))
		debug.SetGCPercent(holdPercent(live, scan, g.goal))
	}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.held--
		if g.held == 0 {
			g.goal = 0
		}
	}
}

// holdGoal is the heap goal of a hold taken with inUse bytes in use and
// live bytes live at the last collection: room for as much again as is
// live (a snapshot's encoding is smaller than the state it encodes, an
// import builds one state) past what is in use now, plus the policy's
// headroom.
func holdGoal(live, inUse uint64, pct int, min uint64) uint64 {
	return inUse + live + max(min, uint64(float64(live)*float64(pct)/100))
}

// holdPercent is the GOGC whose goal is goal bytes (Go's goal is live +
// (live+scan)*GOGC/100), and never below Go's default: after a
// collection during the hold, twice the new live heap may be more.
func holdPercent(live, scan, goal uint64) int {
	base := live + scan
	if base == 0 || goal <= live {
		return 100
	}
	p := math.Ceil(float64(goal-live) * 100 / float64(base))
	return int(math.Max(100, math.Min(math.MaxInt32, p)))
}

// holdRead holds the policy as hold does, around one large read whose
// buffer is garbage soon after (a background read: the executor's
// AroundRead); its release, the last hold gone, sets the goal at once to
// the heap in use plus the policy's headroom instead of leaving Go's
// default in force until the next collection (when the heap may have
// doubled). The next collection thus comes when the policy's headroom has
// been allocated past what is in use now, as if the read had not
// happened, and finds the buffer garbage; the heap's peak is the policy's
// plus what was allocated during the hold. A collection forced at the
// release instead marked the whole heap a second time within a second of
// the one the policy's cadence ran anyway, its CPU taken from the nodes'
// request paths while a standby synced (docs/performance.md).
func (g *gcHeadroom) holdRead() (release func()) {
	hold := g.hold()
	return func() {
		hold()
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.held > 0 || g.stopped {
			return
		}
		live, scan, inUse := g.read()
		debug.SetGCPercent(gcPercentPast(live, scan, inUse-min(live, inUse), g.pct, g.min))
	}
}

// syncHold holds the policy while the node syncs a standby by snapshot
// (sm.Node.SnapshotSyncing): the encoded snapshot (300 MB at 1M jobs)
// stays live for the seconds its chunks take, and under the policy's goal
// the collector marked the whole heap back to back meanwhile, charging
// its work to the event loop: a step of 126–347 ms in most 1M-job syncs
// (docs/performance.md, "Scale"). When the sync ends, a collection runs
// at once (collect, in the background): the hold's goal is still in
// force then, far ahead, so it charges nobody, and it sets the policy's
// goal again from the live heap without the snapshot.
// Owned by the event loop goroutine (update runs after each step).
type syncHold struct {
	hold    func() func()
	collect func()
	release func() // nil: not held
}

// update follows the node's snapshot syncs after a step.
func (h *syncHold) update(syncing bool) {
	switch {
	case syncing && h.release == nil:
		h.release = h.hold()
	case !syncing && h.release != nil:
		h.release()
		h.release = nil
		go h.collect()
	}
}

// sentinel has a pointer, so it is never batched with other tiny
// allocations (whose block could keep it alive).
type sentinel struct{ _ *int }

func (g *gcHeadroom) arm() {
	runtime.AddCleanup(&sentinel{}, func(g *gcHeadroom) { g.collected() }, g)
}

func (g *gcHeadroom) collected() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	live, scan, _ := g.read()
	if g.held == 0 {
		debug.SetGCPercent(gcPercent(live, scan, g.pct, g.min))
	} else {
		debug.SetGCPercent(holdPercent(live, scan, g.goal))
	}
	g.arm()
}

// read returns the live heap of the last collection, the stacks and
// globals it scans, and the heap in use now (live and not yet swept
// objects); g.mu is held.
func (g *gcHeadroom) read() (live, scan, inUse uint64) {
	metrics.Read(g.samples)
	var v [4]uint64
	for i, s := range g.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	return v[0], v[1] + v[2], v[3]
}

// gcPolicy starts the headroom policy unless it is off (pct 0) or the
// environment sets the collector's policy; it returns what to log, the
// stop function, the hold functions (hold, holdRead) and the hold that
// follows snapshot syncs (no-ops when not started).
func gcPolicy(pct, minMiB int) (msg string, stop func(), hold, holdRead func() func(), syncs *syncHold) {
	none := func() func() { return func() {} }
	off := &syncHold{hold: none, collect: func() {}}
	if pct <= 0 {
		return "gc: Go's default policy (--gc-headroom 0)", func() {}, none, none, off
	}
	if k := gcEnvSet(os.LookupEnv); k != "" {
		return "gc: " + k + " is set in the environment: --gc-headroom not applied", func() {}, none, none, off
	}
	g := startGCHeadroom(pct, uint64(minMiB)<<20)
	return fmt.Sprintf("gc: heap goal the live heap + max(%d MiB, %d%% of it) (--gc-headroom)", minMiB, pct), g.stop, g.hold, g.holdRead, &syncHold{hold: g.hold, collect: runtime.GC}
}
