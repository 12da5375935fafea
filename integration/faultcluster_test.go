package integration

// The cluster the fault tests drive: clitool.Cluster's processes, on
// loopback or each node in its own network namespace (netns_test.go) so
// that links can be cut, with kill -9, SIGSTOP/SIGCONT, restarts, status
// polls and the read-back of every job through the healed cluster's
// primary.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/schema"
)

type faultCluster struct {
	t      testing.TB
	c      *clitool.Cluster
	ns     *netns // nil: plain loopback
	peers  string // the --peers string clients and status use
	mat    *tlsconf.Material
	queues []string

	mu     sync.Mutex
	paused map[int]bool
}

type fcOpts struct {
	nodes  int
	netns  bool     // each node in its own network namespace (needs root)
	args   []string // extra xcecontroller flags (e.g. --mode seed)
	queues int
}

// newFaultCluster lays out the nodes with a config of o.queues queues on
// n0, like the other integration tests. Cleanup resumes paused nodes,
// stops every node, removes the namespaces and prints the node logs if
// the test failed (or XCE_FAULT_LOGS is set).
func newFaultCluster(t testing.TB, o fcOpts) *faultCluster {
	t.Helper()
	if o.queues == 0 {
		o.queues = 4
	}
	fc := &faultCluster{t: t, paused: map[int]bool{}}
	dir := t.TempDir()
	if o.netns {
		ns, err := newNetns(o.nodes)
		if err != nil {
			t.Fatalf("network namespaces (the partition needs them; run as root with iproute2): %v", err)
		}
		t.Cleanup(ns.close) // after the processes are stopped (cleanups run last-in first-out)
		fc.ns = ns
		fc.c = clitool.NewClusterPorts(dir, ns.binDir(t, binDir), slices.Repeat([]int{netnsPort}, o.nodes))
		fc.peers = ns.peersFlag(fc.c.Names)
		// Each node listens on its namespace's address: a later --peers
		// wins over the loopback one Cluster.Start passes.
		fc.c.Args = append([]string{"--peers", fc.peers}, o.args...)
		hosts := append([]string{"127.0.0.1", "localhost"}, ns.ips...)
		if err := configtool.DevCerts(filepath.Join(dir, "certs"), fc.c.Names, hosts, 365*24*time.Hour); err != nil {
			t.Fatal(err)
		}
	} else {
		fc.c = clitool.NewClusterPorts(dir, binDir, freePorts(t, o.nodes))
		fc.c.Args = o.args
		fc.peers = fc.c.PeersFlag()
	}
	if err := fc.c.Prepare(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("XCE_FAULT_LOGS") == "" {
			return
		}
		for i := range fc.c.Names {
			b, err := os.ReadFile(logPath(fc.c, i))
			if err != nil {
				continue
			}
			s := string(b)
			if len(s) > 8000 {
				s = "...\n" + s[len(s)-8000:]
			}
			t.Logf("---- log of %s ----\n%s", fc.c.Names[i], s)
		}
	})
	t.Cleanup(func() {
		fc.resumeAll()
		fc.c.Stop()
	})
	blob := configBlob(t, "faults", o.queues, 0)
	install(t, fc.c, 0, blob)
	for q := 1; q <= o.queues; q++ {
		fc.queues = append(fc.queues, fmt.Sprintf("q%06d-", q))
	}
	fc.mat = admin(t, fc.c)
	return fc
}

func (fc *faultCluster) name(i int) string { return fc.c.Names[i] }

func (fc *faultCluster) start(nodes ...int) {
	fc.t.Helper()
	for _, i := range nodes {
		if err := fc.c.Start(i); err != nil {
			fc.t.Fatal(err)
		}
	}
}

// startDown starts every node that is not running.
func (fc *faultCluster) startDown() {
	fc.t.Helper()
	for i := range fc.c.Names {
		if !fc.c.Running(i) {
			fc.start(i)
		}
	}
}

// kill9 kills the nodes with SIGKILL and waits for each to be gone.
func (fc *faultCluster) kill9(nodes ...int) {
	fc.t.Helper()
	for _, i := range nodes {
		if !fc.c.Running(i) {
			continue
		}
		ch := fc.c.Exited(i)
		if err := fc.c.Signal(i, syscall.SIGKILL); err != nil {
			fc.t.Fatalf("kill -9 %s: %v", fc.name(i), err)
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			fc.t.Fatalf("%s still running 10 s after SIGKILL", fc.name(i))
		}
		fc.mu.Lock()
		delete(fc.paused, i)
		fc.mu.Unlock()
	}
}

func (fc *faultCluster) pause(i int) {
	fc.t.Helper()
	if err := fc.c.Signal(i, syscall.SIGSTOP); err != nil {
		fc.t.Fatalf("SIGSTOP %s: %v", fc.name(i), err)
	}
	fc.mu.Lock()
	fc.paused[i] = true
	fc.mu.Unlock()
}

func (fc *faultCluster) resume(i int) {
	fc.t.Helper()
	if err := fc.c.Signal(i, syscall.SIGCONT); err != nil {
		fc.t.Fatalf("SIGCONT %s: %v", fc.name(i), err)
	}
	fc.mu.Lock()
	delete(fc.paused, i)
	fc.mu.Unlock()
}

func (fc *faultCluster) resumeAll() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for i := range fc.paused {
		_ = fc.c.Signal(i, syscall.SIGCONT)
		delete(fc.paused, i)
	}
}

// statuses asks every node (a stopped one times out: 500 ms).
func (fc *faultCluster) statuses() []clitool.PeerStatus {
	fc.t.Helper()
	rows, err := clitool.Statuses(context.Background(), fc.peers, fc.mat, 500*time.Millisecond)
	if err != nil {
		fc.t.Fatal(err)
	}
	return rows
}

// primaries are the up nodes among nodes reporting role primary.
func primaries(rows []clitool.PeerStatus, nodes []int) []int {
	var out []int
	for _, i := range nodes {
		if rows[i].Up && rows[i].Role == "primary" {
			out = append(out, i)
		}
	}
	return out
}

// waitPrimary polls until exactly one of nodes is a serving primary, and
// returns it.
func (fc *faultCluster) waitPrimary(nodes []int, timeout time.Duration) (int, clitool.PeerStatus) {
	fc.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rows := fc.statuses()
		if ps := primaries(rows, nodes); len(ps) == 1 && rows[ps[0]].Serving {
			return ps[0], rows[ps[0]]
		}
		if time.Now().After(deadline) {
			fc.t.Fatalf("no single serving primary among %v within %v:\n%s", fc.names(nodes), timeout, fmtRows(rows))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (fc *faultCluster) names(nodes []int) string {
	var s []string
	for _, i := range nodes {
		s = append(s, fc.name(i))
	}
	return strings.Join(s, ",")
}

func allNodes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// waitFollowing polls until the nodes but skip have one primary and the
// others follow it (skip is down or ignored).
func (fc *faultCluster) waitFollowing(skip int, timeout time.Duration) int {
	fc.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rows := fc.statuses()
		if p, ok := clitool.Converged(rows, skip); ok {
			return p
		}
		if time.Now().After(deadline) {
			fc.t.Fatalf("the nodes but %s did not converge within %v:\n%s", fc.name(skip), timeout, fmtRows(rows))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitHealthy polls until every node is up, one is primary and every
// other one a serving standby of it on its config, the same primary and
// term on three polls in a row (at least 1 s apart in all), and returns
// the primary.
func (fc *faultCluster) waitHealthy(timeout time.Duration) (int, []clitool.PeerStatus) {
	fc.t.Helper()
	return fc.waitStable(timeout, 3)
}

// waitStable is waitHealthy with the number of polls in a row (500 ms
// apart) that must agree.
func (fc *faultCluster) waitStable(timeout time.Duration, polls int) (int, []clitool.PeerStatus) {
	fc.t.Helper()
	deadline := time.Now().Add(timeout)
	var rows []clitool.PeerStatus
	streak, last, lastTerm := 0, -1, uint64(0)
	for {
		rows = fc.statuses()
		if p, ok := clitool.Converged(rows, -1); ok {
			if p == last && rows[p].Term == lastTerm {
				streak++
			} else {
				streak, last, lastTerm = 1, p, rows[p].Term
			}
			if streak >= polls {
				return p, rows
			}
		} else {
			streak, last = 0, -1
		}
		if time.Now().After(deadline) {
			fc.t.Fatalf("cluster not healthy (one primary, every standby following it) within %v:\n%s", timeout, fmtRows(rows))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// readBack heals nothing: call it on a healthy cluster. It lists every
// queue through the primary (package client) and checks that the same node
// answered all of them and was primary, in the same term, before and
// after; it retries until the deadline.
func (fc *faultCluster) readBack(h *history, timeout time.Duration) *readBack {
	fc.t.Helper()
	jc, err := newDoer(fc.peers, fc.mat, 5*time.Second)
	if err != nil {
		fc.t.Fatal(err)
	}
	defer jc.Close()
	deadline := time.Now().Add(timeout)
	var why string
	for time.Now().Before(deadline) {
		before := fc.statuses()
		p, ok := clitool.Converged(before, -1)
		if !ok {
			why = "not converged:\n" + fmtRows(before)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		rb := &readBack{primary: before[p].Name, term: before[p].Term, jobs: map[string][]readJob{}, call: h.now()}
		for _, q := range fc.queues {
			res, err := jc.Do(context.Background(), &schema.ListRequest{Queue: q})
			if err != nil {
				why = fmt.Sprintf("list %s: %v", q, err)
				rb = nil
				break
			}
			if res.Peer != rb.primary {
				why = fmt.Sprintf("list %s answered by %s, primary %s", q, res.Peer, rb.primary)
				rb = nil
				break
			}
			for _, j := range res.Reply.GetJobs() {
				p := string(j.GetPayload())
				rb.jobs[p] = append(rb.jobs[p], readJob{id: j.GetId(), queue: q, claims: j.GetClaims(), payload: p})
				rb.total++
			}
		}
		if rb == nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		rb.ret = h.now()
		after := fc.statuses()
		if p2, ok := clitool.Converged(after, -1); !ok || after[p2].Name != rb.primary || after[p2].Term != rb.term {
			why = "the primary changed during the read:\n" + fmtRows(after)
			continue
		}
		return rb
	}
	fc.t.Fatalf("no consistent read-back through the primary within %v: %s", timeout, why)
	return nil
}

// ---- the steps every fault test shares ----

// boot starts every node, waits for one primary with the others
// following it and returns the primary and the standbys (n0 and n1, n2
// with today's priority election; the tests name the roles, not the
// nodes).
func (fc *faultCluster) boot() (primary int, standbys []int) {
	fc.t.Helper()
	fc.start(allNodes(len(fc.c.Names))...)
	p, rows := fc.waitHealthy(30 * time.Second)
	for i := range rows {
		if i != p {
			standbys = append(standbys, i)
		}
	}
	fc.t.Logf("booted: %s primary (term %d), standbys %s", rows[p].Name, rows[p].Term, fc.names(standbys))
	return p, standbys
}

// runLoad starts the clients; Cleanup stops them.
func (fc *faultCluster) runLoad(o loadOpts) *load {
	fc.t.Helper()
	if o.tag == "" {
		o.tag = "j"
	}
	if o.queues == nil {
		o.queues = fc.queues
	}
	l, err := startLoad(fc.peers, fc.mat, o)
	if err != nil {
		fc.t.Fatal(err)
	}
	fc.t.Cleanup(func() { l.Stop() })
	return l
}

// waitAcks polls until n enqueues were acknowledged after since (by peer,
// "" for any) or the timeout; it returns how many were.
func waitAcks(h *history, n int, since int64, peer string, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		got := h.count(opEnqueue, outOK, since, peer)
		if got >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// finish heals the cluster (every node started, one primary, every
// standby following), lets the load run on the healed cluster for a
// moment, stops it, reads every job back and checks the history.
func (fc *faultCluster) finish(l *load) *faultReport {
	fc.t.Helper()
	fc.resumeAll()
	if fc.ns != nil {
		fc.ns.heal()
	}
	fc.startDown()
	fc.waitHealthy(45 * time.Second)
	since := l.h.now()
	if got := waitAcks(l.h, 50, since, "", 10*time.Second); got < 50 {
		fc.t.Logf("WARNING: the healed cluster acknowledged only %d enqueues in 10 s", got)
	}
	h := l.Stop()
	p, rows := fc.waitHealthy(30 * time.Second)
	rb := fc.readBack(h, 30*time.Second)
	r := check(h, rb)
	for i := range fc.c.Names {
		if line := findLine(logSince(fc.c, i, 0), "repl.too-large"); line != "" {
			fc.t.Logf("WARNING: the job state outgrew one replication message on %s (the test's load is too big for it): %s", fc.name(i), line)
		}
	}
	fc.t.Logf("healed: primary %s term %d\n%s", rows[p].Name, rows[p].Term, fmtRows(rows))
	fc.t.Logf("history:\n%s", r)
	return r
}
