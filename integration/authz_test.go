package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
)

// toolAs runs an xce binary (xcecli, xce-config) against the cluster with
// the dev certificate of name (a node, admin or worker) and returns its
// combined output and exit code.
func toolAs(t testing.TB, c *clitool.Cluster, tool, name string, args ...string) (string, int) {
	t.Helper()
	certs := filepath.Join(c.Dir, "certs")
	args = append(args, "--peers", c.PeersFlag(), "--cert", filepath.Join(certs, name+".crt"),
		"--key", filepath.Join(certs, name+".key"), "--ca", filepath.Join(certs, "ca.crt"))
	return runTool(t, exec.Command(filepath.Join(binDir, tool), args...))
}

// runTool runs cmd and returns its combined output and exit code; a
// command that could not run at all fails the test.
func runTool(t testing.TB, cmd *exec.Cmd) (string, int) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	default:
		t.Fatalf("%q: %v\n%s", cmd.Args, err, out)
		return "", -1
	}
}

// Authorisation by certificate role against real processes (issue 8
// build 1): a worker is refused OP_upgradeConfig and the operator
// commands, a peer's certificate every client request, and an admin is
// allowed all of them. Each refusal is definite (exit 1, "Not
// authorised", the role needed; never "outcome unknown"), is logged with
// the caller's CN, and changes nothing.
func TestAuthorisationByRole(t *testing.T) {
	c := newCluster(t, 2, fastTimings...) // every node: --admin-cn admin
	blob := configBlob(t, "authz", 2, 8)
	install(t, c, 0, blob)
	start(t, c, 0, 1)
	converge(t, c, -1, 20*time.Second)
	yaml := filepath.Join(t.TempDir(), "new.bin")
	if err := os.WriteFile(yaml, configBlob(t, "authz-next", 3, 8), 0o600); err != nil {
		t.Fatal(err)
	}
	q := "q000001-xxxxxxxx"
	refused := func(out string, code int, want string) {
		t.Helper()
		if code != 1 || !strings.Contains(out, "Not authorised — "+want) || strings.Contains(out, "unknown") {
			t.Fatalf("exit %d, output %q; want a refusal %q", code, out, want)
		}
	}

	// The worker: job operations yes, operator commands no.
	out, code := toolAs(t, c, "xcecli", "worker", "job", "submit", "--queue", q, "--payload", "w")
	if code != 0 {
		t.Fatalf("worker submit: exit %d: %s", code, out)
	}
	out, code = toolAs(t, c, "xce-config", "worker", "push", "--blob", yaml)
	refused(out, code, `OP_upgradeConfig needs the admin role; certificate "worker" has the worker role`)
	out, code = toolAs(t, c, "xcecli", "worker", "job", "redrive", "1")
	refused(out, code, `job redrive needs the admin role; certificate "worker" has the worker role`)
	out, code = toolAs(t, c, "xcecli", "worker", "job", "sweep")
	refused(out, code, "job sweep needs the admin role")

	// A controller's certificate speaks only the peer protocol.
	out, code = toolAs(t, c, "xcecli", "n1", "job", "submit", "--queue", q, "--payload", "p")
	refused(out, code, `job enqueue needs the worker role; certificate "n1" has the peer role; a controller's certificate speaks the peer protocol and asks for status only`)
	out, code = toolAs(t, c, "xcecli", "n1", "job", "list", "--queue", q)
	refused(out, code, "job list needs the worker role")

	// Nothing the refused requests asked for happened: one job, pending.
	out, code = toolAs(t, c, "xcecli", "admin", "job", "list", "--queue", q, "-o", "json")
	if code != 0 || strings.Count(out, `"id"`) != 1 {
		t.Fatalf("admin list: exit %d: %s", code, out)
	}
	waitLog(t, c, 0, 0, `certificate "n1" has the peer role`, 2*time.Second)

	// The admin may do all of it.
	out, code = toolAs(t, c, "xcecli", "admin", "job", "sweep")
	if code != 0 {
		t.Fatalf("admin sweep: exit %d: %s", code, out)
	}
	off := logOffset(c, 0)
	out, code = toolAs(t, c, "xce-config", "admin", "push", "--blob", yaml)
	if code != 0 || !strings.Contains(out, "upgraded: tag=") {
		t.Fatalf("admin push: exit %d: %s", code, out)
	}
	waitLog(t, c, 0, off, "by CN=admin — requesting restart", 5*time.Second)
}

// test_lost_and_found_drain (seed §14.4) against a real process: a config
// push removes a queue holding two jobs, the restarted primary's recovery
// sidelines them in lost_and_found; a worker may not drain them, an admin
// does (one logged record), and lost_and_found is then empty, also after
// another restart replays the drain.
func TestLostAndFoundDrainCLI(t *testing.T) {
	c := newCluster(t, 1, fastTimings...)
	install(t, c, 0, configBlob(t, "drain-before", 2, 8))
	start(t, c, 0)
	waitRole(t, c, 0, "primary", 15*time.Second)
	keep, gone := "q000001-xxxxxxxx", "q000002-xxxxxxxx"
	for _, q := range []string{gone, gone, keep} {
		if out, code := toolAs(t, c, "xcecli", "worker", "job", "submit", "--queue", q, "--payload", "j"); code != 0 {
			t.Fatalf("submit to %s: exit %d: %s", q, code, out)
		}
	}
	next := filepath.Join(t.TempDir(), "one-queue.bin")
	if err := os.WriteFile(next, configBlob(t, "drain-after", 1, 8), 0o600); err != nil {
		t.Fatal(err)
	}
	exited := c.Exited(0)
	if out, code := toolAs(t, c, "xce-config", "admin", "push", "--blob", next); code != 0 {
		t.Fatalf("push: exit %d: %s", code, out)
	}
	if code := exitCode(t, exited); code != 0 {
		t.Fatalf("exit code %d after the push, want 0", code)
	}
	restart := func() {
		t.Helper()
		start(t, c, 0)
		waitRole(t, c, 0, "primary", 15*time.Second)
	}
	restart()
	waitLog(t, c, 0, 0, "lost_and_found_job_count=2", 5*time.Second)
	count := func(queue string) int {
		t.Helper()
		out, code := toolAs(t, c, "xcecli", "admin", "job", "list", "--queue", queue, "-o", "json")
		if code != 0 {
			t.Fatalf("list %s: exit %d: %s", queue, code, out)
		}
		return strings.Count(out, `"id"`)
	}
	if n := count("lost_and_found"); n != 2 {
		t.Fatalf("lost_and_found holds %d jobs, want 2", n)
	}

	out, code := toolAs(t, c, "xcecli", "worker", "lost-and-found", "drain", "--to-queue", keep)
	if code != 1 || !strings.Contains(out, `Not authorised — job lost-and-found-drain needs the admin role; certificate "worker" has the worker role`) {
		t.Fatalf("worker drain: exit %d: %s", code, out)
	}
	if n := count("lost_and_found"); n != 2 {
		t.Fatalf("after the refused drain lost_and_found holds %d jobs, want 2", n)
	}
	out, code = toolAs(t, c, "xcecli", "admin", "lost-and-found", "drain", "--to-queue", keep)
	if code != 0 || !strings.Contains(out, "moved 2 sidelined job(s) to queue "+keep) {
		t.Fatalf("admin drain: exit %d: %s", code, out)
	}
	if a, b := count("lost_and_found"), count(keep); a != 0 || b != 3 {
		t.Fatalf("after the drain: lost_and_found %d, %s %d; want 0 and 3", a, keep, b)
	}

	// The drain is a logged record: a restart replays it after the routing.
	off := logOffset(c, 0)
	if code := stop(t, c, 0, syscall.SIGTERM); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	restart()
	if a, b := count("lost_and_found"), count(keep); a != 0 || b != 3 {
		t.Fatalf("after a restart: lost_and_found %d, %s %d; want 0 and 3", a, keep, b)
	}
	if strings.Contains(logSince(c, 0, off), "lost_and_found_job_count=") {
		t.Fatalf("the restart still reports sidelined jobs:\n%s", logSince(c, 0, off))
	}
}
