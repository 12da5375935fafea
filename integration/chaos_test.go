//go:build chaos

package integration

// The chaos campaign (make chaos): a randomized, time-bounded run of real
// faults against three xcecontroller processes with producers, workers
// and a reader running. Faults: kill -9 of any node (restarted after a
// random delay), SIGSTOP/SIGCONT of any node, restart storms, full-cluster
// restarts in random orders, planned switchovers (to a named node or the
// primary's pick, refused or failed ones included: the outcome is logged,
// the history judges), and (with network namespaces, as root)
// partitions of one node or one link. A node that exits by itself is
// restarted, like systemd would. At the end every fault is healed, the
// cluster brought back to full health, every job read back and the
// history checked (checker_test.go). Only built with -tags chaos, so it
// is not part of `go test ./...`.
//
//	make chaos CHAOS_TIME=5m [CHAOS_SEED=N] [CHAOS_ARGS="--mode seed"]

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/client"
)

func TestChaos(t *testing.T) {
	dur := 5 * time.Minute
	if s := os.Getenv("CHAOS_TIME"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("CHAOS_TIME=%q: %v", s, err)
		}
		dur = d
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	args := strings.Fields(os.Getenv("CHAOS_ARGS"))
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	useNetns := os.Geteuid() == 0
	t.Logf("chaos: %v, seed %d (CHAOS_SEED=%d to replay the fault choices), args %q, partitions %v", dur, seed, seed, args, useNetns)

	fc := newFaultCluster(t, fcOpts{nodes: 3, netns: useNetns, args: args})
	const n = 3
	fc.boot()
	l := fc.runLoad(loadOpts{tag: "chaos", producers: 8, workers: 4, readers: 1, claimMax: 16,
		hold: 300 * time.Millisecond, maxLive: 3000, budget: 5_000_000})

	t0 := time.Now()
	deadline := t0.Add(dur)
	actions := map[string]int{}
	logf := func(format string, a ...any) {
		t.Logf("[%7.1fs] %s", time.Since(t0).Seconds(), fmt.Sprintf(format, a...))
	}
	sleep := func(lo, hi time.Duration) {
		d := lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
		if rest := time.Until(deadline); d > rest {
			d = max(rest, 0)
		}
		time.Sleep(d)
	}
	// supervise restarts nodes that exited by themselves (FATAL, or an
	// exit the campaign did not ask for).
	supervise := func(keepDown ...int) {
		for i := 0; i < n; i++ {
			if !fc.c.Running(i) && !slices.Contains(keepDown, i) {
				logf("%s is not running: starting it", fc.name(i))
				fc.start(i)
			}
		}
	}
	running := func() []int {
		var out []int
		for i := 0; i < n; i++ {
			if fc.c.Running(i) {
				out = append(out, i)
			}
		}
		return out
	}
	pick := func(nodes []int) int { return nodes[rng.IntN(len(nodes))] }
	admin, err := client.NewFromFlag(fc.peers, fc.mat, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	for time.Now().Before(deadline) {
		supervise()
		up := running()
		if len(up) == 0 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		kind := rng.IntN(100)
		switch {
		case kind < 25:
			i := pick(up)
			actions["kill -9"]++
			logf("kill -9 %s", fc.name(i))
			fc.kill9(i)
			sleep(0, 3*time.Second)
			fc.start(i)
		case kind < 45:
			i := pick(up)
			d := 300*time.Millisecond + time.Duration(rng.Int64N(int64(2700*time.Millisecond)))
			actions["SIGSTOP"]++
			logf("SIGSTOP %s for %v", fc.name(i), d.Round(time.Millisecond))
			fc.pause(i)
			time.Sleep(d)
			fc.resume(i)
		case kind < 55:
			i := pick(up)
			k := 3 + rng.IntN(3)
			actions["restart storm"]++
			logf("restart storm: %s %d times", fc.name(i), k)
			for j := 0; j < k; j++ {
				fc.kill9(i)
				fc.start(i)
				sleep(100*time.Millisecond, 900*time.Millisecond)
			}
		case kind < 65:
			to := ""
			if rng.IntN(2) == 0 {
				to = fc.name(rng.IntN(n))
			}
			actions["switchover"]++
			t1 := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			rep, err := admin.Switchover(ctx, to)
			cancel()
			if err != nil {
				logf("switchover to %q: %v (after %v)", to, err, time.Since(t1).Round(time.Millisecond))
			} else {
				actions["switchover ok"]++
				logf("switchover to %q: %s leads in term %d (after %v)", to, rep.GetPrimary(), rep.GetTerm(), time.Since(t1).Round(time.Millisecond))
			}
		case kind < 72:
			order := rng.Perm(n)
			actions["full restart"]++
			logf("full-cluster restart, start order %s", fc.names(order))
			fc.kill9(allNodes(n)...)
			sleep(0, 2*time.Second)
			for _, i := range order {
				fc.start(i)
				sleep(0, 3*time.Second)
			}
		case kind < 88 && fc.ns != nil:
			a := rng.IntN(n)
			d := 2*time.Second + time.Duration(rng.Int64N(int64(8*time.Second)))
			if rng.IntN(2) == 0 {
				var others []int
				for b := 0; b < n; b++ {
					if b != a {
						others = append(others, b)
					}
				}
				actions["isolate a node"]++
				logf("partition: %s cut off from the others for %v", fc.name(a), d.Round(time.Millisecond))
				if err := fc.ns.isolate(a, others...); err != nil {
					t.Fatal(err)
				}
			} else {
				b := (a + 1 + rng.IntN(n-1)) % n
				actions["cut a link"]++
				logf("partition: link %s-%s cut for %v", fc.name(a), fc.name(b), d.Round(time.Millisecond))
				if err := fc.ns.cutLink(a, b); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(d)
			fc.ns.heal()
		default:
			actions["calm"]++
			sleep(time.Second, 4*time.Second)
		}
		sleep(200*time.Millisecond, 2*time.Second)
	}
	logf("campaign over; healing")
	r := fc.finish(l)
	var acts []string
	for k, v := range actions {
		acts = append(acts, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(acts)
	ops := len(l.h.snapshot())
	t.Logf("CHAOS SUMMARY: %v, seed %d, faults: %s\n  ops %d, enqueues %d: acked %d, unknown %d, failed %d; worker acks ok %d; LOST %d; ids reused %d; handles reused %d; acked twice %d; non-linearizable %d; stale reads %d",
		dur, seed, strings.Join(acts, ", "), ops, r.enqueues, r.acked, r.unknown, r.failed, r.acksOK, len(r.lost), len(r.idReuse), len(r.handleReuse), len(r.ackedTwice), len(r.illegalWrites), len(r.illegalWithGets))
	r.assertSafe(t)
}
