package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestNATSConfig reads each generated config back with nats-server's own
// parser: the settings the comparison depends on (fsync on every write,
// the store dir, loopback, the routes) must be the ones it applies.
func TestNATSConfig(t *testing.T) {
	dir := t.TempDir()
	node := func(name string, port, cport int) natsNode {
		return natsNode{Name: name, Port: port, ClusterPort: cport,
			StoreDir: filepath.Join(dir, name, "jetstream"), LogFile: filepath.Join(dir, name+".log")}
	}
	for _, c := range []struct {
		name   string
		node   natsNode
		routes []int
	}{
		{"lone server", node("n0", 14222, 0), nil},
		{"cluster member", node("n1", 14223, 16223), []int{16222, 16223, 16224}},
		{"a store dir with spaces", natsNode{Name: "n2", Port: 14224, StoreDir: filepath.Join(dir, "a b", "js"), LogFile: filepath.Join(dir, "a b.log")}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			conf, err := natsConfig(c.node, "bench-peers", c.routes)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, c.node.Name+".conf")
			if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
				t.Fatal(err)
			}
			o, err := server.ProcessConfigFile(path)
			if err != nil {
				t.Fatalf("nats-server rejects the config: %v\n%s", err, conf)
			}
			if !o.JetStream || !o.SyncAlways || o.StoreDir != c.node.StoreDir {
				t.Errorf("jetstream %v, sync always %v, store dir %q; want true, true, %q", o.JetStream, o.SyncAlways, o.StoreDir, c.node.StoreDir)
			}
			if o.ServerName != c.node.Name || o.Host != "127.0.0.1" || o.Port != c.node.Port || o.LogFile != c.node.LogFile {
				t.Errorf("name %q, listen %s:%d, log %q", o.ServerName, o.Host, o.Port, o.LogFile)
			}
			if len(c.routes) == 0 {
				if o.Cluster.Port != 0 || len(o.Routes) != 0 {
					t.Errorf("a lone server got cluster port %d and %d routes", o.Cluster.Port, len(o.Routes))
				}
				return
			}
			if o.Cluster.Name != "bench-peers" || o.Cluster.Host != "127.0.0.1" || o.Cluster.Port != c.node.ClusterPort {
				t.Errorf("cluster %q on %s:%d", o.Cluster.Name, o.Cluster.Host, o.Cluster.Port)
			}
			if len(o.Routes) != len(c.routes) {
				t.Fatalf("%d routes, want %d", len(o.Routes), len(c.routes))
			}
			for i, u := range o.Routes {
				if u.Hostname() != "127.0.0.1" || u.Port() != strconv.Itoa(c.routes[i]) {
					t.Errorf("route %d: %s", i, u)
				}
			}
		})
	}
}

func TestNATSConfigRefusesBadInput(t *testing.T) {
	ok := natsNode{Name: "n0", Port: 4222, ClusterPort: 6222, StoreDir: "/tmp/js", LogFile: "/tmp/n0.log"}
	for _, c := range []struct {
		name    string
		mod     func(*natsNode)
		cluster string
		routes  []int
		wantErr string
	}{
		{"no name", func(n *natsNode) { n.Name = "" }, "", nil, "server name"},
		{"a name with a space", func(n *natsNode) { n.Name = "n 0" }, "", nil, "server name"},
		{"port 0", func(n *natsNode) { n.Port = 0 }, "", nil, "client port 0"},
		{"port too high", func(n *natsNode) { n.Port = 70000 }, "", nil, "client port 70000"},
		{"a relative store dir", func(n *natsNode) { n.StoreDir = "js" }, "", nil, "must be absolute"},
		{"a quote in the store dir", func(n *natsNode) { n.StoreDir = `/tmp/j"s` }, "", nil, "quote or newline"},
		{"no cluster port", func(n *natsNode) { n.ClusterPort = 0 }, "c", []int{6222}, "cluster port 0"},
		{"no cluster name", func(*natsNode) {}, "", []int{6222}, "cluster name"},
		{"a bad route", func(*natsNode) {}, "c", []int{6222, 0}, "route port 0"},
	} {
		n := ok
		c.mod(&n)
		_, err := natsConfig(n, c.cluster, c.routes)
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: error %v, want one saying %s", c.name, err, c.wantErr)
		}
	}
}
