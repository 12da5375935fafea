package daemon_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/cmd/xcecontroller/daemon"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A running node rotates its certificate and changes its log level on
// SIGHUP, without a restart: status reports the new certificate's expiry,
// and the level file's level applies.
func TestSIGHUPReloads(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if err := configtool.DevCerts(certs, []string{"n0"}, []string{"127.0.0.1"}, 400*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	caCert, err := os.ReadFile(filepath.Join(certs, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := os.ReadFile(filepath.Join(certs, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	writeNode := func(validFor time.Duration) {
		t.Helper()
		c, k, err := tlsconf.GenerateCert(caCert, caKey, "n0", []string{"127.0.0.1"}, validFor, true, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := tlsconf.WriteFiles(certs, "n0", c, k); err != nil {
			t.Fatal(err)
		}
	}
	writeNode(20 * 24 * time.Hour) // expires soon: the node starts with a WARN
	blob, err := configtool.EncodeFile("../../../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := configtool.Install(filepath.Join(work, "n0"), "n0", 2, blob); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	levelFile := filepath.Join(dir, "level")
	if err := os.WriteFile(levelFile, []byte("info\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := daemon.DefaultConfig()
	cfg.Peers, cfg.Name, cfg.Workdir = "n0="+addr, "n0", work
	cfg.Cert, cfg.Key, cfg.CA = filepath.Join(certs, "n0.crt"), filepath.Join(certs, "n0.key"), filepath.Join(certs, "ca.crt")
	cfg.LogLevelFile = levelFile
	var logs syncBuf
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- daemon.Run(ctx, cfg, &logs) }()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit code %d\n%s", code, logs.String())
		}
	}()

	admin, err := tlsconf.Load(filepath.Join(certs, "admin.crt"), filepath.Join(certs, "admin.key"), cfg.CA)
	if err != nil {
		t.Fatal(err)
	}
	notAfter := func() int64 {
		c, err := client.NewFromFlag(cfg.Peers, admin, client.Options{Timeout: time.Second}) // a new connection each time
		if err != nil {
			return 0
		}
		defer c.Close()
		st, err := c.ClusterStatus(ctx, 0)
		if err != nil {
			return 0
		}
		return st.GetCertNotAfter()
	}
	old, err := tlsconf.Load(cfg.Cert, cfg.Key, cfg.CA)
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s never happened; log:\n%s", what, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("status with the first certificate", func() bool { return notAfter() == old.Leaf.NotAfter.Unix() })

	// Rotate: a certificate valid for a year, from the same CA.
	writeNode(365 * 24 * time.Hour)
	if err := os.WriteFile(levelFile, []byte("debug\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh, err := tlsconf.Load(cfg.Cert, cfg.Key, cfg.CA)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("status with the rotated certificate", func() bool { return notAfter() == fresh.Leaf.NotAfter.Unix() })
	waitFor("the level change", func() bool { return strings.Contains(logs.String(), "SIGHUP: log level debug (was info)") })
	// A connection that never completes a handshake is a DEBUG line.
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
	}
	waitFor("a debug line", func() bool { return strings.Contains(logs.String(), "DEBUG") })
	if !strings.Contains(logs.String(), "tls.reloaded") {
		t.Fatalf("no tls.reloaded log:\n%s", logs.String())
	}
}
