package integration

// Election, failover and crash safety with real processes and the default
// timings where the time is the point.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
)

// Three processes started together end with exactly one primary, n0, and
// every standby serving its config tag (default timings).
func TestThreeProcessesElectOnePrimary(t *testing.T) {
	c := newCluster(t, 3)
	blob := configBlob(t, "three", 3, 8)
	install(t, c, 0, blob)
	t0 := time.Now()
	start(t, c, 0, 1, 2)
	rows, p := converge(t, c, -1, 20*time.Second)
	t.Logf("cold boot to converged (default timings, status polled every 50 ms): %v", time.Since(t0).Round(time.Millisecond))
	if p != 0 {
		t.Fatalf("primary %s, want n0:\n%s", rows[p].Name, fmtRows(rows))
	}
	primaries := 0
	for i, r := range rows {
		if r.Role == "primary" {
			primaries++
			continue
		}
		if r.Role != "standby" || !r.Serving || r.ConfigTag != tagHex(blob) || r.Term != rows[0].Term {
			t.Fatalf("%s: %+v", r.Name, r)
		}
		verifyConf(t, c, i, blob)
	}
	if primaries != 1 {
		t.Fatalf("%d primaries:\n%s", primaries, fmtRows(rows))
	}
	// A moment later it still holds: no late second primary.
	time.Sleep(600 * time.Millisecond)
	if rows2, p2 := converge(t, c, -1, time.Second); p2 != 0 || rows2[0].Term != rows[0].Term {
		t.Fatalf("cluster changed after converging:\n%s", fmtRows(rows2))
	}
}

// waitAnyPrimary polls nodes until one of them reports primary.
func waitAnyPrimary(t testing.TB, c *clitool.Cluster, nodes []int, timeout time.Duration) (int, time.Time) {
	t.Helper()
	p, at, err := pollPrimary(c, admin(t, c), nodes, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return p, at
}

// pollPrimary polls nodes' status (10 ms) until one of them reports
// primary, and returns it and when.
func pollPrimary(c *clitool.Cluster, mat *tlsconf.Material, nodes []int, timeout time.Duration) (int, time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		rows, err := clitool.Statuses(context.Background(), peersOf(c, nodes...), mat, 300*time.Millisecond)
		if err != nil {
			return -1, time.Now(), err
		}
		now := time.Now()
		for k, r := range rows {
			if r.Up && r.Role == "primary" {
				return nodes[k], now, nil
			}
		}
		if now.After(deadline) {
			return -1, now, fmt.Errorf("no primary among %v within %v:\n%s", nodes, timeout, fmtRows(rows))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill -9 of the primary: a standby promotes within the bound (asserted
// < 5 s; DESIGN §6 targets 2 s with the default timings used here), and
// the old primary, restarted, rejoins as a standby.
func TestFailoverAfterKill9OfPrimary(t *testing.T) {
	c := newCluster(t, 3)
	blob := configBlob(t, "failover", 3, 8)
	install(t, c, 0, blob)
	start(t, c, 0, 1, 2)
	rows, p := converge(t, c, -1, 20*time.Second)
	if p != 0 {
		t.Fatalf("primary %s, want n0", rows[p].Name)
	}
	term := rows[0].Term

	killed := time.Now()
	if code := stop(t, c, 0, syscall.SIGKILL); code != -1 {
		t.Fatalf("n0 exit code %d after SIGKILL, want -1 (signal)", code)
	}
	np, at := waitAnyPrimary(t, c, []int{1, 2}, 10*time.Second)
	took := at.Sub(killed)
	t.Logf("failover after kill -9 of the primary: %s primary after %v", c.Names[np], took.Round(time.Millisecond))
	if took >= 5*time.Second {
		t.Fatalf("failover took %v, bound 5 s", took)
	}
	rows, p = converge(t, c, 0, 10*time.Second)
	if p != 1 {
		t.Fatalf("new primary %s, want n1 (highest live priority):\n%s", rows[p].Name, fmtRows(rows))
	}
	if rows[1].Term <= term {
		t.Fatalf("new primary's term %d not above the old %d", rows[1].Term, term)
	}
	newTerm := rows[1].Term

	off := logOffset(c, 0)
	start(t, c, 0)
	rows, p = converge(t, c, -1, 15*time.Second)
	if p != 1 || rows[0].Role != "standby" || rows[0].Primary != "n1" || rows[1].Term != newTerm {
		t.Fatalf("old primary did not rejoin as a standby of n1 (term %d):\n%s", newTerm, fmtRows(rows))
	}
	waitLog(t, c, 0, off, "starting as standby", time.Second)
	for i := range c.Names {
		verifyConf(t, c, i, blob)
	}
}

// kill -9 of a standby in the middle of a config save: a fresh standby
// fetching a ~900 KB config is killed at random moments around the save;
// after every kill conf/current either verifies or is absent, and no
// versioned file is torn. Finally it boots and converges.
func TestKill9StandbyDuringConfigSave(t *testing.T) {
	c := newCluster(t, 2, fastTimings...)
	blob := configOfSize(t, "big", 900*1024)
	install(t, c, 0, blob)
	start(t, c, 0)
	waitRole(t, c, 0, "primary", 10*time.Second)

	ptr := filepath.Join(confDir(c, 1), "current")
	// Calibrate: how long a fresh standby takes from exec to conf/current.
	var saveAt time.Duration
	for k := 0; k < 2; k++ {
		t0 := time.Now()
		start(t, c, 1)
		for {
			if _, err := os.Stat(ptr); err == nil {
				break
			}
			if time.Since(t0) > 20*time.Second {
				t.Fatal("calibration: n1 never saved the config")
			}
			time.Sleep(2 * time.Millisecond)
		}
		saveAt = max(saveAt, time.Since(t0))
		stop(t, c, 1, syscall.SIGKILL)
		verifyConf(t, c, 1, blob)
		if err := os.RemoveAll(c.NodeDir(1)); err != nil {
			t.Fatal(err)
		}
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	const iters = 20
	t.Logf("fresh standby saves the %d-byte config %v after exec; %d kills at random delays in [0.2, 1.1] x that (seed %d)", len(blob), saveAt.Round(time.Millisecond), iters, seed)
	var absent, complete, leftovers int
	for k := 0; k < iters; k++ {
		delay := time.Duration(float64(saveAt) * (0.2 + 0.9*rng.Float64()))
		start(t, c, 1)
		time.Sleep(delay)
		stop(t, c, 1, syscall.SIGKILL)
		_, tmp := checkVersionedFiles(t, confDir(c, 1))
		leftovers += tmp
		switch _, err := os.Stat(ptr); {
		case errors.Is(err, os.ErrNotExist):
			absent++
		case err != nil:
			t.Fatal(err)
		default:
			if _, err := configtool.Inspect(c.NodeDir(1), 0, time.Now()); err != nil {
				t.Fatalf("kill %d after %v: conf/current exists but does not verify: %v", k, delay, err)
			}
			verifyConf(t, c, 1, blob)
			complete++
			// Start the next round from no config again, keeping any
			// leftovers of interrupted saves.
			if err := os.Remove(ptr); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("after %d kills: conf/current absent %d times, complete and verifying %d times; %d leftover .tmp files seen", iters, absent, complete, leftovers)
	start(t, c, 1)
	rows, p := converge(t, c, -1, 20*time.Second)
	if p != 0 || rows[1].ConfigTag != tagHex(blob) {
		t.Fatalf("final boot:\n%s", fmtRows(rows))
	}
	verifyConf(t, c, 1, blob)
	checkVersionedFiles(t, confDir(c, 1))
}
