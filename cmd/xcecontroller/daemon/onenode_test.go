package daemon_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/cmd/xcecontroller/daemon"
)

// startOneNode runs a one-node cluster in this process (daemon.Run) whose
// config has the one queue named queue and a host "node001", stopped at
// the end of the test; it returns the node's peer entry and the admin's
// certificate. The node may not serve yet when it returns.
func startOneNode(tb testing.TB, queue string) (client.Peer, *tlsconf.Material) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := tb.TempDir()
	c := clitool.NewClusterPorts(dir, "", []int{port})
	yaml := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(yaml, []byte("cluster_name: t\nport: 7600\nqueues:\n  - id: 1\n    name: "+queue+"\n    visibility_timeout_s: 300\n"+
		"    max_attempts: 3\n    backoff_base_s: 10\n    dead_letter_retention_s: 604800\n"+
		"hosts:\n  - name: node001\n    address: 10.0.0.1\n    resource_ids: [1]\nresources:\n  - id: 1\n    name: a100\n    count: 4\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := c.Prepare(yaml, 0); err != nil {
		tb.Fatal(err)
	}
	cfg := daemon.DefaultConfig()
	cfg.Peers, cfg.Name, cfg.Workdir = c.PeersFlag(), c.Names[0], filepath.Dir(c.NodeDir(0))
	certs := filepath.Join(dir, "certs")
	cfg.Cert, cfg.Key, cfg.CA = filepath.Join(certs, c.Names[0]+".crt"), filepath.Join(certs, c.Names[0]+".key"), filepath.Join(certs, "ca.crt")
	cfg.LogLevel = "warn"
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() { exited <- daemon.Run(ctx, cfg, io.Discard) }()
	tb.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			tb.Errorf("the node exited with code %d", code)
		}
	})
	mat, err := c.Admin()
	if err != nil {
		tb.Fatal(err)
	}
	return client.Peer{Name: c.Names[0], Addr: fmt.Sprintf("127.0.0.1:%d", port)}, mat
}
