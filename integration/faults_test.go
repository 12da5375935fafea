package integration

// Real faults against three real xcecontroller processes with clients
// running (the table, one test per row): kill -9, restarts in
// the orders operators use, SIGSTOP, a partition, a full disk. Each test
// heals the cluster at the end, reads every job back through the primary
// and asserts the job contract of checker_test.go: no acknowledged job
// lost, no id or handle given twice. The default mode (quorum for 3
// nodes) must keep all of it; writes may block or end "outcome unknown"
// while no majority is available, and those are never counted as lost.
//
// The fault windows (5 s, 6 s, 10 s, 1.7 s, ...) are the issue's; they
// are the fault, not a bound on the system: every wait for the system is
// a poll with a generous deadline.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
)

// since is how long ago (history time) at was, for logs.
func ago(h *history, at int64) time.Duration {
	return time.Duration(h.now() - at).Round(time.Millisecond)
}

// TestFaultTermReuseAfterRestartOrder: kill -9 both standbys (n1, n2);
// 5 s; kill -9 the primary (n0); start the standbys (in the issue one
// promotes with term=1, a term n0 already used); 1.2 s of load; kill that
// new primary and start the old one at once. The issue lost every job
// acknowledged in the 1.2 s (1,458 of 1,458): n0's log, longer in the
// same term, won the election and the other standby resynced from it.
func TestFaultTermReuseAfterRestartOrder(t *testing.T) {
	fc := newFaultCluster(t, fcOpts{nodes: 3})
	p, sb := fc.boot()
	term0 := fc.statuses()[p].Term
	l := fc.runLoad(loadOpts{producers: 8, pace: 25 * time.Millisecond, budget: 8000})
	waitAcks(l.h, 200, 0, "", 15*time.Second)

	fc.kill9(sb...)
	t0 := l.h.now()
	time.Sleep(5 * time.Second)
	alone := l.h.count(opEnqueue, outOK, t0, fc.name(p))
	fc.kill9(p)
	fc.start(sb...)
	np, st := fc.waitPrimary(sb, 30*time.Second)
	t.Logf("%s (term %d) acknowledged %d enqueues alone in 5 s; %s promoted with term %d (a term already used: %v)", fc.name(p), term0, alone, st.Name, st.Term, st.Term <= term0)
	t1 := l.h.now()
	time.Sleep(1200 * time.Millisecond)
	served := waitAcks(l.h, 1, t1, st.Name, 10*time.Second)
	t.Logf("%s acknowledged %d enqueues in %v", st.Name, l.h.count(opEnqueue, outOK, t1, st.Name), ago(l.h, t1))
	fc.kill9(np)
	fc.start(p)
	r := fc.finish(l)
	if served == 0 {
		t.Logf("WARNING: %s acknowledged nothing while it was primary: the sequence tested little", st.Name)
	}
	r.assertSafe(t)
}

// TestFaultStartOrderOldPrimaryFirst: kill -9 the primary (n0); a
// standby (n1) serves with the other (n2) in sync for 6 s; kill both;
// start the old primary, then the others 5 s later — the docs' start
// order (node0 first). The issue lost every job of the 6 s (6,228 of
// 6,228): n0, alone, won the boot election with its old log and the
// others resynced from it.
func TestFaultStartOrderOldPrimaryFirst(t *testing.T) {
	fc := newFaultCluster(t, fcOpts{nodes: 3})
	p, sb := fc.boot()
	l := fc.runLoad(loadOpts{producers: 8, pace: 25 * time.Millisecond, budget: 8000})
	waitAcks(l.h, 200, 0, "", 15*time.Second)

	fc.kill9(p)
	_, st := fc.waitPrimary(sb, 30*time.Second)
	fc.waitFollowing(p, 30*time.Second)
	t1 := l.h.now()
	time.Sleep(6 * time.Second)
	t.Logf("%s (term %d) acknowledged %d enqueues in %v with the other standby in sync", st.Name, st.Term, l.h.count(opEnqueue, outOK, t1, st.Name), ago(l.h, t1))
	fc.kill9(sb...)
	fc.start(p)
	t2 := l.h.now()
	time.Sleep(5 * time.Second)
	t.Logf("%s alone for 5 s: acknowledged %d enqueues (status %s)", fc.name(p), l.h.count(opEnqueue, outOK, t2, fc.name(p)), strings.TrimSpace(fmtRows(fc.statuses()[p:p+1])))
	fc.start(sb...)
	r := fc.finish(l)
	r.assertSafe(t)
}

// TestFaultSIGSTOPPrimary: SIGSTOP the primary for about 1.7 s (longer
// than the 1.5 s failure timeout; 1.6 to 2.0 s in turn) under 16
// clients, then SIGCONT; eight times, whichever node is primary. In the
// issue the resumed primary acknowledged the writes that were waiting
// when it stopped, which no standby had, and then stepped down: 16 jobs
// lost in 3 of 6 runs. The clients keep their connections (as a worker
// library would), so their requests reach the paused primary the moment
// it resumes; workers claim and acknowledge jobs across the pauses too.
// The controllers run with GOMAXPROCS=1 (a one-CPU controller: a small VM
// or a CPU-limited unit). That widens the window in which the stopped
// primary holds records it has written but not yet sent to a standby;
// with every CPU it is a few microseconds wide here and the loss shows in
// about one run of ten.
func TestFaultSIGSTOPPrimary(t *testing.T) {
	t.Setenv("GOMAXPROCS", "1") // inherited by the xcecontroller processes only
	fc := newFaultCluster(t, fcOpts{nodes: 3})
	fc.boot()
	l := fc.runLoad(loadOpts{producers: 16, workers: 4, claimMax: 16, hold: 100 * time.Millisecond, maxLive: 4000, budget: 40000})
	waitAcks(l.h, 200, 0, "", 15*time.Second)
	p, rows := fc.waitHealthy(30 * time.Second)
	stops := []time.Duration{1700, 1900, 1600, 2000}
	for round := 0; round < 8; round++ {
		d := stops[round%len(stops)] * time.Millisecond
		fc.pause(p)
		time.Sleep(d)
		resumed := l.h.now()
		fc.resume(p)
		np, rows2 := fc.waitStable(30*time.Second, 1)
		t.Logf("round %d: %s (term %d) stopped %v; after SIGCONT it acknowledged %d enqueues; now %s is primary (term %d)",
			round, rows[p].Name, rows[p].Term, d, l.h.count(opEnqueue, outOK, resumed, rows[p].Name), rows2[np].Name, rows2[np].Term)
		p, rows = np, rows2
	}
	r := fc.finish(l)
	r.assertSafe(t)
}

// TestFaultPartitionPrimary: the primary is cut off from both standbys
// for 10 s (network namespaces, blackhole routes) while clients still
// reach it. In the issue both sides were primary for the 10 s and the
// old primary's writes were lost when the partition healed (11,310).
func TestFaultPartitionPrimary(t *testing.T) {
	fc := newFaultCluster(t, fcOpts{nodes: 3, netns: true})
	p, sb := fc.boot()
	l := fc.runLoad(loadOpts{producers: 8, pace: 25 * time.Millisecond, budget: 8000})
	waitAcks(l.h, 200, 0, "", 15*time.Second)

	if err := fc.ns.isolate(p, sb...); err != nil {
		t.Fatal(err)
	}
	t0 := l.h.now()
	most, both := 0, time.Duration(0)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		before := time.Now()
		n := len(primaries(fc.statuses(), allNodes(3)))
		most = max(most, n)
		time.Sleep(250 * time.Millisecond)
		if n > 1 {
			both += time.Since(before)
		}
	}
	var per []string
	for i := range fc.c.Names {
		per = append(per, fmt.Sprintf("%s %d", fc.name(i), l.h.count(opEnqueue, outOK, t0, fc.name(i))))
	}
	t.Logf("%s cut off for 10 s: enqueues acknowledged by %s; up to %d primaries at once (two for ~%v)",
		fc.name(p), strings.Join(per, ", "), most, both.Round(100*time.Millisecond))
	fc.ns.heal()
	r := fc.finish(l)
	r.assertSafe(t)
}

// standbysKilledPrimaryAlone is the row: kill -9 both standbys;
// the primary goes on alone (in seed mode it acknowledges writes again
// after ~1.8 s); kill it; start the standbys first, then it.
func standbysKilledPrimaryAlone(t *testing.T, fc *faultCluster, l *load, p int, sb []int) {
	waitAcks(l.h, 200, 0, "", 15*time.Second)
	fc.kill9(sb...)
	t0 := l.h.now()
	time.Sleep(4 * time.Second)
	alone := l.h.count(opEnqueue, outOK, t0, fc.name(p))
	fc.kill9(p)
	fc.start(sb...)
	_, st := fc.waitPrimary(sb, 30*time.Second)
	t1 := l.h.now()
	served := waitAcks(l.h, 100, t1, st.Name, 15*time.Second)
	t.Logf("%s acknowledged %d enqueues alone in 4 s; then %s (term %d) acknowledged %d", fc.name(p), alone, st.Name, st.Term, served)
	fc.start(p)
}

// TestFaultStandbysKilledPrimaryAlone: the issue lost 2,402 of 2,414
// acknowledged jobs (those the lone primary acknowledged).
func TestFaultStandbysKilledPrimaryAlone(t *testing.T) {
	fc := newFaultCluster(t, fcOpts{nodes: 3})
	p, sb := fc.boot()
	l := fc.runLoad(loadOpts{producers: 8, pace: 25 * time.Millisecond, budget: 8000})
	standbysKilledPrimaryAlone(t, fc, l, p, sb)
	r := fc.finish(l)
	r.assertSafe(t)
}

// TestFaultHandlesNotReused: the same sequence with workers claiming
// jobs, holding each claim up to 1 s and acknowledging it, and a reader
// getting acknowledged jobs back. In the issue, after the loss the new
// primary gave the lost jobs' ids (and so their id:attempt handles) to
// other jobs, and a worker could acknowledge someone else's job.
// Asserted: no id given to two payloads, no handle handed out or
// acknowledged ok twice, no acknowledged job lost.
func TestFaultHandlesNotReused(t *testing.T) {
	fc := newFaultCluster(t, fcOpts{nodes: 3})
	p, sb := fc.boot()
	l := fc.runLoad(loadOpts{producers: 6, workers: 6, readers: 1, hold: time.Second, pace: 25 * time.Millisecond, budget: 8000})
	standbysKilledPrimaryAlone(t, fc, l, p, sb)
	r := fc.finish(l)
	t.Logf("ids given to two payloads: %d, handles handed out twice: %d, handles acked twice: %d", len(r.idReuse), len(r.handleReuse), len(r.ackedTwice))
	if r.claimedJobs == 0 || r.acksOK == 0 {
		t.Errorf("the workers claimed %d jobs and acked %d: the test exercised no handles", r.claimedJobs, r.acksOK)
	}
	r.assertSafe(t)
}

// TestFaultSeedModeLossMeasured runs the standbys-killed sequence with
// --mode seed (the seed's availability: a lone primary acknowledges
// writes no standby holds) and MEASURES the loss, for the docs; it is
// not asserted zero (seed mode is documented to lose them). It asserts
// only that the harness saw acknowledged writes.
func TestFaultSeedModeLossMeasured(t *testing.T) {
	fc := newFaultCluster(t, fcOpts{nodes: 3, args: []string{"--mode", "seed"}})
	p, sb := fc.boot()
	l := fc.runLoad(loadOpts{producers: 8, pace: 25 * time.Millisecond, budget: 8000})
	standbysKilledPrimaryAlone(t, fc, l, p, sb)
	r := fc.finish(l)
	t.Logf("MEASURED --mode seed, standbys killed, primary alone 4 s, standbys started first: %d of %d acknowledged jobs lost, %d ids given to two payloads",
		len(r.lost), r.acked, len(r.idReuse))
	if r.acked == 0 {
		t.Fatal("no enqueue was acknowledged: nothing measured")
	}
}

// TestFaultStandbyDiskFull: one standby gets a fresh work dir on a small
// tmpfs, joins (fetching the config and the job state there), and the
// tmpfs is filled up while the load runs; then it is restarted on the
// full disk, so that it tries to sync there too. The primary must keep
// acknowledging with the other standby; status should show the broken
// one as not in sync. After the space is freed and the standby
// restarted, nothing acknowledged is missing.
func TestFaultStandbyDiskFull(t *testing.T) {
	fc := newFaultCluster(t, fcOpts{nodes: 3})
	_, sb := fc.boot()
	good, bad := sb[0], sb[1]
	l := fc.runLoad(loadOpts{producers: 8, pace: 25 * time.Millisecond, budget: 8000})
	waitAcks(l.h, 200, 0, "", 15*time.Second)

	fc.kill9(bad)
	dir := fc.c.NodeDir(bad)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs on %s's work dir (needs root): %v: %s", fc.name(bad), err, out)
	}
	t.Cleanup(func() {
		fc.resumeAll()
		fc.c.Stop() // before the unmount: the node holds files there
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	fc.start(bad)
	fc.waitHealthy(30 * time.Second)

	filler := filepath.Join(dir, "filler")
	n, err := fillDisk(filler)
	if err != nil {
		t.Fatal(err)
	}
	t0 := l.h.now()
	t.Logf("filled %s's tmpfs with %d bytes", fc.name(bad), n)
	time.Sleep(2 * time.Second)
	// Make it (re)join on the full disk: its snapshot install must fail.
	if fc.c.Running(bad) {
		t.Logf("%s still running 2 s after its disk filled; restarting it on the full disk", fc.name(bad))
		fc.kill9(bad)
	} else {
		t.Logf("%s exited after its disk filled; restarting it on the full disk", fc.name(bad))
	}
	fc.start(bad)
	t1 := l.h.now()
	time.Sleep(6 * time.Second)
	t2 := l.h.now()
	acks := l.h.count(opEnqueue, outOK, t1, "")
	gap := l.h.maxGap(t1, t2)
	rows := fc.statuses()
	t.Logf("6 s with %s on a full disk: %d enqueues acknowledged (%d since the fill), longest stretch without an ack %v; %s running: %v; status:\n%s",
		fc.name(bad), acks, l.h.count(opEnqueue, outOK, t0, ""), gap.Round(time.Millisecond), fc.name(bad), fc.c.Running(bad), fmtRows(rows))
	if acks < 100 || gap > 3*time.Second {
		t.Errorf("with one standby on a full disk and the other healthy the primary acknowledged %d enqueues in 6 s, none for %v: the broken standby holds writes up", acks, gap.Round(time.Millisecond))
	}
	checkStatusShowsLag(t, rows, good, bad)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	fc.kill9(bad)
	r := fc.finish(l)
	r.assertSafe(t)
}

// fillDisk writes path until the file system is full.
func fillDisk(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for _, size := range []int{1 << 20, 4096, 1} {
		buf := make([]byte, size)
		for {
			k, err := f.Write(buf)
			n += int64(k)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return n, err
			}
		}
	}
	return n, f.Sync()
}

// checkStatusShowsLag asserts that status tells the broken standby from
// the healthy one: the primary's row lists each standby's replication
// state; the healthy one is in sync (or a batch behind), the one on the
// full disk never finished its sync.
func checkStatusShowsLag(t *testing.T, rows []clitool.PeerStatus, healthy, broken int) {
	t.Helper()
	if !rows[broken].Up {
		t.Logf("status: %s is down (it did not survive the full disk)", rows[broken].Name)
	}
	var prim *clitool.PeerStatus
	for i := range rows {
		if rows[i].Up && rows[i].Role == "primary" {
			prim = &rows[i]
		}
	}
	if prim == nil {
		t.Fatalf("no primary in status %+v", rows)
	}
	states := map[string]string{}
	for _, s := range prim.Standbys {
		states[s.Name] = s.State
	}
	h, b := states[rows[healthy].Name], states[rows[broken].Name]
	// Under load a healthy standby may be a batch behind ("lagging") at the
	// moment of the poll; the broken one never finished its sync.
	healthyOK := h == "in sync" || h == "lagging"
	brokenOK := b == "syncing" || b == "silent" || b == "not joined" || strings.HasPrefix(b, "failing: ")
	if !healthyOK || !brokenOK {
		t.Errorf("primary %s shows %s (healthy) as %q and %s (full disk) as %q; want in sync or lagging, and syncing, silent or not joined: %+v", prim.Name, rows[healthy].Name, h, rows[broken].Name, b, prim.Standbys)
		return
	}
	t.Logf("status on %s: %s %q, %s %q", prim.Name, rows[healthy].Name, h, rows[broken].Name, b)
}
