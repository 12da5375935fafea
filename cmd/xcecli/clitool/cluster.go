package clitool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
)

// Cluster is a local cluster of xcecontroller processes on loopback: the
// dev cluster of `make run` and the integration tests' harness.
type Cluster struct {
	Dir      string   // certs/, work/, logs live here
	Bin      string   // directory holding the xcecontroller binary
	Names    []string // n0, n1, ...
	BasePort int
	Ports    []int     // per-node ports; nil = BasePort+i
	Out      io.Writer // prefixed node logs ("" = discard)
	Args     []string  // extra xcecontroller flags
	// MetricsPorts, if set, gives node i --metrics-addr
	// 127.0.0.1:MetricsPorts[i] (MetricsAddr).
	MetricsPorts []int
	// AdminCN is every node's --admin-cn (default: the dev admin
	// certificate, configtool.AdminCN); empty: no admin, so
	// OP_upgradeConfig and the operator commands are refused.
	AdminCN []string
	// Env, if set, gives node i these environment variables (NAME=value)
	// besides this process's; NOTIFY_SOCKET is passed only so.
	Env map[int][]string

	mu    sync.Mutex
	procs []*proc
}

// proc is one started process of a node; done is closed once it has
// exited and its output has been copied, code is then its exit code.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	code int
}

// NewCluster lays out n nodes named n0..n(n-1) on 127.0.0.1:basePort+i.
func NewCluster(dir, bin string, n, basePort int) *Cluster {
	c := &Cluster{Dir: dir, Bin: bin, BasePort: basePort, Out: io.Discard, AdminCN: []string{configtool.AdminCN}}
	for i := 0; i < n; i++ {
		c.Names = append(c.Names, fmt.Sprintf("n%d", i))
	}
	c.procs = make([]*proc, n)
	return c
}

// NewClusterPorts lays out len(ports) nodes named n0.. with node i on
// 127.0.0.1:ports[i] (ports need not be consecutive).
func NewClusterPorts(dir, bin string, ports []int) *Cluster {
	c := NewCluster(dir, bin, len(ports), 0)
	c.Ports = append([]int(nil), ports...)
	return c
}

// Port is node i's port.
func (c *Cluster) Port(i int) int {
	if c.Ports != nil {
		return c.Ports[i]
	}
	return c.BasePort + i
}

// MetricsAddr is node i's --metrics-addr ("" without MetricsPorts).
func (c *Cluster) MetricsAddr(i int) string {
	if c.MetricsPorts == nil {
		return ""
	}
	return fmt.Sprintf("127.0.0.1:%d", c.MetricsPorts[i])
}

// PeersFlag is the --peers string every node gets.
func (c *Cluster) PeersFlag() string {
	parts := make([]string, len(c.Names))
	for i, n := range c.Names {
		parts[i] = fmt.Sprintf("%s=127.0.0.1:%d", n, c.Port(i))
	}
	return strings.Join(parts, ",")
}

func (c *Cluster) certs() string   { return filepath.Join(c.Dir, "certs") }
func (c *Cluster) workdir() string { return filepath.Join(c.Dir, "work") }

// NodeDir is ${workdir}/${name} of node i.
func (c *Cluster) NodeDir(i int) string { return filepath.Join(c.workdir(), c.Names[i]) }

// Prepare writes dev certificates (unless present) and installs the YAML
// config on the given nodes with xce-config's install code path.
func (c *Cluster) Prepare(configYAML string, installOn ...int) error {
	if _, err := os.Stat(filepath.Join(c.certs(), "ca.crt")); err != nil {
		if err := configtool.DevCerts(c.certs(), c.Names, []string{"127.0.0.1", "localhost"}, 365*24*time.Hour); err != nil {
			return err
		}
	}
	if len(installOn) == 0 {
		return nil
	}
	blob, err := configtool.EncodeFile(configYAML)
	if err != nil {
		return err
	}
	for _, i := range installOn {
		if err := configtool.Install(c.NodeDir(i), c.Names[i], 2, blob); err != nil {
			return fmt.Errorf("install on %s: %w", c.Names[i], err)
		}
	}
	return nil
}

// Admin loads the admin client certificate.
func (c *Cluster) Admin() (*tlsconf.Material, error) { return c.Cert(configtool.AdminCN) }

// Cert loads the dev certificate written for name: a node,
// configtool.AdminCN or configtool.WorkerCN.
func (c *Cluster) Cert(name string) (*tlsconf.Material, error) {
	return tlsconf.Load(filepath.Join(c.certs(), name+".crt"), filepath.Join(c.certs(), name+".key"), filepath.Join(c.certs(), "ca.crt"))
}

// ClientFlags are the xcecli flags to talk to this cluster.
func (c *Cluster) ClientFlags() string {
	return fmt.Sprintf("--peers %s --cert %s --key %s --ca %s", c.PeersFlag(),
		filepath.Join(c.certs(), "admin.crt"), filepath.Join(c.certs(), "admin.key"), filepath.Join(c.certs(), "ca.crt"))
}

// CurlCommands are the curl lines that submit a job to queue batch and
// list that queue through node i (any node: a standby forwards them to
// the primary), with the admin certificate, in Connect's JSON over HTTP
// (the payload is base64: "hello"). README.md shows them for `make run`.
func (c *Cluster) CurlCommands(i int) []string {
	tls := fmt.Sprintf("--cacert %s --cert %s --key %s", filepath.Join(c.certs(), "ca.crt"),
		filepath.Join(c.certs(), "admin.crt"), filepath.Join(c.certs(), "admin.key"))
	url := fmt.Sprintf("https://127.0.0.1:%d/xce.v1.Xce/", c.Port(i))
	return []string{
		fmt.Sprintf(`curl -sS %s -H 'Content-Type: application/json' -d '{"queue":"batch","payload":"aGVsbG8="}' %sSubmit`, tls, url),
		fmt.Sprintf(`curl -sS %s -H 'Content-Type: application/json' -d '{"queue":"batch"}' %sList`, tls, url),
	}
}

// Start launches node i; its exit code arrives on Exited(i). Starting a
// node whose previous process is still running is an error.
func (c *Cluster) Start(i int) error {
	name := c.Names[i]
	c.mu.Lock()
	prev := c.procs[i]
	c.mu.Unlock()
	if prev != nil {
		select {
		case <-prev.done:
		default:
			return fmt.Errorf("start %s: already running (pid %d)", name, prev.cmd.Process.Pid)
		}
	}
	args := append([]string{
		"--peers", c.PeersFlag(), "--name", name, "--workdir", c.workdir(),
		"--cert", filepath.Join(c.certs(), name+".crt"), "--key", filepath.Join(c.certs(), name+".key"),
		"--ca", filepath.Join(c.certs(), "ca.crt"),
	}, c.Args...)
	if c.MetricsPorts != nil {
		args = append(args, "--metrics-addr", c.MetricsAddr(i))
	}
	if len(c.AdminCN) > 0 {
		args = append(args, "--admin-cn", strings.Join(c.AdminCN, ","))
	}
	if err := os.MkdirAll(filepath.Join(c.Dir, "logs"), 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(c.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(c.Bin, "xcecontroller"), args...)
	// The nodes are not this process's systemd service: they must not
	// notify the service manager that may supervise us.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, c.Env[i]...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	c.mu.Lock()
	c.procs[i] = p
	c.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			c.mu.Lock()
			fmt.Fprintf(c.Out, "[%s] %s\n", name, line)
			c.mu.Unlock()
		}
		// A line over the scanner's limit stops it: keep draining, or
		// the node would block writing its log.
		_, _ = io.Copy(logf, stderr)
		err := cmd.Wait()
		logf.Close()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		p.code = code
		close(p.done)
	}()
	return nil
}

// Exited delivers the exit code of node i's current process once it ends
// (-1 if a signal killed it). Every call gets its own channel, so any
// number of readers, Stop included, see the exit. It never fires for a
// node that was not started.
func (c *Cluster) Exited(i int) <-chan int {
	c.mu.Lock()
	p := c.procs[i]
	c.mu.Unlock()
	ch := make(chan int, 1)
	if p != nil {
		go func() {
			<-p.done
			ch <- p.code
		}()
	}
	return ch
}

// PID is node i's current process id, 0 before it started.
func (c *Cluster) PID(i int) int {
	c.mu.Lock()
	p := c.procs[i]
	c.mu.Unlock()
	if p == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether node i's current process has not yet exited.
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	p := c.procs[i]
	c.mu.Unlock()
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Signal sends sig to node i's process (SIGKILL = kill -9).
func (c *Cluster) Signal(i int, sig syscall.Signal) error {
	c.mu.Lock()
	p := c.procs[i]
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%s not started", c.Names[i])
	}
	return p.cmd.Process.Signal(sig)
}

// Stop sends SIGTERM to every running node and waits for each to exit
// (SIGKILL after 5 s). Nodes that already exited are skipped.
func (c *Cluster) Stop() {
	c.mu.Lock()
	procs := append([]*proc(nil), c.procs...)
	c.mu.Unlock()
	for _, p := range procs {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// Converged reports the primary's index if exactly one up node is primary
// and every other listed node is an up, serving standby on its config.
func Converged(rows []PeerStatus, skip int) (int, bool) {
	p := -1
	for i, r := range rows {
		if i == skip {
			continue
		}
		if !r.Up {
			return -1, false
		}
		if r.Role == "primary" {
			if p >= 0 {
				return -1, false
			}
			p = i
		}
	}
	if p < 0 {
		return -1, false
	}
	for i, r := range rows {
		if i == skip || i == p {
			continue
		}
		if r.Role != "standby" || !r.Serving || r.Primary != rows[p].Name || r.ConfigTag != rows[p].ConfigTag {
			return -1, false
		}
	}
	return p, true
}

// WaitConverged polls status until Converged (ignoring node skip, -1 for
// none) or the timeout; it returns the last rows seen.
func (c *Cluster) WaitConverged(ctx context.Context, skip int, timeout time.Duration) ([]PeerStatus, int, error) {
	mat, err := c.Admin()
	if err != nil {
		return nil, -1, err
	}
	deadline := time.Now().Add(timeout)
	var rows []PeerStatus
	for {
		rows, err = Statuses(ctx, c.PeersFlag(), mat, 300*time.Millisecond)
		if err != nil {
			return nil, -1, err
		}
		if p, ok := Converged(rows, skip); ok {
			return rows, p, nil
		}
		if time.Now().After(deadline) {
			return rows, -1, fmt.Errorf("cluster did not converge within %v", timeout)
		}
		select {
		case <-ctx.Done():
			return rows, -1, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
