package integration

// What the hostile suite (issue 20) measures while an attack runs — the
// probes' success and latency, elections, the attacked node's memory, a
// standby restarted meanwhile — and what it checks after each attack:
// every acknowledged job readable, every node on the same config.

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/schema"
)

// The bounds an attack is held to (issue 20, Build).
const (
	// probeSuccessMin and probeP99Max: authenticated status calls to the
	// attacked node while a flood runs.
	probeSuccessMin = 0.99
	probeP99Max     = 250 * time.Millisecond
	// floodRSSMax bounds the attacked node's resident memory during a
	// flood. Measured on the code before issue 20's fixes: about 21 MiB
	// idle, at most 37 MiB under either flood at full scale (20 s, 1,000
	// connections or 200 handshakers); the bound leaves 2.5 times that
	// for a node that holds fewer connections but tracks its sources.
	floodRSSMax = 96 << 20
	// rejoinMax: how soon a standby restarted during a flood must be in
	// sync again (about 0.5 s without a flood).
	rejoinMax = 5 * time.Second
	// bodyReplyMax: how soon an oversized body must be refused.
	bodyReplyMax = time.Second
)

// electionKeys are the log keys (sm/election.go, sm/vote.go) of an
// election starting, a primary stepping down and a promotion; none may
// appear on any node while an attack runs.
var electionKeys = []string{"election.vote", "ha.primary-lost", "ha.quorum-lost", "ha.stepdown", "ha.promoted", "election.primary"}

// probeOpts: a probe waits at most 1 s for its connection and 1 s for its
// answer, so one failure costs at most about 2 s.
var probeOpts = client.Options{ConnectTimeout: time.Second, Timeout: time.Second}

// hostileEnv is a converged 3-node cluster (every node --admin-cn admin)
// with one config, and the node under attack: the primary.
type hostileEnv struct {
	t      testing.TB
	c      *clitool.Cluster
	p      int // the primary, which every attack targets
	blob   []byte
	tag    string
	queue  string
	term   uint64
	admin  *tlsconf.Material
	worker *tlsconf.Material
}

func newHostileEnv(t testing.TB, args ...string) *hostileEnv {
	t.Helper()
	c := newCluster(t, 3, args...)
	blob := configBlob(t, "hostile", 2, 8)
	install(t, c, 0, blob)
	start(t, c, 0, 1, 2)
	rows, p := converge(t, c, -1, 30*time.Second)
	worker, err := c.Cert(configtool.WorkerCN)
	if err != nil {
		t.Fatal(err)
	}
	return &hostileEnv{t: t, c: c, p: p, blob: blob, tag: tagHex(blob), queue: "q000001-xxxxxxxx",
		term: rows[p].Term, admin: admin(t, c), worker: worker}
}

func (e *hostileEnv) addr(i int) string      { return fmt.Sprintf("127.0.0.1:%d", e.c.Port(i)) }
func (e *hostileEnv) peer(i int) client.Peer { return client.Peer{Name: e.c.Names[i], Addr: e.addr(i)} }
func (e *hostileEnv) primaryName() string    { return e.c.Names[e.p] }

// standby is the first node that is not the primary.
func (e *hostileEnv) standby() int {
	for i := range e.c.Names {
		if i != e.p {
			return i
		}
	}
	return -1
}

// oneNode is a client of node i alone (no search), with mat's certificate.
func (e *hostileEnv) oneNode(i int, mat *tlsconf.Material, opt client.Options) *client.Client {
	cl, err := client.New([]client.Peer{e.peer(i)}, mat, opt)
	if err != nil {
		e.t.Fatal(err)
	}
	return cl
}

// all is a client of the whole cluster (it finds the primary).
func (e *hostileEnv) all(mat *tlsconf.Material, opt client.Options) *client.Client {
	cl, err := client.NewFromFlag(e.c.PeersFlag(), mat, opt)
	if err != nil {
		e.t.Fatal(err)
	}
	return cl
}

// tlsFor is mat's client TLS config for a connection to the primary.
func (e *hostileEnv) tlsFor(mat *tlsconf.Material) *tls.Config {
	return mat.ClientConfigFor(e.primaryName())
}

// caSigned is a new certificate for cn signed by the cluster's dev CA
// (certs/ca.key), with the client and/or server EKU: what anyone holding
// the CA, or asking its operator for "a certificate named n1", gets.
func caSigned(t testing.TB, c *clitool.Cluster, cn string, clientEKU, serverEKU bool) *tlsconf.Material {
	t.Helper()
	certs := filepath.Join(c.Dir, "certs")
	caPEM, err := os.ReadFile(filepath.Join(certs, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := os.ReadFile(filepath.Join(certs, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	if serverEKU {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	crt, key, err := tlsconf.GenerateCert(caPEM, caKey, cn, hosts, 24*time.Hour, clientEKU, serverEKU)
	if err != nil {
		t.Fatal(err)
	}
	mat, err := tlsconf.FromPEM(crt, key, caPEM)
	if err != nil {
		t.Fatal(err)
	}
	return mat
}

// percentile p (0..1) of ds, nearest rank; 0 for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// ---- the status probe ----

type statusSample struct {
	at      time.Time
	dur     time.Duration
	fresh   bool // on a connection of its own, handshake included
	err     error
	role    string
	primary string
	term    uint64
}

// statusProbe asks one node for its status (ClusterStatus, with the
// worker certificate) every interval: on one kept connection, and every
// freshEvery-th probe on a new connection instead, since a fresh
// handshake is what a flood starves first.
type statusProbe struct {
	stopc, done chan struct{}
	mu          sync.Mutex
	samples     []statusSample
}

func startStatusProbe(e *hostileEnv, i int, mat *tlsconf.Material, every time.Duration, freshEvery int) *statusProbe {
	kept := e.oneNode(i, mat, probeOpts)
	p := &statusProbe{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer kept.Close()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for k := 0; ; k++ {
			fresh := freshEvery > 0 && k%freshEvery == freshEvery-1
			cl := kept
			if fresh {
				cl = e.oneNode(i, mat, probeOpts)
			}
			t0 := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			st, err := cl.ClusterStatus(ctx, 0)
			cancel()
			s := statusSample{at: t0, dur: time.Since(t0), fresh: fresh, err: err}
			if fresh {
				cl.Close()
			}
			if err == nil {
				s.role, s.primary, s.term = st.GetRole(), st.GetPrimaryName(), st.GetTerm()
			}
			p.mu.Lock()
			p.samples = append(p.samples, s)
			p.mu.Unlock()
			select {
			case <-p.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

func (p *statusProbe) stop() {
	close(p.stopc)
	<-p.done
}

type probeFigures struct {
	ok, total     int
	freshFailed   int
	p99, max      time.Duration
	firstFailures []string
}

// figures of the probes sent within [from, to].
func (p *statusProbe) figures(from, to time.Time) probeFigures {
	p.mu.Lock()
	defer p.mu.Unlock()
	var f probeFigures
	var ds []time.Duration
	for _, s := range p.samples {
		if s.at.Before(from) || s.at.After(to) {
			continue
		}
		f.total++
		ds = append(ds, s.dur)
		f.max = max(f.max, s.dur)
		if s.err == nil {
			f.ok++
			continue
		}
		if s.fresh {
			f.freshFailed++
		}
		if len(f.firstFailures) < 3 {
			f.firstFailures = append(f.firstFailures, fmt.Sprintf("%s fresh=%v after %v: %v", s.at.UTC().Format("15:04:05.000"), s.fresh, s.dur.Round(time.Millisecond), s.err))
		}
	}
	f.p99 = percentile(ds, 0.99)
	return f
}

func (f probeFigures) rate() float64 {
	if f.total == 0 {
		return 0
	}
	return float64(f.ok) / float64(f.total)
}

// ---- the cluster watcher ----

type watchSample struct {
	at       time.Time
	node     int
	up       bool
	role     string
	primary  string
	term     uint64
	serving  bool
	standbys map[string]string // on a primary: each standby's state
}

// watcher asks every node for its status every interval (admin
// certificate, one kept connection per node), to see elections, role
// changes and a restarted standby's return.
type watcher struct {
	stopc, done chan struct{}
	mu          sync.Mutex
	samples     []watchSample
}

func startWatcher(e *hostileEnv, every time.Duration) *watcher {
	cl := e.all(e.admin, probeOpts)
	w := &watcher{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer cl.Close()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			var round []watchSample
			for i := range e.c.Names {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				st, err := cl.ClusterStatus(ctx, i)
				cancel()
				s := watchSample{at: time.Now(), node: i, up: err == nil}
				if err == nil {
					s.role, s.primary, s.term, s.serving = st.GetRole(), st.GetPrimaryName(), st.GetTerm(), st.GetServing()
					s.standbys = map[string]string{}
					for _, sb := range st.GetStandbys() {
						s.standbys[sb.GetName()] = sb.GetState()
					}
				}
				round = append(round, s)
			}
			w.mu.Lock()
			w.samples = append(w.samples, round...)
			w.mu.Unlock()
			select {
			case <-w.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *watcher) stop() {
	close(w.stopc)
	<-w.done
}

// changes lists the samples within [from, to] of a node serving as
// standby or primary that show another term or another primary than
// before the attack.
func (w *watcher) changes(e *hostileEnv, from, to time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, s := range w.samples {
		if s.at.Before(from) || s.at.After(to) || !s.up || (s.role != "standby" && s.role != "primary") {
			continue
		}
		if s.term != e.term || s.primary != e.primaryName() || (s.role == "primary") != (s.node == e.p) {
			out = append(out, fmt.Sprintf("%s at %s: %s, term %d, primary %q (was term %d, primary %s)",
				e.c.Names[s.node], s.at.UTC().Format("15:04:05.000"), s.role, s.term, s.primary, e.term, e.primaryName()))
		}
	}
	return out
}

// rejoined is when standby s, restarted at after, was first seen serving
// as a standby of the primary in the old term with the primary reporting
// it in sync.
func (w *watcher) rejoined(e *hostileEnv, s int, after time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var back time.Time
	for _, x := range w.samples {
		if x.at.Before(after) {
			continue
		}
		if back.IsZero() {
			if x.node == s && x.up && x.role == "standby" && x.serving && x.primary == e.primaryName() && x.term == e.term {
				back = x.at
			}
			continue
		}
		if x.node == e.p && x.up && x.standbys[e.c.Names[s]] == "in sync" {
			return x.at, true
		}
	}
	return time.Time{}, false
}

// ---- memory ----

// rssSampler reads a process's VmRSS every interval and keeps the most.
type rssSampler struct {
	stopc, done chan struct{}
	max         atomic.Int64
}

func startRSS(pid int, every time.Duration) *rssSampler {
	r := &rssSampler{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if v, err := rssBytes(pid); err == nil && v > r.max.Load() {
				r.max.Store(v)
			}
			select {
			case <-r.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

func (r *rssSampler) stop() int64 {
	close(r.stopc)
	<-r.done
	return r.max.Load()
}

// ---- a bystander worker ----

type submitSample struct {
	at  time.Time
	dur time.Duration
	err error
	id  uint64
}

// submitter submits a small job to the env's queue every interval (worker
// certificate, through the whole cluster as a worker would), and keeps
// every answer.
type submitter struct {
	stopc, done chan struct{}
	mu          sync.Mutex
	samples     []submitSample
}

func startSubmitter(e *hostileEnv, mat *tlsconf.Material, every time.Duration) *submitter {
	cl := e.all(mat, client.Options{Timeout: 5 * time.Second})
	s := &submitter{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer cl.Close()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for k := 0; ; k++ {
			t0 := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			rep, err := cl.Submit(ctx, &schema.SubmitRequest{Queue: e.queue, Payload: fmt.Appendf(nil, "bystander-%d", k)})
			cancel()
			x := submitSample{at: t0, dur: time.Since(t0), err: err}
			if err == nil && len(rep.GetJobs()) == 1 {
				x.id = rep.GetJobs()[0].GetId()
			} else if err == nil {
				x.err = fmt.Errorf("submit answered %d jobs, want 1", len(rep.GetJobs()))
			}
			s.mu.Lock()
			s.samples = append(s.samples, x)
			s.mu.Unlock()
			select {
			case <-s.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *submitter) stop() {
	close(s.stopc)
	<-s.done
}

// acked is every job the node acknowledged.
func (s *submitter) acked() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []uint64
	for _, x := range s.samples {
		if x.err == nil {
			ids = append(ids, x.id)
		}
	}
	return ids
}

type submitFigures struct {
	n, failed int
	p99, max  time.Duration
	firstErr  error
}

// figures of the submits in flight at any moment of [from, to].
func (s *submitter) figures(from, to time.Time) submitFigures {
	s.mu.Lock()
	defer s.mu.Unlock()
	var f submitFigures
	var ds []time.Duration
	for _, x := range s.samples {
		if x.at.After(to) || x.at.Add(x.dur).Before(from) {
			continue
		}
		f.n++
		ds = append(ds, x.dur)
		f.max = max(f.max, x.dur)
		if x.err != nil {
			f.failed++
			if f.firstErr == nil {
				f.firstErr = x.err
			}
		}
	}
	f.p99 = percentile(ds, 0.99)
	return f
}

// ---- after an attack ----

// electionLines are the election and step-down lines every node logged
// after offs (logOffset per node).
func electionLines(e *hostileEnv, offs []int64) []string {
	var out []string
	for i := range e.c.Names {
		for _, line := range strings.Split(logSince(e.c, i, offs[i]), "\n") {
			for _, k := range electionKeys {
				if strings.Contains(line, `"`+k+`"`) {
					out = append(out, e.c.Names[i]+": "+line)
					break
				}
			}
		}
	}
	return out
}

func logOffsets(c *clitool.Cluster) []int64 {
	offs := make([]int64, len(c.Names))
	for i := range offs {
		offs[i] = logOffset(c, i)
	}
	return offs
}

// afterAttack checks the cluster once an attack is over: no node logged
// an election or a step-down after offs (nil: not checked here), it
// converges again with the same primary in the same term, every node
// runs the config tagged wantTag, and every job in acked reads back. It
// returns what is wrong.
func afterAttack(e *hostileEnv, offs []int64, acked []uint64, wantTag string) []string {
	var bad []string
	if offs != nil {
		if lines := electionLines(e, offs); len(lines) > 0 {
			bad = append(bad, fmt.Sprintf("%d election or step-down lines during the attack, the first: %s", len(lines), lines[0]))
		}
	}
	rows, p, err := e.c.WaitConverged(context.Background(), -1, 30*time.Second)
	switch {
	case err != nil:
		bad = append(bad, fmt.Sprintf("after the attack: %v:\n%s", err, fmtRows(rows)))
	case p != e.p || rows[p].Term != e.term:
		bad = append(bad, fmt.Sprintf("after the attack the primary is %s in term %d, was %s in term %d", rows[p].Name, rows[p].Term, e.primaryName(), e.term))
	}
	for _, r := range rows {
		if r.Up && r.ConfigTag != wantTag {
			bad = append(bad, fmt.Sprintf("after the attack %s runs config %s, want %s", r.Name, r.ConfigTag, wantTag))
		}
	}
	cl := e.all(e.worker, client.Options{Timeout: 5 * time.Second})
	defer cl.Close()
	missing := 0
	for _, id := range acked {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rep, err := cl.Get(ctx, &schema.GetRequest{Id: id})
		cancel()
		if err != nil || len(rep.GetJobs()) != 1 || rep.GetJobs()[0].GetId() != id {
			if missing++; missing <= 3 {
				bad = append(bad, fmt.Sprintf("job %d was acknowledged during the attack but does not read back: %v", id, err))
			}
		}
	}
	if missing > 3 {
		bad = append(bad, fmt.Sprintf("%d acknowledged jobs of %d do not read back in all", missing, len(acked)))
	}
	return bad
}

// codeOf is a call's outcome as a Connect code name ("ok" without error).
func codeOf(err error) string {
	if err == nil {
		return "ok"
	}
	return connect.CodeOf(err).String()
}

// ---- floods (attacks 1 and 2) ----

type floodSpec struct {
	handshakes bool // attack 2 (full handshakes with a worker certificate), else attack 1 (pre-handshake)
	from       net.IP
	conns      int // connections (attack 1) or handshaking goroutines (attack 2)
	dur        time.Duration
	// p99Max overrides probeP99Max (0: the issue's bound, as `make
	// hostile` holds it).
	p99Max time.Duration
}

// probeBound is the probes' p99 bound of s.
func (s floodSpec) probeBound() time.Duration {
	if s.p99Max > 0 {
		return s.p99Max
	}
	return probeP99Max
}

func (s floodSpec) name() string {
	if s.handshakes {
		return "handshake flood"
	}
	return "pre-handshake flood"
}

// sameHost: the attacker shares 127.0.0.1 with the nodes and the probes.
// A defence by source address cannot tell them apart, so the probes'
// figures and the standby's return are reported for this variant, not
// held to the bounds; no election, the memory bound and the cluster's
// state afterwards still are.
func (s floodSpec) sameHost() bool { return s.from.Equal(sameHostIP) }

type floodRow struct {
	spec            floodSpec
	stats           *floodStats
	probes          probeFigures
	elections       []string
	changes         []string
	rejoin          time.Duration // -1: not while the flood ran
	baseRSS, maxRSS int64
	submits         submitFigures
	failures        []string
}

// runFlood boots a 3-node cluster (default timings), floods its primary
// with spec for spec.dur while the probes, the watcher, the memory
// sampler and a bystander submitter run, kills and restarts a standby
// during the flood, and checks the effects.
func runFlood(t testing.TB, spec floodSpec) floodRow {
	t.Helper()
	e := newHostileEnv(t)
	row := floodRow{spec: spec, rejoin: -1}
	pid, err := nodePID(e.c, e.p)
	if err != nil {
		t.Fatal(err)
	}
	if row.baseRSS, err = rssBytes(pid); err != nil {
		t.Fatal(err)
	}
	offs := logOffsets(e.c)
	sub := startSubmitter(e, e.worker, 50*time.Millisecond)
	// The probes use the dev worker certificate; the handshake flood
	// another worker certificate: one certificate's flood must not take
	// the others' share.
	pr := startStatusProbe(e, e.p, e.worker, 100*time.Millisecond, 3)
	w := startWatcher(e, 250*time.Millisecond)
	rss := startRSS(pid, 100*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), spec.dur)
	defer cancel()
	var flooder *tlsconf.Material
	if spec.handshakes {
		flooder = caSigned(t, e.c, "flooder", true, false)
	}
	floodStart := time.Now()
	statsc := make(chan *floodStats, 1)
	go func() {
		if spec.handshakes {
			statsc <- handshakeFlood(ctx, spec.from, e.addr(e.p), e.tlsFor(flooder), spec.conns)
		} else {
			statsc <- preHandshakeFlood(ctx, spec.from, e.addr(e.p), spec.conns)
		}
	}()
	// A standby killed and restarted while the flood runs must rejoin
	// while it still runs.
	time.Sleep(min(spec.dur/5, 2*time.Second))
	s := e.standby()
	stop(t, e.c, s, syscall.SIGKILL)
	start(t, e.c, s)
	restarted := time.Now()
	row.stats = <-statsc
	floodEnd := time.Now()
	pr.stop()
	w.stop()
	row.maxRSS = rss.stop()
	sub.stop()

	row.probes = pr.figures(floodStart, floodEnd)
	row.submits = sub.figures(floodStart, floodEnd)
	row.elections = electionLines(e, offs)
	row.changes = w.changes(e, floodStart, floodEnd)
	if at, ok := w.rejoined(e, s, restarted); ok && at.Before(floodEnd) {
		row.rejoin = at.Sub(restarted)
	}

	fail := func(format string, a ...any) { row.failures = append(row.failures, fmt.Sprintf(format, a...)) }
	if !spec.sameHost() {
		if row.probes.rate() < probeSuccessMin {
			fail("probes: %d of %d status calls to %s succeeded (%.1f %%, want >= %.0f %%); first failures: %s",
				row.probes.ok, row.probes.total, e.primaryName(), 100*row.probes.rate(), 100*probeSuccessMin, strings.Join(row.probes.firstFailures, "; "))
		}
		if row.probes.p99 > spec.probeBound() {
			fail("probes: p99 %v, want <= %v (max %v)", row.probes.p99.Round(time.Millisecond), spec.probeBound(), row.probes.max.Round(time.Millisecond))
		}
		switch {
		case row.rejoin < 0:
			fail("standby %s, killed and restarted %v into the flood, did not rejoin (in sync) before the flood ended", e.c.Names[s], restarted.Sub(floodStart).Round(time.Millisecond))
		case row.rejoin > rejoinMax:
			fail("standby %s, killed and restarted during the flood, took %v to rejoin (in sync), want <= %v", e.c.Names[s], row.rejoin.Round(time.Millisecond), rejoinMax)
		}
	}
	if len(row.elections) > 0 {
		fail("%d election or step-down lines while the flood ran, the first: %s", len(row.elections), row.elections[0])
	}
	if len(row.changes) > 0 {
		fail("%d status samples show another term or primary, the first: %s", len(row.changes), row.changes[0])
	}
	if row.maxRSS > floodRSSMax {
		fail("%s's RSS reached %s during the flood, bound %s (%s before)", e.primaryName(), mib(row.maxRSS), mib(floodRSSMax), mib(row.baseRSS))
	}
	row.failures = append(row.failures, afterAttack(e, nil, sub.acked(), e.tag)...)
	return row
}

func floodHeader() string {
	return fmt.Sprintf("%-20s %-9s %6s %5s %8s %8s %14s %8s %8s %9s %10s %20s %8s %s",
		"attack", "from", "conns", "dur", "max open", "dials", "probes ok/all", "p99", "max", "elections", "rejoin", "RSS before -> max", "submits", "verdict")
}

func (r floodRow) String() string {
	rejoin := "never"
	if r.rejoin >= 0 {
		rejoin = r.rejoin.Round(time.Millisecond).String()
	}
	verdict := "ok"
	if len(r.failures) > 0 {
		verdict = fmt.Sprintf("FAIL (%d)", len(r.failures))
	}
	from := "stranger"
	if r.spec.sameHost() {
		from = "samehost"
	}
	return fmt.Sprintf("%-20s %-9s %6d %5s %8d %8d %14s %8s %8s %9d %10s %20s %8s %s",
		r.spec.name(), from, r.spec.conns, r.spec.dur, r.stats.maxOpen.Load(), r.stats.dials.Load(),
		fmt.Sprintf("%d/%d", r.probes.ok, r.probes.total), r.probes.p99.Round(time.Millisecond), r.probes.max.Round(time.Millisecond),
		len(r.elections)+len(r.changes), rejoin, mib(r.baseRSS)+" -> "+mib(r.maxRSS),
		fmt.Sprintf("%d/%d", r.submits.n-r.submits.failed, r.submits.n), verdict)
}

// ---- forged forwarding header (attack 3) ----

type forgedRow struct {
	cert, op, want, got string
	bad                 bool
}

// runForged sends, straight to the primary, admin operations (Sweep,
// UpgradeConfig) on behalf of the admin and a worker operation (Submit)
// on behalf of the worker, with header Xce-On-Behalf-Of, from a standby's
// own node certificate and from a client-only certificate (EKU clientAuth
// alone) carrying the standby's name. The admin operations must be
// refused (permission_denied) and change nothing; the client-only
// certificate may not act for anyone.
func runForged(t testing.TB) ([]forgedRow, []string) {
	t.Helper()
	e := newHostileEnv(t, fastTimings...)
	s := e.standby()
	sn := e.c.Names[s]
	nodeCert, err := e.c.Cert(sn)
	if err != nil {
		t.Fatal(err)
	}
	certs := []struct {
		label string
		mat   *tlsconf.Material
	}{
		{"client-only CN=" + sn, caSigned(t, e.c, sn, true, false)},
		{"node cert " + sn, nodeCert},
	}
	var rows []forgedRow
	var bad []string
	fail := func(format string, a ...any) { bad = append(bad, fmt.Sprintf(format, a...)) }
	record := func(cert, op, want string, err error) {
		got := codeOf(err)
		r := forgedRow{cert: cert, op: op, want: want, got: got}
		if want != "any definite" && got != want {
			r.bad = true
			fail("%s: %s answered %s (%v), want %s", cert, op, got, err, want)
		}
		rows = append(rows, r)
	}
	ctx := context.Background()
	offs := logOffsets(e.c)
	pid, err := nodePID(e.c, e.p)
	if err != nil {
		t.Fatal(err)
	}

	// A sweep's effect cannot be told from the primary's own maintenance
	// (it sweeps what is due every second), so a refused Sweep shows by
	// its answer and by the primary's refusal line, which names who asked.
	wcl := e.all(e.worker, client.Options{Timeout: 5 * time.Second})
	defer wcl.Close()
	refusal := map[string]string{
		"client-only CN=" + sn: `certificate "` + sn + `" has the peer role`,
		"node cert " + sn:      `forwarded by ` + sn + ` on behalf of "admin" needs the admin role; admin operations are never accepted on behalf`,
	}
	var acked []uint64

	on := func(mat *tlsconf.Material, who string) *client.Client {
		return e.oneNode(e.p, mat, client.Options{Timeout: 5 * time.Second, Header: http.Header{client.OnBehalfHeader: {who}}})
	}
	for _, c := range certs {
		off := logOffset(e.c, e.p)
		cl := on(c.mat, "admin")
		_, err := cl.Sweep(ctx, &schema.SweepRequest{})
		cl.Close()
		record(c.label, "Sweep as admin", "permission_denied", err)
		if err := waitLogE(e.c, e.p, off, refusal[c.label], 2*time.Second); err != nil {
			fail("%s: Sweep as admin: %v", c.label, err)
		}

		cl = on(c.mat, configtool.WorkerCN)
		rep, err := cl.Submit(ctx, &schema.SubmitRequest{Queue: e.queue, Payload: []byte("forged " + c.label)})
		cl.Close()
		if c.mat == nodeCert {
			// A node's own certificate is how a standby forwards: a
			// worker's call may be accepted, but its answer must be
			// definite and an acknowledged job readable.
			record(c.label, "Submit as worker", "any definite", err)
			if err == nil && len(rep.GetJobs()) == 1 {
				acked = append(acked, rep.GetJobs()[0].GetId())
			} else if code := codeOf(err); code == "unknown" || code == "ok" {
				fail("%s: Submit as worker: %s (%v)", c.label, code, err)
			}
		} else {
			record(c.label, "Submit as worker", "permission_denied", err)
		}
	}

	for k, c := range certs {
		off := logOffset(e.c, e.p)
		exited := e.c.Exited(e.p)
		next := configBlob(t, fmt.Sprintf("forged-%d", k), 3, 8)
		sum := sha256.Sum256(next)
		cl := on(c.mat, "admin")
		_, err := cl.UpgradeConfig(ctx, &schema.UpgradeConfigRequest{Bytes: next, Sha256: sum[:]})
		cl.Close()
		record(c.label, "UpgradeConfig as admin", "permission_denied", err)
		select {
		case <-exited:
			fail("%s: the forged UpgradeConfig restarted the primary %s", c.label, e.primaryName())
			start(t, e.c, e.p) // as systemd would, so that the next checks run on a whole cluster
			if _, _, err := e.c.WaitConverged(ctx, -1, 30*time.Second); err != nil {
				fail("after the primary's restart: %v", err)
			}
		case <-time.After(time.Second):
		}
		// Either way to apply an upgrade ("requesting restart", "handing
		// over to") logs this first.
		if line := findLine(logSince(e.c, e.p, off), "Config upgraded to tag="); line != "" {
			fail("%s: the primary logged: %s", c.label, line)
		}
		rows2, err := clitool.Statuses(ctx, e.c.PeersFlag(), e.admin, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows2 {
			if r.Up && r.ConfigTag != e.tag {
				fail("%s: after the forged UpgradeConfig %s runs config %s, want %s unchanged", c.label, r.Name, r.ConfigTag, e.tag)
			}
		}
	}
	if now, err := nodePID(e.c, e.p); err != nil || now != pid {
		fail("the primary %s is not the process it was (pid %d, now %d, %v)", e.primaryName(), pid, now, err)
	}
	bad = append(bad, afterAttack(e, offs, acked, e.tag)...)
	return rows, bad
}

func forgedTable(rows []forgedRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s %-24s %-18s %-18s %s\n", "certificate", "call", "want", "got", "verdict")
	for _, r := range rows {
		v := "ok"
		if r.bad {
			v = "FAIL"
		}
		fmt.Fprintf(&b, "%-24s %-24s %-18s %-18s %s\n", r.cert, r.op, r.want, r.got, v)
	}
	return b.String()
}

// ---- oversized bodies (attack 4) ----

type bodyRow struct {
	res       bodyResult
	bystander submitFigures
}

// bodyFigures are the rows of runOversized and the election and
// step-down lines the cluster logged meanwhile.
type bodyFigures struct {
	size      int64
	rows      []bodyRow
	elections []string
}

// runOversized sends an oversized Submit body (size bytes) to the primary
// in each bodyVariant, with a certificate of its own, while the dev
// worker submits a small job every 10 ms. Each must be refused at once,
// by a whole reply, and the worker's submits must not wait for it (their
// p99 at most p99Max).
func runOversized(t testing.TB, size int64, p99Max time.Duration) (bodyFigures, []string) {
	t.Helper()
	e := newHostileEnv(t, fastTimings...)
	bulky := caSigned(t, e.c, "bulky", true, false)
	offs := logOffsets(e.c)
	sub := startSubmitter(e, e.worker, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	f := bodyFigures{size: size}
	var bad []string
	for _, v := range bodyVariants {
		from := time.Now()
		res := oversizedBody(v, e.addr(e.p), e.tlsFor(bulky), size, 30*time.Second)
		time.Sleep(100 * time.Millisecond) // the submits the upload delayed end by now
		row := bodyRow{res: res, bystander: sub.figures(from, time.Now())}
		f.rows = append(f.rows, row)
		switch {
		case res.status == 0:
			bad = append(bad, fmt.Sprintf("%s: no reply: %v", v.name, res.replyErr))
		case res.status < 400 || res.status >= 500:
			bad = append(bad, fmt.Sprintf("%s: HTTP %d (%q), want a refusal (4xx)", v.name, res.status, clip(res.body)))
		}
		if res.status != 0 && !res.complete {
			bad = append(bad, fmt.Sprintf("%s: the refusal arrived truncated: %v", v.name, res.replyErr))
		}
		if res.replyIn > bodyReplyMax {
			bad = append(bad, fmt.Sprintf("%s: the reply took %v (%s of the body sent by then), want <= %v", v.name, res.replyIn.Round(time.Millisecond), mib(res.sentFirst), bodyReplyMax))
		}
		if row.bystander.failed > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d of the other worker's %d submits failed meanwhile: %v", v.name, row.bystander.failed, row.bystander.n, row.bystander.firstErr))
		}
		if row.bystander.p99 > p99Max {
			bad = append(bad, fmt.Sprintf("%s: the other worker's submits: p99 %v (max %v), want <= %v", v.name, row.bystander.p99.Round(time.Millisecond), row.bystander.max.Round(time.Millisecond), p99Max))
		}
	}
	sub.stop()
	// The peers' links must not starve either: no election.
	if f.elections = electionLines(e, offs); len(f.elections) > 0 {
		bad = append(bad, fmt.Sprintf("%d election or step-down lines during the attack, the first: %s", len(f.elections), f.elections[0]))
	}
	bad = append(bad, afterAttack(e, nil, sub.acked(), e.tag)...)
	return f, bad
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

func (f bodyFigures) String() string {
	size, rows := f.size, f.rows
	var b strings.Builder
	fmt.Fprintf(&b, "%s body to Submit:\n%-24s %6s %9s %10s %12s %12s %22s\n", mib(size), "variant", "status", "complete", "reply in", "sent by then", "sent in all", "other worker p99/max")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-24s %6d %9v %10s %12s %12s %22s\n", r.res.variant.name, r.res.status, r.res.complete,
			r.res.replyIn.Round(time.Millisecond), mib(r.res.sentFirst), mib(r.res.sent),
			fmt.Sprintf("%v/%v (%d, %d failed)", r.bystander.p99.Round(time.Millisecond), r.bystander.max.Round(time.Millisecond), r.bystander.n, r.bystander.failed))
	}
	fmt.Fprintf(&b, "election and step-down lines meanwhile: %d\n", len(f.elections))
	return b.String()
}

// ---- a JSON claim whose answer outgrows the send limit (attack 5) ----

type claimFigures struct {
	jobs, payload int
	status        int
	answered      []uint64
	processing    []uint64
	hidden        int // moved to processing, not in the answer
	reply         string
}

// runJSONClaim submits jobs near the payload limit (binary, which takes
// them), then claims up to 16 of them in one JSON Claim: the answer must
// succeed with the jobs that fit (at least one), and every job moved to
// processing must be in it (read back with binary Get: none claimed and
// left unanswered, its attempt spent and hidden for the visibility
// timeout).
func runJSONClaim(t testing.TB, jobs, payload int) (claimFigures, []string) {
	t.Helper()
	e := newHostileEnv(t, fastTimings...)
	f := claimFigures{jobs: jobs, payload: payload}
	var bad []string
	cl := e.all(e.worker, client.Options{Timeout: 10 * time.Second})
	defer cl.Close()
	ctx := context.Background()
	offs := logOffsets(e.c)
	var ids []uint64
	sent := map[uint64][]byte{}
	for k := range jobs {
		p := make([]byte, payload)
		if _, err := cryptorand.Read(p); err != nil { // incompressible, as most payloads are
			t.Fatal(err)
		}
		rep, err := cl.Submit(ctx, &schema.SubmitRequest{Queue: e.queue, Payload: p})
		if err != nil {
			t.Fatalf("binary submit %d of %d bytes: %v", k, payload, err)
		}
		id := rep.GetJobs()[0].GetId()
		ids = append(ids, id)
		sent[id] = p
	}
	status, body, err := jsonCall(ctx, e.addr(e.p), e.tlsFor(e.worker), "Claim", fmt.Sprintf(`{"queue":%q,"host":"node001","max":16}`, e.queue))
	f.status, f.reply = status, clip(string(body))
	answered := map[uint64]bool{}
	switch {
	case err != nil:
		bad = append(bad, fmt.Sprintf("JSON Claim: HTTP %d: %v", status, err))
	case status != http.StatusOK:
		bad = append(bad, fmt.Sprintf("JSON Claim answered HTTP %d: %s", status, clip(string(body))))
	default:
		var rep schema.JobResponse
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &rep); err != nil {
			bad = append(bad, fmt.Sprintf("JSON Claim: the answer does not decode: %v", err))
		}
		for _, j := range rep.GetJobs() {
			answered[j.GetId()] = true
			f.answered = append(f.answered, j.GetId())
			if want, ok := sent[j.GetId()]; !ok || !bytes.Equal(j.GetPayload(), want) {
				bad = append(bad, fmt.Sprintf("JSON Claim: job %d in the answer does not carry its payload (%d bytes, want %d)", j.GetId(), len(j.GetPayload()), len(want)))
			}
		}
		if len(rep.GetJobs()) == 0 {
			bad = append(bad, fmt.Sprintf("JSON Claim answered no job of the %d ready: a JSON worker could never claim them", jobs))
		}
	}
	for _, id := range ids {
		rep, err := cl.Get(ctx, &schema.GetRequest{Id: id})
		if err != nil || len(rep.GetJobs()) != 1 {
			bad = append(bad, fmt.Sprintf("binary Get of job %d: %v", id, err))
			continue
		}
		j := rep.GetJobs()[0]
		processing := j.GetState() == schema.JobState_JOB_STATE_PROCESSING
		if processing {
			f.processing = append(f.processing, id)
		}
		switch {
		case processing && !answered[id]:
			f.hidden++
			bad = append(bad, fmt.Sprintf("job %d was moved to processing (attempt %d spent, hidden until its visibility timeout) but is not in the JSON answer", id, j.GetAttempts()))
		case !processing && answered[id]:
			bad = append(bad, fmt.Sprintf("job %d is in the JSON answer but %v", id, j.GetState()))
		}
	}
	bad = append(bad, afterAttack(e, offs, ids, e.tag)...)
	return f, bad
}

func (f claimFigures) String() string {
	return fmt.Sprintf("JSON Claim max 16 of %d jobs of %d bytes: HTTP %d, %d answered, %d moved to processing (%d hidden unanswered)",
		f.jobs, f.payload, f.status, len(f.answered), len(f.processing), f.hidden)
}

// waitLogE is waitLog that returns its failure instead of ending the
// test, for a table of checks.
func waitLogE(c *clitool.Cluster, i int, off int64, want string, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if findLine(logSince(c, i, off), want) != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the primary %s logged no line with %q", c.Names[i], want)
		}
	}
}
