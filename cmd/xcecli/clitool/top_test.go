package clitool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/cmd/internal/cliexit"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/cmd/xcecontroller/daemon"
	"github.com/xce-hpc/xce/schema"
)

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startNode runs a one-node cluster (seed mode) in this process with the
// example config, and returns it as xcecli's tests address a cluster.
func startNode(t *testing.T) *fakeCluster {
	t.Helper()
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if err := configtool.DevCerts(certs, []string{"n0"}, []string{"127.0.0.1"}, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	blob, err := configtool.EncodeFile("../../../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := configtool.Install(filepath.Join(work, "n0"), "n0", 2, blob); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := daemon.DefaultConfig()
	cfg.Peers, cfg.Name, cfg.Workdir = "n0="+addr, "n0", work
	cfg.Cert, cfg.Key, cfg.CA = filepath.Join(certs, "n0.crt"), filepath.Join(certs, "n0.key"), filepath.Join(certs, "ca.crt")
	var logs lockedBuf
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- daemon.Run(ctx, cfg, &logs) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("node exit code %d\n%s", code, logs.String())
		}
	})
	fc := &fakeCluster{peersFlag: cfg.Peers, certDir: certs}
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := fc.run(t, "top", "--count", "1", "-o", "json")
		var v TopView
		if err == nil && json.Unmarshal([]byte(out), &v) == nil && v.Primary == "n0" && v.Error == "" && len(v.Queues) > 0 {
			return fc
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never served as primary with its queues: %v %s\n%s", err, out, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// queueOf is the row of queue name in v.
func queueOf(t *testing.T, v TopView, name string) QueueDepth {
	t.Helper()
	for _, q := range v.Queues {
		if q.Queue == name {
			return q
		}
	}
	t.Fatalf("no queue %q in %+v", name, v)
	return QueueDepth{}
}

func topOnce(t *testing.T, fc *fakeCluster) TopView {
	t.Helper()
	out, err := fc.run(t, "top", "--count", "1", "-o", "json")
	if err != nil {
		t.Fatalf("top: %v\n%s", err, out)
	}
	var v TopView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("top -o json: %v\n%s", err, out)
	}
	return v
}

func mustRun(t *testing.T, fc *fakeCluster, args ...string) string {
	t.Helper()
	out, err := fc.run(t, args...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return out
}

// xcecli top against a real node: the counts follow submits, claims and
// failures; a refreshing top shows each count's change and the write rate
// between two refreshes; the table shows the same numbers.
func TestTopFollowsTheQueues(t *testing.T) {
	fc := startNode(t)
	v := topOnce(t, fc)
	if b := queueOf(t, v, "batch"); b.Pending != 0 || b.Processing != 0 || b.Dead != 0 || b.Change != nil || v.WritesPerS != nil {
		t.Fatalf("fresh cluster: %+v", v)
	}
	queueOf(t, v, "gpu")

	for range 3 {
		mustRun(t, fc, "job", "submit", "--queue", "batch", "--payload", "x")
	}
	mustRun(t, fc, "job", "submit", "--queue", "gpu", "--payload", "y")
	var claimed []JobView
	if err := json.Unmarshal([]byte(mustRun(t, fc, "job", "claim", "--queue", "gpu", "--host", "node001", "-o", "json")), &claimed); err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	mustRun(t, fc, "job", "fail", claimed[0].Handle, "--error", "broken") // gpu: dead
	mustRun(t, fc, "job", "claim", "--queue", "batch", "--host", "node001")
	v = topOnce(t, fc)
	if b, g := queueOf(t, v, "batch"), queueOf(t, v, "gpu"); b.Pending != 2 || b.Processing != 1 || b.Dead != 0 || g.Pending != 0 || g.Processing != 0 || g.Dead != 1 {
		t.Fatalf("after 4 submits, 2 claims, 1 fail: batch %+v gpu %+v", b, g)
	}

	// A refreshing top: two jobs submitted between its two refreshes.
	pr, pw := io.Pipe()
	cmd := NewCommand(context.Background(), pw)
	cmd.SetArgs([]string{"top", "--interval", "1s", "--count", "2", "-o", "json", "--peers", fc.peersFlag,
		"--cert", filepath.Join(fc.certDir, "admin.crt"), "--key", filepath.Join(fc.certDir, "admin.key"), "--ca", filepath.Join(fc.certDir, "ca.crt")})
	errc := make(chan error, 1)
	go func() { err := cmd.Execute(); pw.CloseWithError(io.EOF); errc <- err }()
	lines := bufio.NewScanner(pr)
	var frames []TopView
	for lines.Scan() {
		var f TopView
		if err := json.Unmarshal(lines.Bytes(), &f); err != nil {
			t.Fatalf("line %q: %v", lines.Text(), err)
		}
		frames = append(frames, f)
		if len(frames) == 1 {
			mustRun(t, fc, "job", "submit", "--queue", "batch", "--payload", "z")
			mustRun(t, fc, "job", "submit", "--queue", "batch", "--payload", "z")
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("top --count 2: %v", err)
	}
	if len(frames) != 2 || frames[0].Queues[0].Change != nil {
		t.Fatalf("frames %+v", frames)
	}
	b := queueOf(t, frames[1], "batch")
	if b.Pending != 4 || b.Change == nil || b.Change.Pending != 2 || b.Change.Processing != 0 || b.Change.Dead != 0 {
		t.Fatalf("second refresh: batch %+v", b)
	}
	if g := queueOf(t, frames[1], "gpu"); g.Change == nil || *g.Change != (QueueChange{}) {
		t.Fatalf("second refresh: gpu %+v", g)
	}
	if w := frames[1].WritesPerS; w == nil || *w <= 0 || frames[1].SinceS < 0.9 || frames[1].DurableLSN < frames[0].DurableLSN+2 {
		t.Fatalf("second refresh: %v writes/s over %vs, LSN %d after %d", w, frames[1].SinceS, frames[1].DurableLSN, frames[0].DurableLSN)
	}

	// The table: a timestamped frame with the primary and the same counts.
	out := mustRun(t, fc, "top", "--count", "1")
	if !strings.HasPrefix(out, frameRule+"xcecli top at ") || strings.Contains(out, "\x1b") || !strings.Contains(out, "primary n0, term ") {
		t.Fatalf("table frame:\n%s", out)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		if fs := strings.Fields(l); len(fs) == 7 {
			rows[fs[0]] = fs
		}
	}
	if got := strings.Join(rows["batch"], " "); got != "batch 4 1 0 - - -" {
		t.Errorf("batch row %q:\n%s", got, out)
	}
	if got := strings.Join(rows["gpu"], " "); got != "gpu 0 0 1 - - -" {
		t.Errorf("gpu row %q:\n%s", got, out)
	}
}

// With no primary, top says so, naming each peer's answer, and goes on.
func TestTopWithoutPrimary(t *testing.T) {
	fc := startFakeCluster(t, true, false)
	fc.nodes[0].Set(func(*wire.Request) *wire.Reply {
		return &wire.Reply{StatusReply: &schema.StatusReply{Name: "n0", Role: "candidate", Primary: -1}}
	})
	out, err := fc.run(t, "top", "--count", "2", "--interval", "10ms", "-o", "json")
	if err != nil {
		t.Fatalf("top: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out)
	}
	var v TopView
	if err := json.Unmarshal([]byte(lines[1]), &v); err != nil || v.Primary != "" || !strings.Contains(v.Error, "no primary answered (n0: candidate; n1: ") || strings.Contains(v.Error, "n1: n1:") {
		t.Fatalf("%v %+v", err, v)
	}
	for _, bad := range [][]string{{"--interval", "0s"}, {"--count", "-1"}, {"-o", "yaml"}} {
		if _, err := fc.run(t, append([]string{"top"}, bad...)...); !errors.Is(err, cliexit.ErrUsage) {
			t.Errorf("top %v: %v, want a usage error", bad, err)
		}
	}
}
