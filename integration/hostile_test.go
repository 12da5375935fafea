package integration

// The hostile suite's short versions (issue 20): each attack of
// hostile_attacks_test.go at a small scale (4 s floods), held to the
// same bounds as `make hostile` (hostile_suite_test.go) but one: the
// p99 of the calls that must go on during an attack (the probes of a
// flood, the other worker's submits beside an oversized body) is held to
// shortProbeP99Max, not the 250 ms. That figure is a latency target, met and measured by
// `make hostile` on a quiet machine; here, beside the rest of `make
// test` on a shared one, it failed at 266–845 ms with no starvation
// (every probe answered), so these hold what they test: the primary
// keeps answering. Together they take about 25 s once the attacks are
// fended off; on the code before issue 20's fixes over a minute, as each
// oversized body is read for 10 s.

import (
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// shortProbeP99Max bounds the short floods' probes: far above any
// healthy answer, far below a starved node's (no answer within the
// client's 2 s timeout).
const shortProbeP99Max = time.Second

// reportFlood logs a flood's row and fails the test with each failure.
func reportFlood(t *testing.T, r floodRow) {
	t.Helper()
	t.Logf("\n%s\n%s", floodHeader(), r)
	for _, f := range r.failures {
		t.Error(f)
	}
}

// 1,000 connections from another address that never finish a TLS
// handshake, reopened as soon as they close, for 4 s against the
// primary: its status answers, its peers keep their links (no election),
// a standby restarted meanwhile rejoins, its memory stays bounded.
func TestHostilePreHandshakeFlood(t *testing.T) {
	reportFlood(t, runFlood(t, floodSpec{from: strangerIP, conns: 1000, dur: 4 * time.Second, p99Max: shortProbeP99Max}))
}

// 200 goroutines completing TLS handshakes with a worker certificate of
// their own, holding or dropping each connection, for 4 s: the same
// bounds, with the probes on the dev worker certificate.
func TestHostileHandshakeFlood(t *testing.T) {
	reportFlood(t, runFlood(t, floodSpec{handshakes: true, from: strangerIP, conns: 200, dur: 4 * time.Second, p99Max: shortProbeP99Max}))
}

// Xce-On-Behalf-Of sent straight to the primary from a node's
// certificate and from a client-only certificate named like a node: the
// admin operations are refused and nothing is applied.
func TestHostileForgedOnBehalf(t *testing.T) {
	rows, bad := runForged(t)
	t.Logf("\n%s", forgedTable(rows))
	for _, b := range bad {
		t.Error(b)
	}
}

// A 100 MiB Submit body (Content-Length, chunked, HTTP/2 with and
// without a length) is refused at once with a whole reply while another
// worker's 10 ms submits go on undelayed.
func TestHostileOversizedBody(t *testing.T) {
	f, bad := runOversized(t, 100<<20, shortProbeP99Max)
	t.Logf("\n%s", f)
	for _, b := range bad {
		t.Error(b)
	}
}

// A JSON Claim (no compression) of jobs whose JSON answer outgrows the
// send limit answers the jobs that fit, and every job it moved to
// processing is in the answer: 8 jobs of 1/8 of the payload limit (the
// binary claim's budget takes all 8, their base64 does not fit) and 3
// jobs near the payload limit (one job's base64 alone is over it).
func TestHostileJSONClaimFits(t *testing.T) {
	for _, tc := range []struct{ jobs, payload int }{{8, sm.MaxJobPayload / 8}, {3, sm.MaxJobPayload - 512}} {
		f, bad := runJSONClaim(t, tc.jobs, tc.payload)
		t.Logf("%s; reply %s", f, strings.TrimSpace(f.reply))
		for _, b := range bad {
			t.Error(b)
		}
	}
}
