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

	"xce/adapters/configtool"
	"xce/adapters/tlsconf"
)

// Cluster is a local cluster of xcecontroller processes on loopback: the
// dev cluster of `make run` and the integration tests' harness.
type Cluster struct {
	Dir      string   // certs/, work/, logs live here
	Bin      string   // directory holding the xcecontroller binary
	Names    []string // n0, n1, ...
	BasePort int
	Out      io.Writer // prefixed node logs ("" = discard)
	Args     []string  // extra xcecontroller flags

	mu    sync.Mutex
	procs []*exec.Cmd
	exits []chan int
}

// NewCluster lays out n nodes named n0..n(n-1) on 127.0.0.1:basePort+i.
func NewCluster(dir, bin string, n, basePort int) *Cluster {
	c := &Cluster{Dir: dir, Bin: bin, BasePort: basePort, Out: io.Discard}
	for i := 0; i < n; i++ {
		c.Names = append(c.Names, fmt.Sprintf("n%d", i))
	}
	c.procs = make([]*exec.Cmd, n)
	c.exits = make([]chan int, n)
	return c
}

// PeersFlag is the --peers string every node gets.
func (c *Cluster) PeersFlag() string {
	parts := make([]string, len(c.Names))
	for i, n := range c.Names {
		parts[i] = fmt.Sprintf("%s=127.0.0.1:%d", n, c.BasePort+i)
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
func (c *Cluster) Admin() (*tlsconf.Material, error) {
	return tlsconf.Load(filepath.Join(c.certs(), "admin.crt"), filepath.Join(c.certs(), "admin.key"), filepath.Join(c.certs(), "ca.crt"))
}

// ClientFlags are the xcecli flags to talk to this cluster.
func (c *Cluster) ClientFlags() string {
	return fmt.Sprintf("--peers %s --cert %s --key %s --ca %s", c.PeersFlag(),
		filepath.Join(c.certs(), "admin.crt"), filepath.Join(c.certs(), "admin.key"), filepath.Join(c.certs(), "ca.crt"))
}

// Start launches node i; its exit code arrives on Exited(i).
func (c *Cluster) Start(i int) error {
	name := c.Names[i]
	args := append([]string{
		"--peers", c.PeersFlag(), "--name", name, "--workdir", c.workdir(),
		"--cert", filepath.Join(c.certs(), name+".crt"), "--key", filepath.Join(c.certs(), name+".key"),
		"--ca", filepath.Join(c.certs(), "ca.crt"),
	}, c.Args...)
	cmd := exec.Command(filepath.Join(c.Bin, "xcecontroller"), args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = cmd.Stderr
	if err := os.MkdirAll(filepath.Join(c.Dir, "logs"), 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(c.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	exit := make(chan int, 1)
	c.mu.Lock()
	c.procs[i], c.exits[i] = cmd, exit
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
		err := cmd.Wait()
		logf.Close()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		exit <- code
	}()
	return nil
}

// Exited delivers node i's exit code once its current process ends.
func (c *Cluster) Exited(i int) <-chan int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exits[i]
}

// Signal sends sig to node i's process (SIGKILL = kill -9).
func (c *Cluster) Signal(i int, sig syscall.Signal) error {
	c.mu.Lock()
	cmd := c.procs[i]
	c.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return fmt.Errorf("%s not started", c.Names[i])
	}
	return cmd.Process.Signal(sig)
}

// Stop sends SIGTERM to every running node and waits (SIGKILL after 5 s).
func (c *Cluster) Stop() {
	for i := range c.Names {
		c.mu.Lock()
		cmd, exit := c.procs[i], c.exits[i]
		c.mu.Unlock()
		if cmd == nil || cmd.Process == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case code := <-exit:
			exit <- code // keep it readable for Exited
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
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
