package integration

// The Python worker (python/, the standard library only) against three
// real processes: installed with pip where pip, setuptools and wheel are
// there (else run from the source tree), it long-polls through a
// standby, runs its command per job with the command's output passed
// through, heartbeats, acks what succeeds and retries what fails; on
// SIGTERM it drains (a running command finishes and is acked, or is
// killed at the deadline and its job handed back) and exits 0.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/schema"
)

// pyWorkerCommand is the command line that starts the Python worker and
// the environment it needs: the xce-worker script of a pip install into
// a temporary directory when the machine can build the package without
// the network, else python3 -m xce_worker from the source tree.
func pyWorkerCommand(t *testing.T) ([]string, []string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed for the Python worker tests (.ci/run installs it): %v", err)
	}
	src, err := filepath.Abs("../python")
	if err != nil {
		t.Fatal(err)
	}
	// Building the wheel needs bdist_wheel: the wheel package, or
	// setuptools 70.1 and later.
	const probe = "import setuptools\ntry:\n import wheel\nexcept ImportError:\n import setuptools.command.bdist_wheel"
	if exec.Command(py, "-c", probe).Run() == nil && exec.Command(py, "-m", "pip", "--version").Run() == nil {
		dir := t.TempDir()
		out, err := exec.Command(py, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
			"--target", dir, src).CombinedOutput()
		if err != nil {
			t.Fatalf("pip install of python/: %v\n%s", err, out)
		}
		t.Logf("the worker: xce-worker installed by pip into %s", dir)
		return []string{filepath.Join(dir, "bin", "xce-worker")}, append(os.Environ(), "PYTHONPATH="+dir)
	}
	t.Logf("the worker: python3 -m xce_worker from %s (pip, setuptools or wheel missing: no install)", src)
	return []string{py, "-m", "xce_worker"}, append(os.Environ(), "PYTHONPATH="+src)
}

// pyWorker is a running Python worker and its output (stdout and stderr
// together), line by line.
type pyWorker struct {
	cmd   *exec.Cmd
	done  chan error
	mu    sync.Mutex
	out   strings.Builder
	lines chan string
}

func startPyWorker(t *testing.T, c *clitool.Cluster, peers string, args ...string) *pyWorker {
	t.Helper()
	argv, env := pyWorkerCommand(t)
	certs := filepath.Join(c.Dir, "certs")
	argv = append(argv, "--peers", peers,
		"--ca", filepath.Join(certs, "ca.crt"), "--cert", filepath.Join(certs, "admin.crt"), "--key", filepath.Join(certs, "admin.key"),
		"--host", "node001")
	cmd := exec.Command(argv[0], append(argv[1:], args...)...)
	cmd.Env = env
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	p := &pyWorker{cmd: cmd, done: make(chan error, 1), lines: make(chan string, 1000)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() { err := cmd.Wait(); <-read; p.done <- err }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return p
}

func (p *pyWorker) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitLine waits for a line of output equal to want.
func (p *pyWorker) waitLine(t *testing.T, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l := <-p.lines:
			if l == want {
				return
			}
		case <-deadline:
			t.Fatalf("no line %q within %v\n%s", want, within, p.output())
		}
	}
}

// wait waits for the worker's exit, which must be status 0.
func (p *pyWorker) wait(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("worker: %v\n%s", err, p.output())
		}
	case <-time.After(within):
		t.Fatalf("the worker did not exit within %v\n%s", within, p.output())
	}
	if strings.Contains(p.output(), "Traceback") {
		t.Fatalf("the worker printed a traceback\n%s", p.output())
	}
}

func TestPythonWorker(t *testing.T) {
	c, _, p := exampleCluster(t)
	s := (p + 1) % 3
	mat := admin(t, c)
	cl, err := client.NewFromFlag(c.PeersFlag(), mat, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitListing(t, cl, "batch")
	ctx := context.Background()

	// The shim in examples/ runs the same program from the source tree.
	if out, err := exec.Command("python3", "../examples/worker.py", "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "usage: xce-worker") {
		t.Fatalf("examples/worker.py --help: %v\n%s", err, out)
	}

	// The worker starts first: its first claim waits for work. The
	// standby is first in its list: its job operations are forwarded.
	peers := strings.Join([]string{peersOf(c, s), peersOf(c, p), peersOf(c, (p+2)%3)}, ",")
	w := startPyWorker(t, c, peers, "--queue", "batch", "--wait", "2", "--idle-exit", "6", "--concurrency", "2",
		"--command", `read x; echo "out $x"; echo "err $x" >&2; case "$x" in bad*) echo "cannot do $x" >&2; exit 3;; esac`)
	time.Sleep(time.Second)
	good := map[uint64]bool{}
	for k := 0; k < 5; k++ {
		r, err := cl.Submit(ctx, &schema.SubmitRequest{Queue: "batch", Payload: []byte(fmt.Sprintf("good %d\n", k))})
		if err != nil {
			t.Fatal(err)
		}
		good[r.GetJobs()[0].GetId()] = true
	}
	r, err := cl.Submit(ctx, &schema.SubmitRequest{Queue: "batch", Payload: []byte("bad input\n")})
	if err != nil {
		t.Fatal(err)
	}
	bad := r.GetJobs()[0].GetId()
	w.wait(t, 90*time.Second)
	log := w.output()
	for k := 0; k < 5; k++ {
		// The command's stdout and stderr, passed through a line at a time.
		for _, l := range []string{fmt.Sprintf("out good %d", k), fmt.Sprintf("err good %d", k)} {
			if !strings.Contains("\n"+log, "\n"+l+"\n") {
				t.Errorf("the command's line %q is not in the worker's output\n%s", l, log)
			}
		}
	}
	for id := range good {
		if !strings.Contains(log, fmt.Sprintf("job %d: acked", id)) {
			t.Errorf("job %d was not acked by the worker\n%s", id, log)
		}
		if _, err := cl.Get(ctx, &schema.GetRequest{Id: id}); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("job %d after its ack: %v, want not_found", id, err)
		}
	}
	// The bad job was handed back (Retry) with the command's last stderr line.
	if !strings.Contains(log, fmt.Sprintf("job %d: retried (exit 3: cannot do bad input)", bad)) {
		t.Errorf("job %d was not retried with the command's error\n%s", bad, log)
	}
	g, err := cl.Get(ctx, &schema.GetRequest{Id: bad})
	if err != nil {
		t.Fatalf("get job %d: %v", bad, err)
	}
	if j := g.GetJobs()[0]; !strings.Contains(j.GetLastError(), "cannot do bad input") {
		t.Errorf("job %d: state %s, last error %q; want the command's error", bad, j.GetState(), j.GetLastError())
	}
}

// SIGTERM drains: a command running when it comes finishes (longer than
// the 2 s lease: heartbeats keep the claim) and its job is acked; one
// still running at the drain deadline is killed and its job handed back
// with Retry. The worker exits 0 both times, without a traceback.
func TestPythonWorkerDrain(t *testing.T) {
	c, cl := workerCluster(t)
	ctx := context.Background()
	submit := func() uint64 {
		t.Helper()
		r, err := cl.Submit(ctx, &schema.SubmitRequest{Queue: "work", Payload: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetJobs()[0].GetId()
	}

	a := submit()
	w := startPyWorker(t, c, c.PeersFlag(), "--queue", "work", "--wait", "2", "--drain", "20",
		"--command", `echo "begin $XCE_JOB_ID"; sleep 3; echo "end $XCE_JOB_ID"`)
	w.waitLine(t, fmt.Sprintf("begin %d", a), 20*time.Second)
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	w.wait(t, 20*time.Second)
	log := w.output()
	for _, want := range []string{fmt.Sprintf("\nend %d\n", a), fmt.Sprintf("job %d: acked", a), "SIGTERM: stopping"} {
		if !strings.Contains(log, want) {
			t.Errorf("no %q in the worker's output\n%s", want, log)
		}
	}
	if _, err := cl.Get(ctx, &schema.GetRequest{Id: a}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("job %d after the drain: %v, want not_found (acked)", a, err)
	}

	b := submit()
	w = startPyWorker(t, c, c.PeersFlag(), "--queue", "work", "--wait", "2", "--drain", "1",
		"--command", `echo "begin $XCE_JOB_ID"; sleep 60`)
	w.waitLine(t, fmt.Sprintf("begin %d", b), 20*time.Second)
	t0 := time.Now()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	w.wait(t, 20*time.Second)
	t.Logf("the worker exited %v after SIGTERM with a 1 s drain", time.Since(t0).Round(time.Millisecond))
	g, err := cl.Get(ctx, &schema.GetRequest{Id: b})
	if err != nil {
		t.Fatalf("job %d after the drain: %v", b, err)
	}
	if j := g.GetJobs()[0]; j.GetState() != schema.JobState_JOB_STATE_PENDING || !strings.Contains(j.GetLastError(), "drain deadline") {
		t.Errorf("job %d after the drain: %s, last error %q; want pending, handed back at the drain deadline\n%s",
			b, j.GetState(), j.GetLastError(), w.output())
	}
	if log := w.output(); !strings.Contains(log, fmt.Sprintf("job %d: released", b)) {
		t.Errorf("job %d not released in the worker's log\n%s", b, log)
	}
}
