package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/sm"
)

// binDir holds xcecontroller, xcecli and xce-config, built by TestMain.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "xce-integration-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/xcecontroller", "./cmd/xcecli", "./cmd/xce-config")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: go build: %v\n%s", err, out)
		return 1
	}
	binDir = dir
	return m.Run()
}

// moduleRoot is the directory holding go.mod (the tests run in
// integration/).
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// fastTimings shorten the election and failure detection for the tests
// that are not about timing: about 0.7 s to elect instead of 2.1 s.
var fastTimings = []string{
	"--election-timeout=600ms", "--election-priority-step=300ms", "--election-jitter=100ms",
	"--heartbeat-interval=150ms", "--failure-timeout=900ms",
}

// Ports. Each is checked free by listening on it, and every port handed
// out in this test binary is remembered so that two tests never share
// one. They are taken below the kernel's ephemeral range when there is
// room: a node's outgoing connections take ephemeral source ports, and
// while a node is down (kill -9, restart) one of them could otherwise land
// on its port, or a dial to the dead port could connect to itself.
var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	lo, hi := 20000, ephemeralLow()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if hi-lo >= 1000 && tries < 200 {
			addr = "127.0.0.1:" + strconv.Itoa(lo+rand.IntN(hi-lo))
		} else if tries >= 400 {
			t.Fatalf("cannot find %d free ports", n)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		p := l.Addr().(*net.TCPAddr).Port
		if portsUsed[p] {
			l.Close()
			continue
		}
		ls = append(ls, l)
		portsUsed[p] = true
		ports = append(ports, p)
	}
	return ports
}

// ephemeralLow is the low end of net.ipv4.ip_local_port_range (32768 if
// unknown).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	v, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return v
}

// newCluster lays out n nodes in a fresh temp dir on free ports with dev
// certificates and no config anywhere. Cleanup stops every node and, if
// the test failed, prints the node logs.
func newCluster(t testing.TB, n int, args ...string) *clitool.Cluster {
	t.Helper()
	c := clitool.NewClusterPorts(t.TempDir(), binDir, freePorts(t, n))
	c.Args = args
	if err := c.Prepare(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i := range c.Names {
			b, err := os.ReadFile(logPath(c, i))
			if err != nil {
				continue
			}
			s := string(b)
			if len(s) > 12000 {
				s = "...\n" + s[len(s)-12000:]
			}
			t.Logf("---- log of %s ----\n%s", c.Names[i], s)
		}
	})
	t.Cleanup(c.Stop)
	return c
}

// install puts blob into node i's conf/ with xce-config's install path.
func install(t testing.TB, c *clitool.Cluster, i int, blob []byte) {
	t.Helper()
	if err := configtool.Install(c.NodeDir(i), c.Names[i], 2, blob); err != nil {
		t.Fatalf("install on %s: %v", c.Names[i], err)
	}
}

func start(t testing.TB, c *clitool.Cluster, nodes ...int) {
	t.Helper()
	for _, i := range nodes {
		if err := c.Start(i); err != nil {
			t.Fatal(err)
		}
	}
}

// stop ends node i with sig and returns its exit code.
func stop(t testing.TB, c *clitool.Cluster, i int, sig syscall.Signal) int {
	t.Helper()
	ch := c.Exited(i)
	if err := c.Signal(i, sig); err != nil {
		t.Fatalf("signal %s: %v", c.Names[i], err)
	}
	select {
	case code := <-ch:
		return code
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not exit within 10 s of %v", c.Names[i], sig)
		return 0
	}
}

// waitExit waits for node i's process to end by itself.
func waitExit(t testing.TB, c *clitool.Cluster, i int, timeout time.Duration) int {
	t.Helper()
	select {
	case code := <-c.Exited(i):
		return code
	case <-time.After(timeout):
		t.Fatalf("%s still running after %v", c.Names[i], timeout)
		return 0
	}
}

// ---- logs ----

func logPath(c *clitool.Cluster, i int) string {
	return filepath.Join(c.Dir, "logs", c.Names[i]+".log")
}

// logOffset is the current size of node i's log: pass it to logSince and
// waitLog to look only at what a restarted process writes.
func logOffset(c *clitool.Cluster, i int) int64 {
	st, err := os.Stat(logPath(c, i))
	if err != nil {
		return 0
	}
	return st.Size()
}

func logSince(c *clitool.Cluster, i int, off int64) string {
	b, err := os.ReadFile(logPath(c, i))
	if err != nil || int64(len(b)) < off {
		return ""
	}
	return string(b[off:])
}

// waitLog waits until node i's log after off has a line containing want
// and returns that line.
func waitLog(t testing.TB, c *clitool.Cluster, i int, off int64, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if line := findLine(logSince(c, i, off), want); line != "" {
			return line
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never logged %q within %v", c.Names[i], want, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func findLine(text, want string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, want) {
			return line
		}
	}
	return ""
}

// ---- status ----

func admin(t testing.TB, c *clitool.Cluster) *tlsconf.Material {
	t.Helper()
	mat, err := c.Admin()
	if err != nil {
		t.Fatal(err)
	}
	return mat
}

// peersOf is the --peers string of a subset of the nodes, for asking only
// them.
func peersOf(c *clitool.Cluster, nodes ...int) string {
	parts := make([]string, len(nodes))
	for k, i := range nodes {
		parts[k] = fmt.Sprintf("%s=127.0.0.1:%d", c.Names[i], c.Port(i))
	}
	return strings.Join(parts, ",")
}

// statusOf asks node i alone.
func statusOf(t testing.TB, c *clitool.Cluster, mat *tlsconf.Material, i int) clitool.PeerStatus {
	t.Helper()
	rows, err := clitool.Statuses(context.Background(), peersOf(c, i), mat, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return rows[0]
}

// waitRole waits until node i reports role.
func waitRole(t testing.TB, c *clitool.Cluster, i int, role string, timeout time.Duration) clitool.PeerStatus {
	t.Helper()
	mat := admin(t, c)
	deadline := time.Now().Add(timeout)
	for {
		st := statusOf(t, c, mat, i)
		if st.Up && st.Role == role && st.Serving {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not a serving %s within %v: %+v", c.Names[i], role, timeout, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// converge waits for one primary and every other node (but skip) a
// serving standby on the primary's config tag.
func converge(t testing.TB, c *clitool.Cluster, skip int, timeout time.Duration) ([]clitool.PeerStatus, int) {
	t.Helper()
	rows, p, err := c.WaitConverged(context.Background(), skip, timeout)
	if err != nil {
		t.Fatalf("%v; last status:\n%s", err, fmtRows(rows))
	}
	return rows, p
}

func fmtRows(rows []clitool.PeerStatus) string {
	var b strings.Builder
	for _, r := range rows {
		if !r.Up {
			fmt.Fprintf(&b, "  %s down (%s)\n", r.Name, r.Error)
			continue
		}
		fmt.Fprintf(&b, "  %s role=%s term=%d primary=%s tag=%s serving=%v\n", r.Name, r.Role, r.Term, r.Primary, r.ConfigTag, r.Serving)
	}
	return b.String()
}

// ---- configs ----

// configBlob encodes a config named name with queues queues whose names
// are padded to about pad bytes, through the YAML path of xce-config.
func configBlob(t testing.TB, name string, queues, pad int) []byte {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "cluster_name: %s\nport: 7600\nqueues:\n", name)
	filler := strings.Repeat("x", max(0, pad))
	for q := 1; q <= queues; q++ {
		fmt.Fprintf(&b, "  - id: %d\n    name: q%06d-%s\n    visibility_timeout_s: 300\n    max_attempts: 3\n    backoff_base_s: 10\n    dead_letter_retention_s: 604800\n", q, q, filler)
	}
	b.WriteString("hosts:\n  - name: node001\n    address: 10.0.0.1\n    resource_ids: [1]\nresources:\n  - id: 1\n    name: a100\n    count: 4\n")
	f := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	blob, err := configtool.EncodeFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return blob
}

// configOfSize is a config blob of about size bytes (at most size, and
// at most sm.MaxConfigSize).
func configOfSize(t testing.TB, name string, size int) []byte {
	t.Helper()
	const pad = 40
	probe := configBlob(t, name, 100, pad)
	per := float64(len(configBlob(t, name, 200, pad))-len(probe)) / 100
	n := 100 + int(float64(size-len(probe))/per)
	for {
		blob := configBlob(t, name, max(n, 1), pad)
		if len(blob) <= size && len(blob) <= sm.MaxConfigSize {
			return blob
		}
		n -= 1 + n/200
	}
}

func sumOf(blob []byte) [32]byte { return sha256.Sum256(blob) }

func tagHex(blob []byte) string { return sm.TagHex(sm.TagOf(blob)) }

// verifyConf runs `xce-config verify` semantics on node i's directory and
// checks it holds want.
func verifyConf(t testing.TB, c *clitool.Cluster, i int, want []byte) *configtool.Info {
	t.Helper()
	info, err := configtool.Inspect(c.NodeDir(i), 0, time.Now())
	if err != nil {
		t.Fatalf("%s: verify: %v", c.Names[i], err)
	}
	sum := sumOf(want)
	if info.Pointer != sm.VersionName(sum) || info.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("%s: conf/current -> %s (sha256 %s), want %s (sha256 %x)", c.Names[i], info.Pointer, info.SHA256, sm.VersionName(sum), sum)
	}
	return info
}

func confDir(c *clitool.Cluster, i int) string { return filepath.Join(c.NodeDir(i), sm.ConfDir) }

// checkVersionedFiles asserts that every versioned file (not a .tmp) in
// conf/ hashes to its name: the save procedure never leaves a torn one.
func checkVersionedFiles(t testing.TB, dir string) (versioned, tmp int) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch {
		case sm.IsVersionName(e.Name()):
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if !sm.NameMatches(e.Name(), sumOf(b)) {
				t.Fatalf("%s/%s: %d bytes whose SHA-256 does not match the name — a torn versioned file", dir, e.Name(), len(b))
			}
			versioned++
		case strings.HasSuffix(e.Name(), ".tmp"):
			tmp++
		}
	}
	return versioned, tmp
}

// fileState identifies one file's version: a rewrite (even by rename of
// identical bytes) changes the inode or the mtime.
type fileState struct {
	Size  int64
	Mod   time.Time
	Inode uint64
	Sum   [32]byte
}

func snapshotDir(t testing.TB, dir string) map[string]fileState {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fileState{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fs := fileState{Size: st.Size(), Mod: st.ModTime(), Sum: sumOf(b)}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			fs.Inode = sys.Ino
		}
		out[e.Name()] = fs
	}
	return out
}

func diffSnapshots(a, b map[string]fileState) string {
	var d []string
	for n, x := range a {
		y, ok := b[n]
		switch {
		case !ok:
			d = append(d, n+" removed")
		case x != y:
			d = append(d, fmt.Sprintf("%s changed: %+v -> %+v", n, x, y))
		}
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			d = append(d, n+" added")
		}
	}
	return strings.Join(d, "; ")
}

// median of durations (sorted copy).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
