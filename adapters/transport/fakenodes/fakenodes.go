// Package fakenodes serves stand-in controllers for client tests: real TLS
// transports on loopback serving the real API handler (package api), whose
// door answers from a function and records the requests. They do not
// forward: a "not primary" answer is the client's to follow. Used by the
// client, xcecli and xce-config tests.
package fakenodes

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/api"
	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/transport"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/sm"
)

// Node is one stand-in controller.
type Node struct {
	Name, Addr string

	mu     sync.Mutex
	answer func(*wire.Request) *wire.Reply
	seen   []*wire.Request
	posts  map[string]int // HTTP requests by procedure
}

// Posts is how many HTTP requests came for procedure (a path such as
// /xce.v1.Xce/Submit): a call's one each, a stream's one for all its
// messages.
func (f *Node) Posts(procedure string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.posts[procedure]
}

// Handle is the API handler's door.
func (f *Node) Handle(_ context.Context, _ api.Caller, req *wire.Request) *wire.Reply {
	f.mu.Lock()
	f.seen = append(f.seen, req)
	answer := f.answer
	f.mu.Unlock()
	return answer(req)
}

// Set replaces the answer function and forgets the requests seen.
func (f *Node) Set(answer func(*wire.Request) *wire.Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer, f.seen = answer, nil
}

// Requests returns the requests seen since the last Set but status
// requests: package client checks each new connection with one.
func (f *Node) Requests() []*wire.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*wire.Request
	for _, r := range f.seen {
		if r.Status == nil {
			out = append(out, r)
		}
	}
	return out
}

// Cluster is n0..n(k-1); CertDir holds ca.crt, nN.crt/key and
// admin.crt/key; Peers is the --peers string.
type Cluster struct {
	Nodes   []*Node
	Peers   string
	CertDir string
}

// Start serves every node whose up[i] is true; the others' addresses
// refuse connections. Every node answers "starting" until Set.
func Start(t testing.TB, up ...bool) *Cluster {
	t.Helper()
	return StartWithout(t, nil, up...)
}

// StartWithout is Start with the API's streaming procedures in without
// ("SubmitStream") neither served nor announced, as by a node of a
// version before them (api.Config.Without).
func StartWithout(t testing.TB, without []string, up ...bool) *Cluster {
	t.Helper()
	c := &Cluster{CertDir: t.TempDir()}
	names := make([]string, len(up))
	for i := range up {
		names[i] = fmt.Sprintf("n%d", i)
	}
	writeCerts(t, c.CertDir, names)
	tpeers := make([]transport.Peer, len(up))
	cpeers := make([]client.Peer, len(up))
	parts := make([]string, len(up))
	var lns []net.Listener
	for i, n := range names {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addr := ln.Addr().String()
		tpeers[i] = transport.Peer{Name: n, Addr: addr}
		cpeers[i] = client.Peer{Name: n, Addr: addr}
		parts[i] = n + "=" + addr
		c.Nodes = append(c.Nodes, &Node{Name: n, Addr: addr, answer: func(*wire.Request) *wire.Reply {
			return &wire.Reply{Status: sm.StatusEAGAIN, Error: "starting"}
		}})
	}
	for _, ln := range lns {
		ln.Close()
	}
	c.Peers = strings.Join(parts, ",")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var trs []*transport.Transport
	for i, n := range c.Nodes {
		if !up[i] {
			continue
		}
		mat, err := tlsconf.Load(filepath.Join(c.CertDir, n.Name+".crt"), filepath.Join(c.CertDir, n.Name+".key"), filepath.Join(c.CertDir, "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		_, api := api.Handler(api.Config{Door: n.Handle, Self: i, Peers: cpeers, Without: without})
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.mu.Lock()
			if n.posts == nil {
				n.posts = map[string]int{}
			}
			n.posts[r.URL.Path]++
			n.mu.Unlock()
			api.ServeHTTP(w, r)
		})
		tr, err := transport.New(transport.Config{Self: i, Peers: tpeers, TLS: mat, HTTP: h})
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, tr)
		wg.Go(func() { _ = tr.Listen(ctx) })
		waitListening(t, n)
	}
	t.Cleanup(func() {
		cancel()
		for _, tr := range trs {
			tr.Close()
		}
		wg.Wait()
	})
	return c
}

func waitListening(t testing.TB, n *Node) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		conn, err := net.Dial("tcp", n.Addr)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen: %v", n.Name, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeCerts writes a CA, one certificate per node and an admin one.
func writeCerts(t testing.TB, dir string, names []string) {
	t.Helper()
	caCert, caKey, err := tlsconf.GenerateCA("fakenodes CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlsconf.WriteFiles(dir, "ca", caCert, caKey); err != nil {
		t.Fatal(err)
	}
	for _, n := range append(names, "admin") {
		c, k, err := tlsconf.GenerateCert(caCert, caKey, n, []string{"127.0.0.1"}, time.Hour, true, n != "admin")
		if err != nil {
			t.Fatal(err)
		}
		if err := tlsconf.WriteFiles(dir, n, c, k); err != nil {
			t.Fatal(err)
		}
	}
}
