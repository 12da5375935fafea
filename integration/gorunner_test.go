package integration

// client.Runner against three real processes: four slots over handlers
// that succeed, fail once, panic once, and outlast the lease; then a
// shutdown in mid-job whose job is released and worked by a second
// runner. Every job is acked exactly once in the end. Then
// examples/goworker on the same cluster.

import (
	"context"
	"fmt"
	"log/slog"
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
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/schema"
)

// workerLease is the visibility timeout of workerCluster's queue "work":
// short, so that a handler outlasts it in seconds.
const workerLease = 2 * time.Second

// workerCluster is three nodes whose config has the queue "work" with a
// 2 s lease, 3 attempts and a 1 s backoff base, and the host node001;
// the primary serves it when this returns.
func workerCluster(t *testing.T) (*clitool.Cluster, *client.Client) {
	t.Helper()
	yaml := `cluster_name: workers
port: 7600
queues:
  - id: 1
    name: work
    visibility_timeout_s: 2
    max_attempts: 3
    backoff_base_s: 1
    dead_letter_retention_s: 604800
hosts:
  - name: node001
    address: 10.0.0.1
`
	f := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	blob, err := configtool.EncodeFile(f)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, 3)
	install(t, c, 0, blob)
	start(t, c, 0, 1, 2)
	converge(t, c, -1, 20*time.Second)
	cl, err := client.NewFromFlag(c.PeersFlag(), admin(t, c), client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	waitListing(t, cl, "work")
	return c, cl
}

// ledger records what the runners did per job.
type ledger struct {
	mu       sync.Mutex
	runs     map[uint64]int // handler calls
	ok       map[uint64]int // handler calls that returned nil
	outcomes map[uint64][]client.Outcome
	started  chan uint64 // the id of each handler call, as it starts
}

func newLedger() *ledger {
	return &ledger{runs: map[uint64]int{}, ok: map[uint64]int{}, outcomes: map[uint64][]client.Outcome{}, started: make(chan uint64, 100)}
}

func (l *ledger) result(r client.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outcomes[r.Job.ID] = append(l.outcomes[r.Job.ID], r.Outcome)
}

func (l *ledger) count(o client.Outcome) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, os := range l.outcomes {
		for _, x := range os {
			if x == o {
				n++
			}
		}
	}
	return n
}

// handler: "ok" succeeds; "flaky" fails its first attempt; "panic"
// panics on its first; "slow" runs for 2.5 leases; "hold" waits for its
// context on its first attempt.
func (l *ledger) handler(ctx context.Context, j *client.Job) error {
	l.mu.Lock()
	l.runs[j.ID]++
	l.mu.Unlock()
	l.started <- j.ID
	var err error
	switch p := string(j.Payload); {
	case p == "flaky" && j.Attempt == 1:
		err = fmt.Errorf("flaky job %d fails its first attempt", j.ID)
	case p == "panic" && j.Attempt == 1:
		panic(fmt.Sprintf("job %d panics on its first attempt", j.ID))
	case p == "slow":
		select {
		case <-time.After(5 * workerLease / 2):
		case <-ctx.Done():
			err = fmt.Errorf("slow job cut off: %w", context.Cause(ctx))
		}
	case p == "hold" && j.Attempt == 1:
		<-ctx.Done()
		err = ctx.Err()
	}
	if err == nil {
		l.mu.Lock()
		l.ok[j.ID]++
		l.mu.Unlock()
	}
	return err
}

func startGoRunner(t *testing.T, cl *client.Client, l *ledger, drain time.Duration) (context.CancelFunc, <-chan error) {
	t.Helper()
	r, err := client.NewRunner(cl, client.RunnerOptions{Host: "node001", Concurrency: 4, Wait: 2 * time.Second, DrainTimeout: drain,
		OnResult: l.result, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Handle("work", l.handler); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return cancel, done
}

func TestGoRunner(t *testing.T) {
	c, cl := workerCluster(t)
	ctx := context.Background()
	kinds := map[string]int{"ok": 12, "flaky": 2, "panic": 1, "slow": 1}
	payload := map[uint64]string{}
	for _, k := range []string{"slow", "ok", "flaky", "panic"} {
		ps := make([][]byte, kinds[k])
		for i := range ps {
			ps[i] = []byte(k)
		}
		rep, err := cl.SubmitBatch(ctx, &schema.SubmitBatchRequest{Queue: "work", Payloads: ps})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range rep.GetIds() {
			payload[id] = k
		}
	}
	l := newLedger()
	cancelA, doneA := startGoRunner(t, cl, l, time.Second)
	defer cancelA()
	waitFor(t, 60*time.Second, "every job acked by runner A", func() bool { return l.count(client.Acked) == len(payload) })

	// Shutdown in mid-job: the held job is released by the drain
	// deadline and claimed again by a second runner.
	rep, err := cl.Submit(ctx, &schema.SubmitRequest{Queue: "work", Payload: []byte("hold")})
	if err != nil {
		t.Fatal(err)
	}
	hold := rep.GetJobs()[0].GetId()
	payload[hold] = "hold"
	for id := range l.started {
		if id == hold {
			break
		}
	}
	cancelA()
	select {
	case err := <-doneA:
		if err != nil {
			t.Fatalf("runner A: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("runner A did not return within 15 s of its shutdown")
	}
	g, err := cl.Get(ctx, &schema.GetRequest{Id: hold})
	if err != nil {
		t.Fatalf("the held job after the shutdown: %v", err)
	}
	if j := g.GetJobs()[0]; j.GetState() != schema.JobState_JOB_STATE_PENDING || j.GetLastError() == "" {
		t.Fatalf("the held job after the shutdown: %v; want pending again, released with a reason", j)
	}
	cancelB, doneB := startGoRunner(t, cl, l, time.Second)
	waitFor(t, 30*time.Second, "the held job acked by runner B", func() bool { return l.count(client.Acked) == len(payload) })
	cancelB()
	if err := <-doneB; err != nil {
		t.Fatalf("runner B: %v", err)
	}

	l.mu.Lock()
	for id, k := range payload {
		want := map[string]int{"ok": 1, "slow": 1, "flaky": 2, "panic": 2, "hold": 2}[k]
		if l.runs[id] != want || l.ok[id] != 1 {
			t.Errorf("job %d (%s): %d runs, %d successful; want %d and 1", id, k, l.runs[id], l.ok[id], want)
		}
		acks := 0
		for _, o := range l.outcomes[id] {
			if o == client.Acked {
				acks++
			}
		}
		if acks != 1 {
			t.Errorf("job %d (%s): outcomes %v, want one ack", id, k, l.outcomes[id])
		}
		// An acked job is deleted: the cluster no longer has it.
		if _, err := cl.Get(ctx, &schema.GetRequest{Id: id}); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("job %d (%s) after its ack: Get says %v, want not_found", id, k, err)
		}
	}
	if want := []client.Outcome{client.Released, client.Acked}; fmt.Sprint(l.outcomes[hold]) != fmt.Sprint(want) {
		t.Errorf("the held job's outcomes %v, want %v", l.outcomes[hold], want)
	}
	l.mu.Unlock()
	list, err := cl.List(ctx, &schema.ListRequest{Queue: "work"})
	if err != nil || len(list.GetJobs()) != 0 {
		t.Errorf("the queue after the runs: %v (%v), want empty", list.GetJobs(), err)
	}
	goWorkerExample(t, c, cl)
}

// goWorkerExample runs examples/goworker on the cluster: a job acked, one
// retried with its command's last stderr line, then SIGTERM and exit 0.
func goWorkerExample(t *testing.T, c *clitool.Cluster, cl *client.Client) {
	t.Helper()
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "goworker")
	build := exec.Command("go", "build", "-o", bin, "./examples/goworker")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/goworker: %v\n%s", err, out)
	}
	ids := map[string]uint64{}
	for _, p := range []string{"fine", "bad"} {
		rep, err := cl.Submit(ctx, &schema.SubmitRequest{Queue: "work", Payload: []byte(p + "\n")})
		if err != nil {
			t.Fatal(err)
		}
		ids[p] = rep.GetJobs()[0].GetId()
	}
	certs := filepath.Join(c.Dir, "certs")
	cmd := exec.Command(bin, "--peers", c.PeersFlag(), "--ca", filepath.Join(certs, "ca.crt"), "--cert", filepath.Join(certs, "admin.crt"),
		"--key", filepath.Join(certs, "admin.key"), "--queue", "work", "--host", "node001", "--wait", "2s", "--concurrency", "2",
		"--command", `read x; echo "ran $x"; case "$x" in bad) echo "no good: $x" >&2; exit 3;; esac`)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	waitFor(t, 30*time.Second, "goworker acks the fine job and retries the bad one", func() bool {
		_, err := cl.Get(ctx, &schema.GetRequest{Id: ids["fine"]})
		g, gerr := cl.Get(ctx, &schema.GetRequest{Id: ids["bad"]})
		return connect.CodeOf(err) == connect.CodeNotFound && gerr == nil && strings.Contains(g.GetJobs()[0].GetLastError(), "no good: bad")
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("goworker after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("goworker did not exit within 15 s of SIGTERM\n%s", out.String())
	}
	if log := out.String(); !strings.Contains(log, "ran fine") || !strings.Contains(log, "job acked") {
		t.Errorf("goworker's output lacks the command's line or the ack\n%s", log)
	}
}

// syncBuffer is a strings.Builder safe for a process's two writers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond every 50 ms until it holds, failing after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
	}
}

// testLogger logs to the test's log (shown when it fails or with -v).
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
