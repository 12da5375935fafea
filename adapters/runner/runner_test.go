package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/xce-hpc/xce/adapters/fileio"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

const waitBound = 10 * time.Second // generous: a shared 2-core machine

// fastOpts are short timings so a test takes well under a second. The
// priority step is large so a configless node 1 cannot reach its own
// election deadline before node 0 is primary, even on a loaded machine.
func fastOpts(self int, peers []string) sm.Options {
	o := sm.DefaultOptions(self, peers)
	o.ElectionTimeout = 100 * time.Millisecond
	o.PriorityStep = 2 * time.Second
	o.JitterMax = 10 * time.Millisecond
	o.ProbeInterval = 50 * time.Millisecond
	o.HeartbeatInterval = 50 * time.Millisecond
	o.FailureTimeout = time.Second
	o.FetchInitialDelay = 200 * time.Millisecond
	o.FetchMaxDelay = 400 * time.Millisecond
	return o
}

func sampleConfig(t testing.TB) []byte {
	t.Helper()
	c := &schema.ClusterConfig{ConfigGeneration: 1, ClusterName: "runner-test", Port: 7000}
	c.Queues = []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 30, MaxAttempts: 5, BackoffBaseS: 2, DeadLetterRetentionS: 86400}}
	c.Hosts = []*schema.Host{{Name: "h0"}}
	b, err := schema.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// provision installs blob the way sim/world.go provision does, with the
// real executor: versioned file, conf/current, all fsync'd.
func provision(t testing.TB, base string, blob []byte) string {
	t.Helper()
	e := &fileio.Executor{Base: base}
	name := sm.VersionName(sha256.Sum256(blob))
	for _, op := range []sm.FileOp{
		{Op: sm.OpMkdir, Path: sm.ConfDir},
		{Op: sm.OpFsyncDir, Path: ""},
		{Op: sm.OpWrite, Path: "conf/" + name, Data: blob},
		{Op: sm.OpFsync, Path: "conf/" + name},
		{Op: sm.OpWrite, Path: sm.PointerPath, Data: sm.PointerContents(name)},
		{Op: sm.OpFsync, Path: sm.PointerPath},
		{Op: sm.OpFsyncDir, Path: sm.ConfDir},
	} {
		if d := e.Exec(op); d.Err != sm.IOOK {
			t.Fatalf("provision %s %s: %v %s", op.Op, op.Path, d.Err, d.Detail)
		}
	}
	return name
}

func newNode(t testing.TB, o sm.Options) *sm.Node {
	t.Helper()
	n, err := sm.NewNode(o)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// start runs r in a goroutine; the returned channel yields Run's result.
func start(ctx context.Context, r *Runner) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	return errc
}

// waitFor polls cond until it holds, Run ends, or the bound passes.
func waitFor(t *testing.T, what string, errc <-chan error, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		select {
		case err := <-errc:
			t.Fatalf("waiting for %s: Run returned %v", what, err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out", what)
		}
	}
}

func stopRun(t *testing.T, cancel context.CancelFunc, errc <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(waitBound):
		t.Fatal("Run did not return after cancel")
	}
}

func TestSingleNodeBootsToPrimary(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	blob := sampleConfig(t)
	provision(t, dir, blob)
	node := newNode(t, fastOpts(0, []string{"n0"}))
	r := New(Config{Node: node, Files: &fileio.Executor{Base: dir}, Log: zaptest.NewLogger(t), Seed: 1})
	if st := r.Status(); st.Role != sm.RoleBooting || st.Serving || st.Primary != -1 {
		t.Errorf("status before Run: %+v", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := start(ctx, r)
	select {
	case <-r.Ready():
	case err := <-errc:
		t.Fatalf("Run returned %v before ready", err)
	case <-time.After(waitBound):
		t.Fatal("not ready")
	}
	st := r.Status()
	st.DurableLSN, st.CommitLSN = 0, 0 // the term's no-op may or may not be durable yet
	want := Status{Role: sm.RolePrimary, Term: 1, Primary: 0, ConfigTag: sm.TagOf(blob), Generation: 1, Serving: true, Config: blob, Quorum: true}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("status = %+v, want %+v", st, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, sm.TermPath)); err != nil || string(b) != "1 0 crc32c=1bab1d29\n" { // term 1, its own vote (with its checksum)
		t.Errorf("data/term = %q, %v", b, err)
	}
	stopRun(t, cancel, errc)
	if err := r.Run(context.Background()); !errors.Is(err, ErrRunTwice) {
		t.Errorf("second Run = %v", err)
	}
}

func TestNoConfigExitsFatal(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	core, logs := observer.New(zapcore.DebugLevel)
	node := newNode(t, fastOpts(0, []string{"n0"}))
	r := New(Config{Node: node, Files: &fileio.Executor{Base: dir}, Log: zap.New(core), Seed: 1})
	var err error
	select {
	case err = <-start(context.Background(), r):
	case <-time.After(waitBound):
		t.Fatal("Run did not exit")
	}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(ee.Reason, "has no config") {
		t.Fatalf("Run = %v, want *ExitError code 1 mentioning 'has no config'", err)
	}
	if !strings.Contains(node.FatalReason(), "has no config") {
		t.Errorf("FatalReason = %q", node.FatalReason())
	}
	st := r.Status()
	if st.Role != sm.RoleStopped || st.Serving || !strings.Contains(st.Fatal, "has no config") {
		t.Errorf("status = %+v", st)
	}
	select {
	case <-r.Ready():
		t.Error("Ready closed for a node that never served")
	default:
	}
	fatal := logs.FilterLevelExact(zapcore.FatalLevel).FilterField(zap.String("key", "fatal.primary-no-config"))
	if fatal.Len() != 1 {
		t.Errorf("FATAL lines with key fatal.primary-no-config: %d; all logs: %v", fatal.Len(), logs.All())
	}
	if logs.FilterField(zap.String("key", "runner.exit")).Len() != 1 {
		t.Error("exit not logged")
	}
	// The node created its directories before deciding.
	for _, d := range []string{"conf", "data"} {
		if st, err := os.Stat(filepath.Join(dir, d)); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", d, st, err)
		}
	}
}

// memNet is an in-memory Transport: one buffered channel per node, sends
// dropped when full (never blocking), messages deep-copied.
type memNet struct {
	mu    sync.Mutex
	boxes []chan Inbound
	sent  int
}

func newMemNet(n int) *memNet {
	m := &memNet{}
	for i := 0; i < n; i++ {
		m.boxes = append(m.boxes, make(chan Inbound, 256))
	}
	return m
}

type memPort struct {
	net  *memNet
	self int
}

func (p memPort) Send(to int, m sm.Msg) {
	if to < 0 || to >= len(p.net.boxes) {
		return
	}
	m.SHA256 = slices.Clone(m.SHA256)
	m.Bytes = slices.Clone(m.Bytes)
	p.net.mu.Lock()
	p.net.sent++
	p.net.mu.Unlock()
	select {
	case p.net.boxes[to] <- Inbound{From: p.self, Msg: m}:
	default:
	}
}

func TestTwoNodesElectAndReplicate(t *testing.T) {
	defer goleak.VerifyNone(t)
	blob := sampleConfig(t)
	peers := []string{"n0", "n1"}
	dirs := []string{t.TempDir(), t.TempDir()}
	name := provision(t, dirs[0], blob) // only the primary candidate is provisioned
	net := newMemNet(2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runners []*Runner
	var errcs []<-chan error
	for i := range peers {
		r := New(Config{
			Node:      newNode(t, fastOpts(i, peers)),
			Files:     &fileio.Executor{Base: dirs[i]},
			Transport: memPort{net: net, self: i},
			Inbound:   net.boxes[i],
			Log:       zaptest.NewLogger(t).Named(peers[i]),
			Seed:      uint64(i + 1),
		})
		runners = append(runners, r)
		errcs = append(errcs, start(ctx, r))
	}
	tag := sm.TagOf(blob)
	waitFor(t, "n1 standby with the config", errcs[1], func() bool {
		st := runners[1].Status()
		return st.Role == sm.RoleStandby && st.Serving && st.ConfigTag == tag && st.Primary == 0
	})
	<-runners[1].Ready()
	if st := runners[0].Status(); st.Role != sm.RolePrimary || st.Term != 1 || !st.Serving {
		t.Errorf("n0 status = %+v", st)
	}
	// n1 saved the config into its own dir: conf/current names the same
	// versioned file, which holds the same bytes.
	if b, err := os.ReadFile(filepath.Join(dirs[1], sm.PointerPath)); err != nil || !bytes.Equal(b, sm.PointerContents(name)) {
		t.Errorf("n1 conf/current = %q, %v; want %q", b, err, sm.PointerContents(name))
	}
	if b, err := os.ReadFile(filepath.Join(dirs[1], "conf", name)); err != nil || !bytes.Equal(b, blob) {
		t.Errorf("n1 conf/%s: %d bytes, %v", name, len(b), err)
	}
	for i := range runners {
		stopRun(t, cancel, errcs[i])
	}
	if st := runners[1].Status(); st.Role != sm.RoleStandby {
		t.Errorf("n1 final status %+v", st)
	}
}

func TestCancelStopsEverything(t *testing.T) {
	defer goleak.VerifyNone(t)
	// Already cancelled: Run returns at once without booting.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	node := newNode(t, fastOpts(0, []string{"n0", "n1"}))
	r := New(Config{Node: node, Files: &fileio.Executor{Base: t.TempDir()}})
	if err := r.Run(ctx); !errors.Is(err, context.Canceled) || node.Role() != sm.RoleBooting {
		t.Errorf("Run(cancelled) = %v, role %v", err, node.Role())
	}
	// Cancel mid-run: a candidate with timers armed, probing a peer that
	// never answers, while boot I/O may still be queued.
	for _, delay := range []time.Duration{0, time.Millisecond, 30 * time.Millisecond, 150 * time.Millisecond} {
		dir := t.TempDir()
		provision(t, dir, sampleConfig(t))
		net := newMemNet(2)
		ctx, cancel := context.WithCancel(context.Background())
		r := New(Config{Node: newNode(t, fastOpts(1, []string{"n0", "n1"})), Files: &fileio.Executor{Base: dir},
			Transport: memPort{net: net, self: 1}, Inbound: net.boxes[1], Seed: 7})
		errc := start(ctx, r)
		time.Sleep(delay)
		stopRun(t, cancel, errc)
	}
}

func TestMissingConfigFields(t *testing.T) {
	if err := New(Config{}).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "Node") {
		t.Errorf("nil node: %v", err)
	}
	r := New(Config{Node: newNode(t, fastOpts(0, []string{"n0"}))})
	if err := r.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "Files") {
		t.Errorf("nil files: %v", err)
	}
	if s := (&ExitError{Code: 1, Reason: "boom"}).Error(); s != "node exited with code 1: boom" {
		t.Error(s)
	}
}

func TestClosedInboundKeepsRunning(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	provision(t, dir, sampleConfig(t))
	in := make(chan Inbound)
	close(in)
	r := New(Config{Node: newNode(t, fastOpts(0, []string{"n0"})), Files: &fileio.Executor{Base: dir}, Inbound: in})
	ctx, cancel := context.WithCancel(context.Background())
	errc := start(ctx, r)
	waitFor(t, "primary", errc, func() bool { return r.Status().Role == sm.RolePrimary })
	stopRun(t, cancel, errc)
}

func TestInputName(t *testing.T) {
	for _, tc := range []struct {
		in   sm.Input
		want string
	}{
		{sm.Recv{From: 2, Msg: sm.Msg{Type: sm.MsgReplAck}}, "Recv " + sm.MsgReplAck.String() + " from 2"},
		{sm.ClientOp{Req: sm.JobRequest{Kind: sm.JobClaim}}, "ClientOp " + sm.JobClaim.String()},
		{sm.TimerFired{Kind: sm.TimerHeartbeat}, "TimerFired " + sm.TimerHeartbeat.String()},
		{sm.IODone{}, "IODone"},
	} {
		if got := inputName(tc.in); got != tc.want {
			t.Errorf("inputName(%#v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
