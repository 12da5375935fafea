package sim

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

var (
	seedFlag      = flag.Uint64("seed", 0, "replay only this schedule, printing its trace with -v")
	schedulesFlag = flag.Int("schedules", 5000, "schedules TestSimulate runs (the cluster world with its client workload costs ~18 ms of CPU per schedule)")
	firstSeedFlag = flag.Uint64("first-seed", 1, "first seed TestSimulate runs")
	hashesFlag    = flag.String("trace-hashes", "", "write each schedule's seed and trace hash, one per line, to this file (compare two runs with diff: a refactor keeps every line)")
)

// runSeeds runs count schedules from first on every core and returns the
// reports and failures, in seed order.
func runSeeds(first uint64, count int, mutate func(*Scenario)) ([]Report, []*Failure) {
	reps := make([]Report, count)
	fails := make([]*Failure, count)
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sc := Generate(first + uint64(i))
				if mutate != nil {
					mutate(&sc)
				}
				reps[i], fails[i] = NewWorld(sc, nil).Run()
			}
		}()
	}
	for i := 0; i < count; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return reps, fails
}

// TestSimulate is the default simulator run: thousands of generated
// schedules, each checked for S1-S4, S7 and L1-L3. With -seed=N it
// replays that one schedule instead and prints its trace (-v).
func TestSimulate(t *testing.T) {
	if *seedFlag != 0 {
		replay(t, *seedFlag)
		return
	}
	if os.Getenv("GOGC") == "" {
		// A world lives a few MB and allocates ~7 MB per schedule: at Go's
		// default (GOGC=100) the collector ran every ~4 MB, ~40 times a
		// second, and its marking, write barriers and assists were a third
		// of the run. Letting the heap grow to 9x the live one before a
		// collection (5x until 2026-12-04: a tenth of the run was still
		// the collector's) costs a few hundred MB (docs/performance.md).
		// GOGC, if set, wins.
		defer debug.SetGCPercent(debug.SetGCPercent(800))
	}
	start := time.Now()
	reps, fails := runSeeds(*firstSeedFlag, *schedulesFlag, nil)
	wall := time.Since(start)
	if *hashesFlag != "" {
		if err := writeHashes(*hashesFlag, *firstSeedFlag, reps); err != nil {
			t.Fatal(err)
		}
	}
	nfail := 0
	byProp := map[string][]uint64{}
	for _, f := range fails {
		if f != nil {
			nfail++
			byProp[f.Property] = append(byProp[f.Property], f.Seed)
			if nfail <= 5 {
				t.Error(f.Error())
			}
		}
	}
	props := make([]string, 0, len(byProp))
	for p := range byProp {
		props = append(props, p)
	}
	sort.Strings(props)
	for _, p := range props {
		ex := byProp[p]
		t.Logf("%s failed in %d schedules, e.g. seeds %v", p, len(ex), ex[:min(len(ex), 8)])
	}
	var sim time.Duration
	var unanswered, unansweredIn int
	var events, ops, unknown, acked, lost, lossy, catchUps, snapSyncs, truncs, compactions, fulls, behinds int
	var boot, fo, dual []time.Duration
	var sws [8]int
	upHandovers := 0
	for _, r := range reps {
		for i, n := range r.Switchovers {
			sws[i] += n
		}
		upHandovers += r.UpgradeHandovers
		sim += r.SimTime
		events += r.Events
		ops += r.ClientOps
		unknown += r.Unknown
		if r.Unanswered > 0 {
			unanswered += r.Unanswered
			unansweredIn++
		}
		catchUps, snapSyncs, truncs, compactions = catchUps+r.CatchUps, snapSyncs+r.SnapshotSyncs, truncs+r.Truncations, compactions+r.Compactions
		fulls += r.BufferFulls
		behinds += r.Behinds
		if r.Scenario.SeedMode {
			acked += r.Acked
			lost += r.AckedLost
			if r.AckedLost > 0 {
				lossy++
			}
		}
		if r.BootTime > 0 {
			boot = append(boot, r.BootTime)
		}
		if r.FailoverTime > 0 {
			fo = append(fo, r.FailoverTime)
		}
		if r.DualPrimary > 0 {
			dual = append(dual, r.DualPrimary)
		}
	}
	t.Logf("%d schedules (%d failed) in %v: %.0f schedules/s, %d events, simulated %v = %.0fx real time (%d cores)",
		len(reps), nfail, wall.Round(time.Millisecond), float64(len(reps))/wall.Seconds(), events, sim.Round(time.Second), float64(sim)/float64(wall), runtime.GOMAXPROCS(0))
	t.Logf("L6 candidates: %d requests unanswered by the serving primary in %d schedules (seed mode, and quorum mode while the primary had too few synced standbys to commit; the rest fail L6)", unanswered, unansweredIn)
	t.Logf("client requests %d (%d of unknown outcome); seed mode: %d acknowledged writes checked, %d lost, in %d schedules", ops, unknown, acked, lost, lossy)
	t.Logf("standby syncs: %d from the log, %d by snapshot (%d whose records written during the encode overflowed the bound); %d divergent suffixes cut; %d standby checkpoints; %d standbys waited behind with nothing arriving and asked again (repl.behind)", catchUps, snapSyncs, fulls, truncs, compactions, behinds)
	t.Logf("switchovers answered: %d ok, %d failed (did not complete in time), %d refused (not primary %d, busy %d, invalid %d, not in sync %d); config upgrades that handed over: %d",
		sws[sm.SwitchoverOK], sws[sm.SwitchoverFailed], sws[sm.SwitchoverNotPrimary]+sws[sm.SwitchoverBusy]+sws[sm.SwitchoverInvalid]+sws[sm.SwitchoverNotInSync]+sws[sm.SwitchoverDisabled],
		sws[sm.SwitchoverNotPrimary], sws[sm.SwitchoverBusy], sws[sm.SwitchoverInvalid], sws[sm.SwitchoverNotInSync], upHandovers)
	t.Logf("boot-to-converged %s", quantiles(boot))
	t.Logf("failover %s", quantiles(fo))
	t.Logf("dual-primary time in %d schedules %s", len(dual), quantiles(dual))
}

// writeHashes writes "seed trace-hash" for each report, in seed order.
func writeHashes(path string, first uint64, reps []Report) error {
	var b strings.Builder
	for i, r := range reps {
		fmt.Fprintf(&b, "%d %016x\n", first+uint64(i), r.TraceHash)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("-trace-hashes: %w", err)
	}
	return nil
}

func quantiles(d []time.Duration) string {
	if len(d) == 0 {
		return "n=0"
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	q := func(p float64) time.Duration { return d[int(p*float64(len(d)-1))].Round(time.Millisecond) }
	return fmt.Sprintf("n=%d p50=%v p90=%v p99=%v max=%v", len(d), q(.5), q(.9), q(.99), q(1))
}

// TestReplay replays one seed (-seed=N, default 1) and prints its trace
// with -v.
func TestReplay(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = 1
	}
	replay(t, seed)
}

func replay(t *testing.T, seed uint64) {
	sc := Generate(seed)
	t.Logf("scenario: %s", sc)
	rep, f := NewWorld(sc, func(s string) { t.Log(s) }).Run()
	t.Logf("report: events=%d sim=%v boot=%v failover=%v rejoin=%v dual-primary=%v trace-hash=%016x",
		rep.Events, rep.SimTime, rep.BootTime, rep.FailoverTime, rep.RejoinTime, rep.DualPrimary, rep.TraceHash)
	if f != nil {
		t.Fatal(f.Error())
	}
}

// TestDeterminism: one seed run twice gives the identical trace.
func TestDeterminism(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		var a, b []string
		ra, _ := NewWorld(Generate(seed), func(s string) { a = append(a, s) }).Run()
		rb, _ := NewWorld(Generate(seed), func(s string) { b = append(b, s) }).Run()
		if ra.TraceHash != rb.TraceHash || len(a) != len(b) {
			t.Fatalf("seed %d: trace hashes %016x vs %016x (%d vs %d lines)", seed, ra.TraceHash, rb.TraceHash, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("seed %d: traces diverge at line %d:\n%s\n%s", seed, i, a[i], b[i])
			}
		}
		rc, _ := NewWorld(Generate(seed), nil).Run()
		if rc.TraceHash != ra.TraceHash {
			t.Fatalf("seed %d: hash without trace output differs", seed)
		}
	}
}
