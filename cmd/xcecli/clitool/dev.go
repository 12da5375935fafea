package clitool

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func devCmd(ctx context.Context) *cobra.Command {
	var dir, bin, config string
	var nodes, port int
	var quiet bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "run a local cluster on loopback: dev certificates, config on n0 only, supervised nodes (Ctrl-C stops)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bin == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				bin = filepath.Dir(exe)
			}
			return RunDev(ctx, cmd.OutOrStdout(), dir, bin, config, nodes, port, quiet)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", ".dev", "directory for certificates, work dirs and logs")
	f.StringVar(&bin, "bin", "", "directory holding xcecontroller (default: next to xcecli)")
	f.StringVar(&config, "config", "examples/cluster.yaml", "cluster config installed on n0")
	f.IntVar(&nodes, "nodes", 3, "number of nodes")
	f.IntVar(&port, "base-port", 7601, "port of n0; n1 gets the next one, ...")
	f.BoolVar(&quiet, "quiet", false, "do not echo node logs")
	return cmd
}

// RunDev starts the dev cluster, shows the election and each node's
// conf/current, and supervises the nodes until ctx ends.
func RunDev(ctx context.Context, out io.Writer, dir, bin, config string, nodes, port int, quiet bool) error {
	c := NewCluster(dir, bin, nodes, port)
	if !quiet {
		c.Out = out
	}
	mports, err := freeLoopbackPorts(nodes)
	if err != nil {
		return err
	}
	c.MetricsPorts = mports
	fmt.Fprintf(out, "== xce dev cluster: %d nodes on 127.0.0.1:%d.., config %s installed on n0 only, files under %s\n", nodes, port, config, dir)
	if err := c.Prepare(config, 0); err != nil {
		return err
	}
	for i := range c.Names {
		if err := c.Start(i); err != nil {
			c.Stop()
			return err
		}
	}
	defer c.Stop()
	start := time.Now()
	rows, p, err := c.WaitConverged(ctx, -1, 30*time.Second)
	if err != nil {
		_ = printStatus(out, rows, "table")
		return err
	}
	fmt.Fprintf(out, "\n== election done in %v: primary %s; every standby holds its config\n", time.Since(start).Round(time.Millisecond), rows[p].Name)
	_ = printStatus(out, rows, "table")
	fmt.Fprintln(out, "\n== conf/current on every node")
	for i, n := range c.Names {
		ptr, err := os.ReadFile(filepath.Join(c.NodeDir(i), "conf", "current"))
		if err != nil {
			fmt.Fprintf(out, "%s: %v\n", n, err)
			continue
		}
		fmt.Fprintf(out, "%s: %s", n, ptr)
	}
	fmt.Fprintln(out, "\n== metrics and health (plain HTTP: /metrics, /healthz, /readyz)")
	for i, n := range c.Names {
		fmt.Fprintf(out, "%s: http://%s/metrics\n", n, c.MetricsAddr(i))
	}
	fmt.Fprintln(out, "\n== node processes (kill one to watch failover; the supervisor restarts it after 1 s)")
	for i, n := range c.Names {
		role := "standby"
		if i == p {
			role = "primary"
		}
		fmt.Fprintf(out, "%s: pid %d (%s)   kill -9 %d\n", n, c.PID(i), role, c.PID(i))
	}
	fmt.Fprintf(out, "\n== talk to it:\n   %s status %s\n", shownPath(filepath.Join(bin, "xcecli")), c.ClientFlags())
	fmt.Fprintf(out, "   or the API with curl (any node; docs/client-api.md):\n")
	for _, l := range c.CurlCommands(len(c.Names) - 1) {
		fmt.Fprintf(out, "   %s\n", l)
	}
	fmt.Fprintf(out, "   (Ctrl-C stops the cluster)\n\n")
	return c.supervise(ctx, out)
}

// supervise restarts any node that exits, like systemd Restart=always.
func (c *Cluster) supervise(ctx context.Context, out io.Writer) error {
	cases := make(chan int, len(c.Names))
	watch := func(i int) {
		go func() {
			select {
			case code := <-c.Exited(i):
				fmt.Fprintf(out, "== %s exited with code %d\n", c.Names[i], code)
				cases <- i
			case <-ctx.Done():
			}
		}()
	}
	for i := range c.Names {
		watch(i)
	}
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(out, "\n== stopping the cluster")
			return nil
		case i := <-cases:
			select {
			case <-time.After(time.Second): // RestartSec
			case <-ctx.Done():
				return nil
			}
			fmt.Fprintf(out, "== restarting %s\n", c.Names[i])
			if err := c.Start(i); err != nil {
				return err
			}
			fmt.Fprintf(out, "== %s: pid %d\n", c.Names[i], c.PID(i))
			watch(i)
		}
	}
}

// freeLoopbackPorts picks n ports on 127.0.0.1 that are free now (the
// kernel's choice, all held at once so they differ). A node keeps its port
// across restarts.
func freeLoopbackPorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a metrics port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// shownPath is path relative to the working directory when it lies below
// it (make run's .bin/xcecli, as the README shows it), else as given.
func shownPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(wd, path); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
		return r
	}
	return path
}
