package main

// The xce sides' processes: xcecontroller built from this repository,
// dev certificates and the config installed the way `make run` does
// (clitool.Cluster, configtool), 1 or 3 nodes (quorum mode, the default
// for 3) on free loopback ports in a temp dir removed at the end.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
)

const (
	xceWorkQueue    = "bench"
	xceLatencyQueue = "latency"
	xceHost         = "node001" // the claimant host, in the config
)

// benchConfig: the work queue and the latency queue (kept apart so the
// latency jobs never reach the next round's workers).
const benchConfig = `cluster_name: bench-peers
port: 7600
queues:
  - id: 1
    name: bench
    visibility_timeout_s: 300
    max_attempts: 3
    backoff_base_s: 10
    dead_letter_retention_s: 604800
  - id: 2
    name: latency
    visibility_timeout_s: 300
    max_attempts: 3
    backoff_base_s: 10
    dead_letter_retention_s: 604800
hosts:
  - name: node001
    address: 10.0.0.1
    resource_ids: [1]
resources:
  - id: 1
    name: a100
    count: 4
`

type xceCluster struct {
	dir string
	c   *clitool.Cluster
}

// repoRoot is the nearest directory above the working one whose go.mod
// is xce's module.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/xce-hpc/xce\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of module github.com/xce-hpc/xce above %s", wd)
		}
	}
}

// buildXce builds xcecontroller from the repository into binDir and
// returns binDir.
func buildXce(ctx context.Context, binDir string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", binDir+string(filepath.Separator), "./cmd/xcecontroller")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/xcecontroller: %w\n%s", err, out)
	}
	return binDir, nil
}

// startXce starts nodes (1: a lone primary; 3: quorum mode) from the
// xcecontroller in binDir, in a new directory under parent, with the
// config on n0 only; with pprof, each node also serves Go's profiles on
// a loopback metrics port.
func startXce(ctx context.Context, parent, binDir string, nodes int, pprof bool) (_ *xceCluster, err error) {
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("xce%d-", nodes))
	if err != nil {
		return nil, err
	}
	x := &xceCluster{dir: dir}
	defer func() {
		if err != nil {
			x.stop()
		}
	}()
	ports, err := freePorts(2 * nodes)
	if err != nil {
		return nil, err
	}
	x.c = clitool.NewClusterPorts(filepath.Join(dir, "cluster"), binDir, ports[:nodes])
	if pprof {
		x.c.MetricsPorts = ports[nodes:]
		x.c.Args = append(x.c.Args, "--pprof")
	}
	if err := x.c.Prepare(""); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(cfg, []byte(benchConfig), 0o600); err != nil {
		return nil, err
	}
	blob, err := configtool.EncodeFile(cfg)
	if err != nil {
		return nil, err
	}
	if err := configtool.Install(x.c.NodeDir(0), x.c.Names[0], 2, blob); err != nil {
		return nil, err
	}
	for i := range x.c.Names {
		if err := x.c.Start(i); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// index is the node serving addr (-1 if none).
func (x *xceCluster) index(addr string) int {
	for i := range x.c.Names {
		if fmt.Sprintf("127.0.0.1:%d", x.c.Port(i)) == addr {
			return i
		}
	}
	return -1
}

// metricsURL is node i's metrics listener, which serves /metrics and,
// with --pprof, /debug/pprof/ ("" without one).
func (x *xceCluster) metricsURL(i int) string {
	if x.c.MetricsPorts == nil {
		return ""
	}
	return "http://" + x.c.MetricsAddr(i)
}

// target is the cluster as a client sees it (the worker certificate).
func (x *xceCluster) target() xceTarget {
	t := xceTarget{Timeout: 30 * time.Second, WaitServingLimit: 60 * time.Second}
	for i := range x.c.Names {
		t.Addrs = append(t.Addrs, fmt.Sprintf("127.0.0.1:%d", x.c.Port(i)))
		t.Names = append(t.Names, x.c.Names[i])
	}
	certs := filepath.Join(x.c.Dir, "certs")
	t.Cert = filepath.Join(certs, configtool.WorkerCN+".crt")
	t.Key = filepath.Join(certs, configtool.WorkerCN+".key")
	t.CA = filepath.Join(certs, "ca.crt")
	return t
}

// logTail is the end of each node's log, for a failure report.
func (x *xceCluster) logTail() string {
	var b strings.Builder
	for _, n := range x.c.Names {
		log, _ := os.ReadFile(filepath.Join(x.c.Dir, "logs", n+".log"))
		if len(log) > 3000 {
			log = log[len(log)-3000:]
		}
		fmt.Fprintf(&b, "---- %s ----\n%s", n, log)
	}
	return b.String()
}

// stop ends the nodes (SIGTERM, SIGKILL after 5 s) and removes the dir.
func (x *xceCluster) stop() {
	if x.c != nil {
		x.c.Stop()
	}
	if err := os.RemoveAll(x.dir); err != nil {
		fmt.Fprintf(os.Stderr, "bench-peers: remove %s: %v\n", x.dir, err)
	}
}

// freePorts are n loopback ports free now, all held at once so they differ.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
