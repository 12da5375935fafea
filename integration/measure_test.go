package integration

// Wall-clock measurements with real processes on loopback, recorded in
// docs/performance.md ("Real processes on loopback"). They are benchmarks,
// so the ordinary suite never runs them or asserts on wall-clock time;
// each iteration is one run, and the median is reported:
//
//	go test ./integration -run '^$' -bench . -benchtime 5x -timeout 20m

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

func report(t testing.TB, what string, ds []time.Duration, target string) {
	t.Helper()
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Round(time.Millisecond).String()
	}
	t.Logf("RESULT %s: median %v over %d runs [%s]; target %s", what, median(ds).Round(time.Millisecond), len(ds), strings.Join(parts, " "), target)
}

// waitFiles polls (1 ms) until every path exists and returns when.
func waitFiles(t testing.TB, timeout time.Duration, paths ...string) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		all := true
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				all = false
				break
			}
		}
		now := time.Now()
		if all {
			return now
		}
		if now.After(deadline) {
			t.Fatalf("%v not all present within %v", paths, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// logTime is the timestamp of the first line of text containing want.
func logTime(t testing.TB, text, want string) time.Time {
	t.Helper()
	line := findLine(text, want)
	ts, _, _ := strings.Cut(line, "\t")
	at, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts)
	if err != nil {
		t.Fatalf("no timestamped line with %q: %v", want, err)
	}
	return at
}

// Cold boot of 3 nodes (config on n0 only, default timings) to "all
// standbys configured": both standbys' conf/current exist, confirmed by
// status right after. Target: election deadline + 100 ms = 2.3 s.
func BenchmarkColdBoot(b *testing.B) {
	t, runs := b, b.N
	var boot, serving []time.Duration
	for r := 0; r < runs; r++ {
		c := newCluster(t, 3)
		blob := configBlob(t, "bench", 3, 8)
		install(t, c, 0, blob)
		t0 := time.Now()
		start(t, c, 0, 1, 2)
		at := waitFiles(t, 20*time.Second, filepath.Join(confDir(c, 1), "current"), filepath.Join(confDir(c, 2), "current"))
		rows, p := converge(t, c, -1, 10*time.Second)
		serving = append(serving, time.Since(t0))
		if p != 0 || rows[1].ConfigTag != tagHex(blob) || rows[2].ConfigTag != tagHex(blob) {
			t.Fatalf("run %d:\n%s", r, fmtRows(rows))
		}
		boot = append(boot, at.Sub(t0))
		c.Stop()
	}
	report(t, "cold boot to all standbys configured (conf/current on n1 and n2)", boot, "<= 2.3 s")
	report(t, "cold boot to converged as seen by status polling (50 ms)", serving, "-")
}

// Failover after kill -9 of the primary (default timings): from the
// SIGKILL to a standby reporting primary (status polled every 10 ms).
// Target: 2 s.
func BenchmarkFailover(b *testing.B) {
	t, runs := b, b.N
	var fo, conv []time.Duration
	for r := 0; r < runs; r++ {
		c := newCluster(t, 3)
		blob := configBlob(t, "bench", 3, 8)
		install(t, c, 0, blob)
		start(t, c, 0, 1, 2)
		converge(t, c, -1, 20*time.Second)
		time.Sleep(time.Duration(r) * 97 * time.Millisecond) // spread the kill over the heartbeat phase
		killed := time.Now()
		stop(t, c, 0, syscall.SIGKILL)
		_, at := waitAnyPrimary(t, c, []int{1, 2}, 10*time.Second)
		fo = append(fo, at.Sub(killed))
		converge(t, c, 0, 10*time.Second)
		conv = append(conv, time.Since(killed))
		c.Stop()
	}
	report(t, "failover: kill -9 of the primary to a standby reporting primary", fo, "<= 2 s")
	report(t, "failover: kill -9 to converged again (n2 standby of n1, seen by 50 ms polling)", conv, "-")
}

// Config replication latency: a fresh standby (empty work dir) started
// against a running primary, from exec to its conf/current existing; and,
// from the standby's own log, from its fetch request to "config received
// and saved" (ms timestamps).
func BenchmarkReplication(b *testing.B) {
	t, runs := b, b.N
	for _, sz := range []struct {
		label string
		size  int
	}{{"10 KB", 10 * 1024}, {"1 MiB", sm.MaxConfigSize}} {
		c := newCluster(t, 2)
		blob := configOfSize(t, "bench", sz.size)
		install(t, c, 0, blob)
		start(t, c, 0)
		waitRole(t, c, 0, "primary", 10*time.Second)
		var total, fetch []time.Duration
		for r := 0; r < runs; r++ {
			if err := os.RemoveAll(c.NodeDir(1)); err != nil {
				t.Fatal(err)
			}
			off := logOffset(c, 1)
			t0 := time.Now()
			start(t, c, 1)
			at := waitFiles(t, 20*time.Second, filepath.Join(confDir(c, 1), "current"))
			total = append(total, at.Sub(t0))
			waitLog(t, c, 1, off, "HA: config received and saved", 5*time.Second)
			log := logSince(c, 1, off)
			fetch = append(fetch, logTime(t, log, "HA: config received and saved").Sub(logTime(t, log, "HA: requesting cluster config")))
			verifyConf(t, c, 1, blob)
			stop(t, c, 1, syscall.SIGTERM)
		}
		what := "replication of a " + strconv.Itoa(len(blob)) + "-byte (" + sz.label + ") config"
		report(t, what+": standby exec to conf/current", total, "-")
		report(t, what+": fetch request to saved (standby log)", fetch, "-")
		c.Stop()
	}
}
