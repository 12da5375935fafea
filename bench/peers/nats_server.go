package main

// The NATS sides' processes: nats-server built from the module this
// bench requires (go.mod's tool line pins it), 1 or 3 servers with
// JetStream on free loopback ports, each with a config generated per run
// in a temp dir: store_dir in that dir and `sync_interval: always`, so
// every write to a stream or to the Raft log behind it is fsynced before
// the server acknowledges it; for 3, cluster routes to one another on
// loopback. Stopped (SIGTERM, then SIGKILL) and removed at the end.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const natsServerModule = "github.com/nats-io/nats-server/v2"

// natsNode is one server's place in a run.
type natsNode struct {
	Name        string
	Port        int    // clients
	ClusterPort int    // routes (0: no cluster)
	StoreDir    string // JetStream's files
	LogFile     string
}

// natsConfig is node's configuration file; routes are the cluster ports
// of every server of the cluster (its own included, which nats-server
// skips), none for a lone server.
func natsConfig(node natsNode, cluster string, routes []int) (string, error) {
	switch {
	case node.Name == "" || strings.ContainsAny(node.Name, " \t\n\"'{}"):
		return "", fmt.Errorf("server name %q: empty or not a bare word", node.Name)
	case node.Port < 1 || node.Port > 65535:
		return "", fmt.Errorf("server %s: client port %d outside 1..65535", node.Name, node.Port)
	case !filepath.IsAbs(node.StoreDir) || !filepath.IsAbs(node.LogFile):
		return "", fmt.Errorf("server %s: store dir %q and log file %q must be absolute", node.Name, node.StoreDir, node.LogFile)
	case strings.ContainsAny(node.StoreDir+node.LogFile, "\"\n"):
		return "", fmt.Errorf("server %s: store dir %q or log file %q holds a quote or newline", node.Name, node.StoreDir, node.LogFile)
	case len(routes) > 0 && (node.ClusterPort < 1 || node.ClusterPort > 65535):
		return "", fmt.Errorf("server %s: cluster port %d outside 1..65535", node.Name, node.ClusterPort)
	case len(routes) > 0 && (cluster == "" || strings.ContainsAny(cluster, " \t\n\"'{}")):
		return "", fmt.Errorf("cluster name %q: empty or not a bare word", cluster)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "server_name: %s\nlisten: 127.0.0.1:%d\nlog_file: %q\n", node.Name, node.Port, node.LogFile)
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", node.StoreDir)
	if len(routes) > 0 {
		fmt.Fprintf(&b, "cluster {\n  name: %s\n  listen: 127.0.0.1:%d\n  routes: [\n", cluster, node.ClusterPort)
		for _, p := range routes {
			if p < 1 || p > 65535 {
				return "", fmt.Errorf("route port %d outside 1..65535", p)
			}
			fmt.Fprintf(&b, "    nats-route://127.0.0.1:%d\n", p)
		}
		b.WriteString("  ]\n}\n")
	}
	return b.String(), nil
}

// buildNATS builds nats-server into binDir and returns the binary's path.
func buildNATS(ctx context.Context, binDir string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, "nats-server")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, natsServerModule)
	build.Dir = filepath.Join(root, "bench", "peers")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", natsServerModule, err, out)
	}
	return bin, nil
}

type natsServer struct {
	node   natsNode
	cmd    *exec.Cmd
	exited chan struct{}
}

type natsCluster struct {
	dir     string
	version string // nats-server --version
	servers []*natsServer
}

// startNATS starts n servers (1, or 3 in a cluster) of bin in a new
// directory under parent and waits until JetStream answers on each.
func startNATS(ctx context.Context, parent, bin string, n int) (_ *natsCluster, err error) {
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("nats%d-", n))
	if err != nil {
		return nil, err
	}
	nc := &natsCluster{dir: dir}
	defer func() {
		if err != nil {
			nc.stop()
		}
	}()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w\n%s", bin, err, out)
	}
	nc.version = strings.TrimSpace(string(out))
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var routes []int
	if n > 1 {
		routes = ports[n:]
	}
	for i := range n {
		node := natsNode{
			Name:     fmt.Sprintf("n%d", i),
			Port:     ports[i],
			StoreDir: filepath.Join(dir, fmt.Sprintf("n%d", i), "jetstream"),
			LogFile:  filepath.Join(dir, fmt.Sprintf("n%d.log", i)),
		}
		if n > 1 {
			node.ClusterPort = routes[i]
		}
		conf, err := natsConfig(node, "bench-peers", routes)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, node.Name+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "-c", path)
		// Its own process group, and killed if this process dies first.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start nats-server %s: %w", node.Name, err)
		}
		s := &natsServer{node: node, cmd: cmd, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(s.exited) }()
		nc.servers = append(nc.servers, s)
	}
	for _, s := range nc.servers {
		if err := s.waitJetStream(ctx, 60*time.Second); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, nc.logTail())
		}
	}
	return nc, nil
}

func (s *natsServer) url() string { return "nats://127.0.0.1:" + strconv.Itoa(s.node.Port) }

// waitJetStream polls until the server answers a JetStream account
// request (in a cluster: once a meta leader is elected).
func (s *natsServer) waitJetStream(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("nats-server %s exited at start", s.node.Name)
		default:
		}
		if c, err := nats.Connect(s.url(), nats.Timeout(time.Second)); err != nil {
			last = err
		} else {
			js, err := jetstream.New(c)
			if err == nil {
				actx, cancel := context.WithTimeout(ctx, time.Second)
				_, err = js.AccountInfo(actx)
				cancel()
			}
			c.Close()
			if err == nil {
				return nil
			}
			last = err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats-server %s: JetStream not ready within %v (last: %w)", s.node.Name, limit, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// server is the server named name, or nil.
func (nc *natsCluster) server(name string) *natsServer {
	for _, s := range nc.servers {
		if s.node.Name == name {
			return s
		}
	}
	return nil
}

// logTail is the end of each server's log, for a failure report.
func (nc *natsCluster) logTail() string {
	var b strings.Builder
	for _, s := range nc.servers {
		log, _ := os.ReadFile(s.node.LogFile)
		if len(log) > 3000 {
			log = log[len(log)-3000:]
		}
		fmt.Fprintf(&b, "---- nats-server %s ----\n%s", s.node.Name, log)
	}
	return b.String()
}

// stop ends the servers (SIGTERM, SIGKILL after 10 s) and removes the dir.
func (nc *natsCluster) stop() {
	for _, s := range nc.servers {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, s := range nc.servers {
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	if err := os.RemoveAll(nc.dir); err != nil {
		fmt.Fprintf(os.Stderr, "bench-peers: remove %s: %v\n", nc.dir, err)
	}
}
