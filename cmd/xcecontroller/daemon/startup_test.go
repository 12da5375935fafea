package daemon_test

import (
	"context"
	"crypto/sha256"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/cmd/xcecontroller/daemon"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/confyaml"
	"github.com/xce-hpc/xce/sm"
)

// startupNode is a one-node cluster n0 in a temp dir: dev certificates
// and the sample config installed, and the daemon's Config for it.
type startupNode struct {
	certs, base string
	cfg         daemon.Config
}

func newStartupNode(t *testing.T) *startupNode {
	t.Helper()
	dir := t.TempDir()
	n := &startupNode{certs: filepath.Join(dir, "certs"), base: filepath.Join(dir, "work", "n0")}
	if err := configtool.DevCerts(n.certs, []string{"n0"}, []string{"127.0.0.1"}, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	blob, err := configtool.EncodeFile("../../../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := configtool.Install(n.base, "n0", 2, blob); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	n.cfg = daemon.DefaultConfig()
	n.cfg.Peers, n.cfg.Name, n.cfg.Workdir = "n0="+addr, "n0", filepath.Join(dir, "work")
	n.cfg.Cert, n.cfg.Key, n.cfg.CA = filepath.Join(n.certs, "n0.crt"), filepath.Join(n.certs, "n0.key"), filepath.Join(n.certs, "ca.crt")
	n.cfg.ElectionTimeout, n.cfg.PriorityStep, n.cfg.Jitter = 100*time.Millisecond, 0, 10*time.Millisecond
	return n
}

// writeNodeCert replaces n0's certificate with one of the given usages.
func (n *startupNode) writeNodeCert(t *testing.T, client, server bool) {
	t.Helper()
	caCert, err := os.ReadFile(filepath.Join(n.certs, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := os.ReadFile(filepath.Join(n.certs, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := tlsconf.GenerateCert(caCert, caKey, "n0", []string{"127.0.0.1"}, time.Hour, client, server)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlsconf.WriteFiles(n.certs, "n0", c, k); err != nil {
		t.Fatal(err)
	}
}

// mustFail runs the node and wants it to exit 1 by itself, its log
// saying each of wants.
func (n *startupNode) mustFail(t *testing.T, wants ...string) {
	t.Helper()
	var logs syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := daemon.Run(ctx, n.cfg, &logs)
	if ctx.Err() != nil {
		t.Fatalf("the node ran until the test's timeout; log:\n%s", logs.String())
	}
	for _, want := range wants {
		if code != 1 || !strings.Contains(logs.String(), want) {
			t.Fatalf("exit %d, want 1 with a log saying %q; log:\n%s", code, want, logs.String())
		}
	}
}

// A node certificate without serverAuth, or without clientAuth, is a
// FATAL at startup that names its usages (issue 20 finding 7): the
// handshakes it would fail come later, with peers and clients.
func TestStartupRefusesNodeCertWithoutBothUsages(t *testing.T) {
	for _, c := range []struct {
		name           string
		client, server bool
		want           string
	}{
		{"client only", true, false, `own certificate "n0" has extended key usages [clientAuth]; a node's certificate needs both serverAuth and clientAuth`},
		{"server only", false, true, `own certificate "n0" has extended key usages [serverAuth]; a node's certificate needs both serverAuth and clientAuth`},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newStartupNode(t)
			n.writeNodeCert(t, c.client, c.server)
			n.mustFail(t, "fatal.startup", c.want)
		})
	}
}

// writeConf makes conf/ hold blob as its current config, by hand (the
// install refuses what these tests need on disk).
func (n *startupNode) writeConf(t *testing.T, blob []byte) string {
	t.Helper()
	conf := filepath.Join(n.base, sm.ConfDir)
	name := sm.VersionName(sha256.Sum256(blob))
	if err := os.WriteFile(filepath.Join(conf, name), blob, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "current"), sm.PointerContents(name), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// A saved config with a queue, host or resource name the name rule
// refuses is not loaded: the primary candidate FATALs naming the field
// and the byte (issue 20 finding 6).
func TestStartupRefusesConfigWithBadName(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(c *schema.ClusterConfig)
		want string
	}{
		{"NUL in a queue name", func(c *schema.ClusterConfig) { c.Queues[0].Name = "ba\x00tch" }, `queues[0]: name "ba\x00tch": byte 0x00 at offset 2 is not allowed`},
		{"ESC in a host name", func(c *schema.ClusterConfig) { c.Hosts[1].Name = "\x1b[31mnode" }, `hosts[1]: name "\x1b[31mnode": byte 0x1b at offset 0`},
		{"slash in a resource name", func(c *schema.ClusterConfig) { c.Resources[0].Name = "a100/80g" }, `resources[0]: name "a100/80g": byte 0x2f '/' at offset 4`},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newStartupNode(t)
			data, err := os.ReadFile("../../../examples/cluster.yaml")
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := confyaml.Parse("cluster.yaml", data)
			if err != nil {
				t.Fatal(err)
			}
			c.mod(cfg)
			blob, err := schema.Encode(cfg)
			if err != nil {
				t.Fatal(err)
			}
			n.writeConf(t, blob)
			n.mustFail(t, "cannot use its config: Config file 'cluster.bin.", c.want)
		})
	}
}

// A symbolic link as conf/current is refused at boot, even one to a file
// that names the right config (issue 20 finding 9): the controller writes
// the pointer only by rename, so a link is a hand edit.
func TestStartupRefusesSymlinkedPointer(t *testing.T) {
	n := newStartupNode(t)
	conf := filepath.Join(n.base, sm.ConfDir)
	ptr := filepath.Join(conf, "current")
	data, err := os.ReadFile(ptr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "pointer.copy"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(ptr); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("pointer.copy", ptr); err != nil {
		t.Fatal(err)
	}
	n.mustFail(t, "conf.pointer-unreadable", `conf/current: is a symbolic link (the controller reads only the files it wrote, never through a link)`, "fatal.primary-no-config")
}
