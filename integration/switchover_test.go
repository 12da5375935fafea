package integration

// Planned switchover with real xcecontroller processes, the real
// `xcecli switchover` and `xce-config push` binaries and the fault tests'
// client history (history_test.go): switchovers in a row under load, a
// config upgrade that hands over before the old primary restarts, and
// the refusals. Every wait for the system is a poll with a generous
// deadline; the figures (how long a handover took, the longest stretch
// without an acknowledged submit) are logged, not asserted: the benchmark
// in switchover_bench_test.go measures them.

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/schema"
)

// switchoverCLI runs `xcecli switchover` with the admin certificate
// (--to to unless ""), and returns its combined output and exit code.
func switchoverCLI(t testing.TB, c *clitool.Cluster, to string) (string, int) {
	t.Helper()
	args := append([]string{"switchover"}, strings.Fields(c.ClientFlags())...)
	args = append(args, "--timeout", "5s")
	if to != "" {
		args = append(args, "--to", to)
	}
	return runTool(t, exec.Command(filepath.Join(binDir, "xcecli"), args...))
}

var switchedLine = regexp.MustCompile(`^switched over: (\S+) is primary \(term (\d+)\) after (\S+)\n$`)

// switchedOver parses the success line of `xcecli switchover`: the new
// primary, its term and the time the call took.
func switchedOver(t testing.TB, c *clitool.Cluster, out string) (int, uint64, time.Duration) {
	t.Helper()
	m := switchedLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("xcecli switchover printed %q, want the success line", out)
	}
	p := nodeIndex(c, m[1])
	term, err := strconv.ParseUint(m[2], 10, 64)
	took, err2 := time.ParseDuration(m[3])
	if p < 0 || err != nil || err2 != nil {
		t.Fatalf("xcecli switchover printed %q: node %d, %v, %v", out, p, err, err2)
	}
	return p, term, took
}

func nodeIndex(c *clitool.Cluster, name string) int {
	for i, n := range c.Names {
		if n == name {
			return i
		}
	}
	return -1
}

// waitSynced polls until p is the primary and every other node is a
// standby it counts in sync (or a batch behind under load: the handover
// waits for that): what a switchover to any of them needs.
func (fc *faultCluster) waitSynced(p int, timeout time.Duration) []clitool.PeerStatus {
	fc.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rows := fc.statuses()
		if rows[p].Up && rows[p].Role == "primary" && len(rows[p].Standbys) == len(rows)-1 {
			ok := true
			for _, s := range rows[p].Standbys {
				ok = ok && (s.State == "in sync" || s.State == "lagging")
			}
			if ok {
				return rows
			}
		}
		if time.Now().After(deadline) {
			fc.t.Fatalf("%s's standbys not all in sync within %v: %+v\n%s", fc.name(p), timeout, rows[p].Standbys, fmtRows(rows))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// switchoverLoad is the fault tests' load, producers and workers, paced
// so that the job state stays small enough to replicate in one message.
var switchoverLoad = loadOpts{producers: 8, workers: 4, hold: 200 * time.Millisecond, pace: 25 * time.Millisecond, maxLive: 4000, budget: 20000}

// TestSwitchoverUnderLoad: six switchovers in a row under load, to a
// named standby and to the primary's pick in turn; each answers with a
// new primary in a higher term, the load goes on there, and the full
// history check holds: no acknowledged job lost, no id or handle given
// twice, every job's history linearizable.
func TestSwitchoverUnderLoad(t *testing.T) {
	fc := newFaultCluster(t, fcOpts{nodes: 3, args: fastTimings})
	p, _ := fc.boot()
	l := fc.runLoad(switchoverLoad)
	waitAcks(l.h, 200, 0, "", 15*time.Second)
	term := fc.statuses()[p].Term
	for round := 0; round < 6; round++ {
		fc.waitSynced(p, 30*time.Second)
		to := ""
		if round%2 == 0 {
			to = fc.name((p + 1) % 3)
		}
		t0 := l.h.now()
		out, code := switchoverCLI(t, fc.c, to)
		if code != 0 {
			t.Fatalf("round %d: xcecli switchover --to %q: exit %d: %s", round, to, code, out)
		}
		np, nterm, took := switchedOver(t, fc.c, out)
		switch {
		case np == p:
			t.Fatalf("round %d: switchover answered %q: %s is still the primary", round, out, fc.name(p))
		case to != "" && fc.name(np) != to:
			t.Fatalf("round %d: switchover --to %s answered %q", round, to, out)
		case nterm <= term:
			t.Fatalf("round %d: %s leads in term %d, not above %d", round, fc.name(np), nterm, term)
		}
		t1 := l.h.now()
		if got := waitAcks(l.h, 50, t1, fc.name(np), 15*time.Second); got < 50 {
			t.Fatalf("round %d: %s acknowledged %d enqueues in 15 s after it took over", round, fc.name(np), got)
		}
		t.Logf("round %d: --to %q: %s -> %s (term %d) in %v; longest stretch without an acknowledged enqueue from the call on: %v",
			round, to, fc.name(p), fc.name(np), nterm, took, l.h.maxGap(t0, l.h.now()).Round(time.Millisecond))
		p, term = np, nterm
	}
	r := fc.finish(l)
	if r.acked == 0 {
		t.Fatal("no enqueue was acknowledged")
	}
	r.assertSafe(t)
}

// TestUpgradeUsesSwitchover: a config upgrade (a queue more) under load
// in quorum mode. The primary ACKs, hands its role to a standby that
// saved the new config, and exits 0 to restart; the new primary runs the
// new config (the new queue takes jobs) while the old one is down; once
// it is back the cluster converges on the new config, and no
// acknowledged job is lost.
//
// A standby that sees the new tag in the primary's heartbeats before the
// push arrives fetches the config and resyncs; the handover waits for
// that sync, so the upgrade must hand over every time.
func TestUpgradeUsesSwitchover(t *testing.T) {
	fc := newFaultCluster(t, fcOpts{nodes: 3, args: fastTimings})
	p, _ := fc.boot()
	l := fc.runLoad(switchoverLoad)
	waitAcks(l.h, 200, 0, "", 15*time.Second)

	fc.waitSynced(p, 30*time.Second)
	const gen = 2
	next := configBlob(t, "faults", 5, 0)
	saved := upgraded(t, next, gen)
	exited := fc.c.Exited(p)
	off := logOffset(fc.c, p)
	t0 := l.h.now()
	out, code := pushCLI(t, fc.c, next, "")
	if code != 0 || strings.TrimSpace(out) != ackLine(saved, 2) {
		t.Fatalf("push: exit %d, output %q; want %q", code, out, ackLine(saved, 2))
	}
	line := waitLog(t, fc.c, p, off, "Config upgraded to tag="+tagHex(saved)+" by CN=admin — ", 5*time.Second)
	if code := exitCode(t, exited); code != 0 {
		t.Fatalf("%s exit code %d after the upgrade, want 0 (restart)", fc.name(p), code)
	}
	m := regexp.MustCompile(`handing over to (\S+), then restarting`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("the upgrade restarted %s without a handover: %s", fc.name(p), strings.TrimSpace(line))
	}
	if nodeIndex(fc.c, m[1]) < 0 || m[1] == fc.name(p) {
		t.Fatalf("%s logged %q: no handover to another node", fc.name(p), line)
	}
	to := m[1]
	done := waitLog(t, fc.c, p, off, "switchover done: "+to+" leads in term", time.Second)

	// The new primary leads on the new config while the old one is down.
	var others []int
	for i := range fc.c.Names {
		if i != p {
			others = append(others, i)
		}
	}
	np, st := fc.waitPrimary(others, 10*time.Second)
	if fc.name(np) != to || st.ConfigTag != tagHex(saved) || st.Generation != gen {
		t.Fatalf("%s leads with tag %s generation %d; want %s with %s generation %d", st.Name, st.ConfigTag, st.Generation, to, tagHex(saved), gen)
	}
	if got := waitAcks(l.h, 50, l.h.now(), st.Name, 15*time.Second); got < 50 {
		t.Fatalf("%s acknowledged %d enqueues in 15 s after the handover", st.Name, got)
	}
	t.Logf("%s; longest stretch without an acknowledged enqueue from the push on: %v", strings.TrimSpace(done), l.h.maxGap(t0, l.h.now()).Round(time.Millisecond))
	jc, err := newDoer(fc.peers, fc.mat, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer jc.Close()
	newQueue := fmt.Sprintf("q%06d-", 3+gen) // the upgrade's added queue
	res, err := jc.Do(context.Background(), &schema.SubmitRequest{Queue: newQueue, Payload: []byte("on the new queue")})
	if err != nil || res.Peer != st.Name || len(res.Reply.GetJobs()) != 1 {
		t.Fatalf("submit to the upgrade's new queue %s: %v, %v", newQueue, res, err)
	}

	fc.start(p) // the service manager's restart
	r := fc.finish(l)
	rows := fc.statuses()
	checkConverged(t, rows, saved, gen)
	r.assertSafe(t)
}

// TestSwitchoverRefusals: a target that is no member (the CLI's usage
// error, the API's invalid_argument naming the members), the primary
// itself, a standby that is down (failed_precondition with the reason),
// and a worker's certificate (permission_denied). None of them moves the
// primary role, and the primary keeps taking writes.
func TestSwitchoverRefusals(t *testing.T) {
	fc := newFaultCluster(t, fcOpts{nodes: 3, args: fastTimings})
	p, sb := fc.boot()
	fc.waitSynced(p, 30*time.Second)
	term := fc.statuses()[p].Term

	out, code := switchoverCLI(t, fc.c, "n9")
	if code != 2 || !strings.Contains(out, `--to "n9": no such member (the members are n0, n1, n2)`) {
		t.Fatalf("switchover --to n9: exit %d: %s", code, out)
	}
	cl, err := client.NewFromFlag(fc.peers, fc.mat, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Switchover(context.Background(), "n9"); connect.CodeOf(err) != connect.CodeInvalidArgument ||
		!strings.Contains(err.Error(), `switchover to "n9": no such member (the members are n0, n1, n2)`) {
		t.Fatalf("API switchover to n9: %v", err)
	}

	out, code = switchoverCLI(t, fc.c, fc.name(p))
	if code != 1 || !strings.Contains(out, fc.name(p)+" is already the primary") || !strings.Contains(out, "invalid_argument") {
		t.Fatalf("switchover to the primary: exit %d: %s", code, out)
	}

	worker, err := fc.c.Cert(configtool.WorkerCN)
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewFromFlag(fc.peers, worker, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	if _, err := wc.Switchover(context.Background(), ""); connect.CodeOf(err) != connect.CodePermissionDenied ||
		!strings.Contains(err.Error(), `switchover needs the admin role; certificate "worker" has the worker role`) {
		t.Fatalf("a worker's switchover: %v", err)
	}

	// A standby that is down: refused once the primary stops counting it
	// in sync (before that the handover would begin, and time out).
	down := sb[0]
	fc.kill9(down)
	deadline := time.Now().Add(15 * time.Second)
	for {
		rows := fc.statuses()
		state := "not joined"
		for _, s := range rows[p].Standbys {
			if s.Name == fc.name(down) {
				state = s.State
			}
		}
		if state != "in sync" && state != "lagging" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still shows %s %s 15 s after kill -9", fc.name(p), fc.name(down), state)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, code = switchoverCLI(t, fc.c, fc.name(down))
	if code != 1 || !strings.Contains(out, "failed_precondition") ||
		!strings.Contains(out, fc.name(down)+" is not in sync") && !strings.Contains(out, fc.name(down)+" is not a joined standby") {
		t.Fatalf("switchover to the stopped %s: exit %d: %s", fc.name(down), code, out)
	}
	_, err = cl.Switchover(context.Background(), fc.name(down))
	var ne *client.NodeError
	if !errors.As(err, &ne) || ne.Code() != connect.CodeFailedPrecondition || ne.Node != fc.name(p) {
		t.Fatalf("API switchover to the stopped %s: %v", fc.name(down), err)
	}

	rows := fc.statuses()
	if !rows[p].Up || rows[p].Role != "primary" || rows[p].Term != term {
		t.Fatalf("after the refusals %s is %s in term %d, want primary in term %d:\n%s", fc.name(p), rows[p].Role, rows[p].Term, term, fmtRows(rows))
	}
	jc, err := newDoer(fc.peers, fc.mat, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer jc.Close()
	if res, err := jc.Do(context.Background(), &schema.SubmitRequest{Queue: fc.queues[0], Payload: []byte("after the refusals")}); err != nil || res.Peer != fc.name(p) {
		t.Fatalf("submit after the refusals: %v, %v", res, err)
	}
}
