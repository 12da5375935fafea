package integration

// Network namespaces for partitions (root and iproute2 needed). Each node
// runs in its own namespace with one veth into a bridge that lives in a
// "switch" namespace; the test process reaches the bridge through one
// more veth, so clients and status polls see every node. A partition is
// a pair of blackhole routes (one in each node's namespace): the packets
// between the two nodes are dropped, everything else flows. Nothing is
// changed in the test's own namespace but the one veth end (and its
// subnet route), which goes away with the switch namespace.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// netnsPort is every node's port (each has its own address).
const netnsPort = 7600

var netnsSeq atomic.Int64

type netns struct {
	prefix string   // namespace names: prefix-sw, prefix-n0, ...
	ips    []string // node i's address
	subnet string   // 10.231.X
	mu     sync.Mutex
	cut    map[[2]int]bool
	closed bool
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// sweepStaleNetns deletes the namespaces of earlier test processes that
// died before their cleanup (their names carry the pid).
func sweepStaleNetns() {
	ents, err := os.ReadDir("/var/run/netns")
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "xcetest-")
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			_ = ipCmd("netns", "del", e.Name())
		}
	}
}

// freeSubnet picks a 10.231.X.0/24 no interface here uses.
func freeSubnet() (string, error) {
	out, err := exec.Command("ip", "-o", "addr").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip -o addr: %v: %s", err, out)
	}
	start := rand.IntN(250)
	for k := 0; k < 250; k++ {
		s := fmt.Sprintf("10.231.%d", 1+(start+k)%250)
		if !strings.Contains(string(out), " "+s+".") {
			return s, nil
		}
	}
	return "", fmt.Errorf("no free 10.231.X.0/24 subnet")
}

// newNetns builds the namespaces of n nodes; close removes them.
func newNetns(n int) (ns *netns, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("not root (euid %d)", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, err
	}
	sweepStaleNetns()
	seq := netnsSeq.Add(1)
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	ns = &netns{prefix: fmt.Sprintf("xcetest-%d-%d", os.Getpid(), seq), subnet: subnet, cut: map[[2]int]bool{}}
	defer func() {
		if err != nil {
			ns.close()
		}
	}()
	// Interface names in the test's namespace are at most 15 bytes.
	ifp := fmt.Sprintf("xt%x%c", (os.Getpid()*7+int(seq))&0xfffff, 'a'+rune(seq%26))
	sw := ns.prefix + "-sw"
	steps := [][]string{
		{"netns", "add", sw},
		{"-n", sw, "link", "set", "lo", "up"},
		{"-n", sw, "link", "add", "br0", "type", "bridge"},
		{"-n", sw, "link", "set", "br0", "up"},
	}
	for i := 0; i < n; i++ {
		node := fmt.Sprintf("%s-n%d", ns.prefix, i)
		ip := fmt.Sprintf("%s.%d", subnet, i+1)
		ns.ips = append(ns.ips, ip)
		a, b := fmt.Sprintf("%sv%d", ifp, i), fmt.Sprintf("%sb%d", ifp, i)
		steps = append(steps,
			[]string{"netns", "add", node},
			[]string{"-n", node, "link", "set", "lo", "up"},
			[]string{"link", "add", a, "type", "veth", "peer", "name", b},
			[]string{"link", "set", a, "netns", node, "name", "eth0"},
			[]string{"link", "set", b, "netns", sw},
			[]string{"-n", sw, "link", "set", b, "master", "br0"},
			[]string{"-n", sw, "link", "set", b, "up"},
			[]string{"-n", node, "addr", "add", ip + "/24", "dev", "eth0"},
			[]string{"-n", node, "link", "set", "eth0", "up"},
		)
	}
	h, hb := ifp+"h", ifp+"hb"
	steps = append(steps,
		[]string{"link", "add", h, "type", "veth", "peer", "name", hb},
		[]string{"link", "set", hb, "netns", sw},
		[]string{"-n", sw, "link", "set", hb, "master", "br0"},
		[]string{"-n", sw, "link", "set", hb, "up"},
		[]string{"addr", "add", subnet + ".254/24", "dev", h},
		[]string{"link", "set", h, "up"},
	)
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			return ns, err
		}
	}
	return ns, nil
}

func (ns *netns) nodeNS(i int) string { return fmt.Sprintf("%s-n%d", ns.prefix, i) }

// peersFlag is the --peers string on the namespaces' addresses.
func (ns *netns) peersFlag(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%s:%d", n, ns.ips[i], netnsPort)
	}
	return strings.Join(parts, ",")
}

// binDir is a directory whose xcecontroller runs the real one inside the
// node's namespace (chosen by --name nN); `ip netns exec` execs it, so
// the pid clitool.Cluster signals is the controller's own.
func (ns *netns) binDir(t testing.TB, real string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "nsbin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
name=
prev=
for a in "$@"; do
  if [ "$prev" = "--name" ]; then name=$a; fi
  prev=$a
done
num=${name#n}
exec ip netns exec "%s-n$num" %q "$@"
`, ns.prefix, filepath.Join(real, "xcecontroller"))
	if err := os.WriteFile(filepath.Join(dir, "xcecontroller"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (ns *netns) route(op string, from, to int) error {
	return ipCmd("-n", ns.nodeNS(from), "route", op, "blackhole", ns.ips[to]+"/32")
}

// cut drops every packet between nodes a and b (both ways).
func (ns *netns) cutLink(a, b int) error {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	k := [2]int{min(a, b), max(a, b)}
	if ns.cut[k] {
		return nil
	}
	if err := ns.route("add", a, b); err != nil {
		return err
	}
	if err := ns.route("add", b, a); err != nil {
		return err
	}
	ns.cut[k] = true
	return nil
}

// isolate cuts node a from each of others.
func (ns *netns) isolate(a int, others ...int) error {
	for _, b := range others {
		if err := ns.cutLink(a, b); err != nil {
			return err
		}
	}
	return nil
}

// heal restores every cut link.
func (ns *netns) heal() {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	for k := range ns.cut {
		_ = ns.route("del", k[0], k[1])
		_ = ns.route("del", k[1], k[0])
		delete(ns.cut, k)
	}
}

// close deletes the namespaces (the veths go with them).
func (ns *netns) close() {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.closed {
		return
	}
	ns.closed = true
	for i := range ns.ips {
		_ = ipCmd("netns", "del", ns.nodeNS(i))
	}
	_ = ipCmd("netns", "del", ns.prefix+"-sw")
}
