package integration

import (
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The systemd readiness protocol of the Type=notify unit, against the real
// daemon: with NOTIFY_SOCKET pointing at a unixgram socket the test
// listens on, a lone node of three (a candidate, /readyz 503) sends
// nothing; once its peers start and it serves, READY=1 arrives, and then
// its /readyz answers 200; SIGTERM brings STOPPING=1 and a clean exit 0.
func TestSystemdNotify(t *testing.T) {
	// A unix socket path is at most 107 bytes: a short directory, not
	// t.TempDir's (which holds the test's name).
	dir, err := os.MkdirTemp("", "xce-notify-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// recv is the next notification within d ("" if none came).
	recv := func(d time.Duration) string {
		t.Helper()
		buf := make([]byte, 4096)
		if err := conn.SetReadDeadline(time.Now().Add(d)); err != nil {
			t.Fatal(err)
		}
		n, _, err := conn.ReadFromUnix(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return ""
		}
		if err != nil {
			t.Fatalf("read %s: %v", sock, err)
		}
		return string(buf[:n])
	}

	c := newCluster(t, 3, fastTimings...)
	c.MetricsPorts = freePorts(t, 3)
	c.Env = map[int][]string{0: {"NOTIFY_SOCKET=" + sock}}
	install(t, c, 0, configBlob(t, "notify", 1, 0))

	start(t, c, 0)
	waitReadyz(t, c, 0, func(code int, body string) bool { return code != 0 })
	// Alone it cannot be elected: several election timeouts without a
	// notification, and /readyz says why it is not ready.
	if msg := recv(3 * time.Second); msg != "" {
		code, body := httpGet(t, c, 0, "/readyz")
		t.Fatalf("a lone candidate notified %q (/readyz %d %q)", msg, code, body)
	}
	if code, body := httpGet(t, c, 0, "/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("lone n0: /readyz %d %q, want 503", code, body)
	}

	start(t, c, 1, 2)
	msg := recv(30 * time.Second)
	if msg != "READY=1" {
		t.Fatalf("after its peers started n0 notified %q, want READY=1", msg)
	}
	if code, body := httpGet(t, c, 0, "/readyz"); code != http.StatusOK || !strings.HasPrefix(body, "ready: ") {
		t.Fatalf("n0 notified READY=1 but /readyz answers %d %q", code, body)
	}
	// Once: a later change of role (here none) never repeats it.
	if again := recv(500 * time.Millisecond); again != "" {
		t.Fatalf("a second notification %q after READY=1", again)
	}

	exited := c.Exited(0)
	if err := c.Signal(0, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if msg := recv(10 * time.Second); msg != "STOPPING=1" {
		t.Fatalf("on SIGTERM n0 notified %q, want STOPPING=1", msg)
	}
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("n0 exited %d after SIGTERM, want 0", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("n0 did not exit within 15 s of SIGTERM")
	}
}
