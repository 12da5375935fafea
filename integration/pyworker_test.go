package integration

// The Python worker of examples/ (the standard library only) against three
// real processes: it long-polls through a standby, runs its command per
// job, heartbeats, acks what succeeds and retries what fails.

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
)

func TestPythonWorker(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed for the Python worker test (.ci/run installs it): %v", err)
	}
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

	// The worker starts first: its first claim waits for work.
	certs := filepath.Join(c.Dir, "certs")
	// The standby first in its list: its job operations are forwarded.
	peers := strings.Join([]string{peersOf(c, s), peersOf(c, p), peersOf(c, (p+2)%3)}, ",")
	cmd := exec.Command(py, "../examples/worker.py", "--peers", peers,
		"--ca", filepath.Join(certs, "ca.crt"), "--cert", filepath.Join(certs, "admin.crt"), "--key", filepath.Join(certs, "admin.key"),
		"--queue", "batch", "--host", "node001", "--wait", "2", "--idle-exit", "6",
		"--command", `read x; case "$x" in bad*) echo "cannot do $x" >&2; exit 3;; esac`)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
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

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker: %v\n%s", err, out.String())
		}
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the worker did not go idle and exit\n%s", out.String())
	}
	log := out.String()
	for id := range good {
		if !strings.Contains(log, fmt.Sprintf("job %d: acked", id)) {
			t.Errorf("job %d was not acked by the worker\n%s", id, log)
		}
		if _, err := cl.Get(ctx, &schema.GetRequest{Id: id}); err == nil {
			t.Errorf("job %d still exists after its ack", id)
		}
	}
	// The bad job was handed back (Retry) with the command's error.
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
