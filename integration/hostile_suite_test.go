//go:build hostile

package integration

// The hostile suite (make hostile; issue 20): every attack of
// hostile_attacks_test.go at full scale against a fresh 3-node cluster,
// each held to the bounds of hostile_checks_test.go, with one table per
// attack at the end. The floods run from a second loopback address (a
// stranger on another host) and from 127.0.0.1 (the nodes' and the
// probes' own address). Only built with -tags hostile, so it is not part
// of `go test ./...`; its short versions are (hostile_test.go).
//
//	make hostile [HOSTILE_TIME=20s] [HOSTILE_CONNS=1000] [HOSTILE_HANDSHAKERS=200]

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration (%v)", name, s, err)
	}
	return d
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number (%v)", name, s, err)
	}
	return n
}

func TestHostileSuite(t *testing.T) {
	dur := envDuration(t, "HOSTILE_TIME", 20*time.Second)
	conns := envInt(t, "HOSTILE_CONNS", 1000)
	handshakers := envInt(t, "HOSTILE_HANDSHAKERS", 200)
	var tables []string
	var floods []floodRow
	for _, spec := range []floodSpec{
		{from: strangerIP, conns: conns, dur: dur},
		{from: sameHostIP, conns: conns, dur: dur},
		{handshakes: true, from: strangerIP, conns: handshakers, dur: dur},
		{handshakes: true, from: sameHostIP, conns: handshakers, dur: dur},
	} {
		r := floodRow{spec: spec, stats: &floodStats{}, rejoin: -1, failures: []string{"did not run to the end"}}
		t.Run(strings.ReplaceAll(spec.name(), " ", "-")+"-from-"+spec.from.String(), func(t *testing.T) {
			r = runFlood(t, spec)
			reportFlood(t, r)
		})
		floods = append(floods, r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "floods against the primary for %v each (probes: ClusterStatus every 100 ms, every 3rd on a new connection; bounds: >= %.0f %% ok, p99 <= %v, RSS <= %s; samehost rows: probes and rejoin not held to the bounds)\n%s\n",
		dur, 100*probeSuccessMin, probeP99Max, mib(floodRSSMax), floodHeader())
	for _, r := range floods {
		fmt.Fprintln(&b, r)
	}
	tables = append(tables, b.String())

	t.Run("forged-on-behalf", func(t *testing.T) {
		rows, bad := runForged(t)
		tables = append(tables, "forged Xce-On-Behalf-Of, straight to the primary:\n"+forgedTable(rows)+fmt.Sprintf("%d failures\n", len(bad)))
		for _, x := range bad {
			t.Error(x)
		}
	})
	t.Run("oversized-body", func(t *testing.T) {
		f, bad := runOversized(t, 100<<20, probeP99Max)
		tables = append(tables, f.String()+fmt.Sprintf("%d failures\n", len(bad)))
		for _, x := range bad {
			t.Error(x)
		}
	})
	t.Run("json-claim", func(t *testing.T) {
		var lines []string
		for _, tc := range []struct{ jobs, payload int }{{8, sm.MaxJobPayload / 8}, {16, sm.MaxJobPayload / 16}, {3, sm.MaxJobPayload - 512}} {
			f, bad := runJSONClaim(t, tc.jobs, tc.payload)
			lines = append(lines, fmt.Sprintf("%s: %d failures", f, len(bad)))
			for _, x := range bad {
				t.Error(x)
			}
		}
		tables = append(tables, "JSON Claim (no compression) whose answer outgrows the send limit:\n"+strings.Join(lines, "\n")+"\n")
	})
	t.Logf("HOSTILE SUMMARY\n%s", strings.Join(tables, "\n"))
}
