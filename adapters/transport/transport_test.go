package transport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// ---- fixtures ----

type pki struct {
	caCert, caKey []byte
	mats          map[string]*tlsconf.Material
}

var (
	pkiOnce  sync.Once
	testPKI  *pki
	evilPKI  *pki
	pkiError error
)

// certs returns the cluster PKI (n0, n1, n2, n9 for client and server use;
// operator for client use only) and a foreign one (n1 and n0 issued by
// another CA, trusting the cluster CA).
func certs(t testing.TB) (cluster, evil *pki) {
	t.Helper()
	pkiOnce.Do(func() {
		testPKI, pkiError = newPKI("cluster CA", nil, "n0", "n1", "n2", "n9", "operator", "n1-client")
		if pkiError == nil {
			evilPKI, pkiError = newPKI("evil CA", testPKI.caCert, "n0", "n1", "operator")
		}
	})
	if pkiError != nil {
		t.Fatal(pkiError)
	}
	return testPKI, evilPKI
}

func newPKI(caName string, trust []byte, names ...string) (*pki, error) {
	caCert, caKey, err := tlsconf.GenerateCA(caName, time.Hour)
	if err != nil {
		return nil, err
	}
	p := &pki{caCert: caCert, caKey: caKey, mats: map[string]*tlsconf.Material{}}
	for _, n := range names {
		// "operator" and "<name>-client" are client certificates
		// (clientAuth only), the latter with a node's CN.
		cn, isClient := strings.CutSuffix(n, "-client")
		server := n != "operator" && !isClient
		c, k, err := tlsconf.GenerateCert(caCert, caKey, cn, []string{"127.0.0.1"}, time.Hour, true, server)
		if err != nil {
			return nil, err
		}
		if trust == nil {
			if p.mats[n], err = tlsconf.FromPEM(c, k, caCert); err != nil {
				return nil, err
			}
			continue
		}
		// Foreign: FromPEM would refuse a cert not signed by the trusted CA.
		cert, err := tls.X509KeyPair(c, k)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(trust)
		p.mats[n] = &tlsconf.Material{Cert: cert, Leaf: cert.Leaf, CAs: pool}
	}
	return p, nil
}

// freeAddrs returns n loopback addresses with ports free a moment ago.
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var lns []net.Listener
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

func peersOf(addrs []string) []Peer {
	ps := make([]Peer, len(addrs))
	for i, a := range addrs {
		ps[i] = Peer{Name: fmt.Sprintf("n%d", i), Addr: a}
	}
	return ps
}

type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBuf) find(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func (l *logBuf) wait(t *testing.T, sub string) {
	t.Helper()
	if !eventually(2*time.Second, func() bool { return l.find(sub) }) {
		t.Fatalf("log never said %q; log:\n%s", sub, l)
	}
}

func eventually(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

type node struct {
	tr     *Transport
	log    *logBuf
	cancel context.CancelFunc
	done   chan error
}

// start makes the transport of peer self (with material mat) and starts
// its listener; everything is closed at the end of the test.
func start(t testing.TB, self int, peers []Peer, mat *tlsconf.Material, mod func(*Config)) *node {
	t.Helper()
	n := &node{log: &logBuf{}}
	cfg := Config{Self: self, Peers: peers, TLS: mat, Logf: n.log.logf}
	if mod != nil {
		mod(&cfg)
	}
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.tr = tr
	n.listen()
	t.Cleanup(func() {
		tr.Close()
		n.stopListen(t, true)
	})
	return n
}

func (n *node) listen() {
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan error, 1)
	go func() { n.done <- n.tr.Listen(ctx) }()
}

func (n *node) stop(t testing.TB) { n.stopListen(t, false) }

// stopListen ends the listener and waits for Listen to return. closed:
// the transport was closed first (the test's cleanup), so Listen may
// also have returned ErrClosed: its goroutine called it only after the
// Close (a node started last in a test).
func (n *node) stopListen(t testing.TB, closed bool) {
	t.Helper()
	n.cancel()
	select {
	case err := <-n.done:
		if err != nil && !(closed && errors.Is(err, ErrClosed)) {
			t.Errorf("Listen: %v", err)
		}
		n.done <- nil // later stops return at once
	case <-time.After(3 * time.Second):
		t.Fatal("Listen did not return")
	}
}

// sendUntil sends m from a to b's index every 20ms until b receives it
// (same type and ReqID; anything else, like a late copy of an earlier
// sendUntil, is skipped), and returns it.
func sendUntil(t *testing.T, a *Transport, to int, m sm.Msg, b *Transport) Inbound {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(5 * time.Second)
	a.Send(to, m)
	for {
		select {
		case in := <-b.Inbound():
			if in.Msg.Type == m.Type && in.Msg.ReqID == m.ReqID {
				return in
			}
		case <-tick.C:
			a.Send(to, m)
		case <-timeout:
			t.Fatalf("message %v never arrived", m.Type)
		}
	}
}

func recv(t *testing.T, tr *Transport) Inbound {
	t.Helper()
	select {
	case in := <-tr.Inbound():
		return in
	case <-time.After(3 * time.Second):
		t.Fatal("nothing delivered")
		return Inbound{}
	}
}

func expectNothing(t *testing.T, tr *Transport, d time.Duration) {
	t.Helper()
	select {
	case in := <-tr.Inbound():
		t.Fatalf("delivered %+v", in)
	case <-time.After(d):
	}
}

// rawDial connects to addr with mat, retrying until the listener is up,
// and sends hello (nil: none).
func rawDial(t testing.TB, addr string, mat *tlsconf.Material, hello *schema.Hello) *tls.Conn {
	t.Helper()
	return rawDialALPN(t, addr, mat, "", hello)
}

// rawDialALPN is rawDial asking for the protocol alpn ("": none).
func rawDialALPN(t testing.TB, addr string, mat *tlsconf.Material, alpn string, hello *schema.Hello) *tls.Conn {
	t.Helper()
	var tc *tls.Conn
	ok := eventually(3*time.Second, func() bool {
		raw, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		_ = raw.SetDeadline(time.Now().Add(3 * time.Second))
		cfg := mat.ClientConfig()
		if alpn != "" {
			cfg.NextProtos = []string{alpn}
		}
		tc = tls.Client(raw, cfg)
		if err := tc.Handshake(); err != nil {
			raw.Close()
			return false
		}
		return true
	})
	if !ok {
		t.Fatalf("cannot connect to %s", addr)
	}
	t.Cleanup(func() { tc.Close() })
	if hello != nil {
		if err := wire.WriteHello(tc, hello); err != nil {
			t.Fatal(err)
		}
	}
	return tc
}

// expectClosed waits for the server to close c.
func expectClosed(t *testing.T, c *tls.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open (read %d bytes)", n)
	}
}

func payloadMsg() sm.Msg {
	blob := bytes.Repeat([]byte("config "), 20000)
	sum := sha256.Sum256(blob)
	return sm.Msg{Type: sm.MsgReplConfigReply, ReqID: 42, Role: sm.RolePrimary, Term: 3, Priority: 1,
		ConfigTag: sm.TagOf(blob), SHA256: sum[:], Bytes: blob}
}

// ---- tests ----

func TestNewRefusesBadConfig(t *testing.T) {
	pk, _ := certs(t)
	addrs := freeAddrs(t, 2)
	good := func() Config { return Config{Self: 0, Peers: peersOf(addrs), TLS: pk.mats["n0"]} }
	tests := []struct {
		name string
		mod  func(c *Config)
	}{
		{"no peers", func(c *Config) { c.Peers = nil }},
		{"self out of range", func(c *Config) { c.Self = 2 }},
		{"negative self", func(c *Config) { c.Self = -1 }},
		{"no TLS", func(c *Config) { c.TLS = nil }},
		{"empty name", func(c *Config) { c.Peers[1].Name = "" }},
		{"empty address", func(c *Config) { c.Peers[1].Addr = "" }},
		{"duplicate name", func(c *Config) { c.Peers[1].Name = "n0" }},
		{"cert for another name", func(c *Config) { c.TLS = pk.mats["n1"] }},
		{"client-only cert (no serverAuth)", func(c *Config) { c.TLS = pk.mats["n1-client"]; c.Self = 1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.mod(&c)
			if tr, err := New(c); err == nil {
				tr.Close()
				t.Fatal("accepted")
			}
		})
	}
	tr, err := New(good())
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
}

func TestExchangeBothWays(t *testing.T) {
	pk, _ := certs(t)
	peers := peersOf(freeAddrs(t, 3))
	a := start(t, 0, peers, pk.mats["n0"], nil)
	b := start(t, 1, peers, pk.mats["n1"], nil)

	hb := sm.Msg{Type: sm.MsgHeartbeat, Role: sm.RolePrimary, Term: 5, WALPos: 9, ConfigTag: 7}
	in := sendUntil(t, a.tr, 1, hb, b.tr)
	if in.From != 0 || !reflect.DeepEqual(in.Msg, hb) {
		t.Fatalf("b got %+v, want from 0 %+v", in, hb)
	}
	big := payloadMsg()
	in = sendUntil(t, b.tr, 0, big, a.tr)
	if in.From != 1 || !reflect.DeepEqual(in.Msg, big) {
		t.Fatalf("a got from %d type %v", in.From, in.Msg.Type)
	}

	// Once connected, a burst arrives complete and in order.
	for i := range 50 {
		a.tr.Send(1, sm.Msg{Type: sm.MsgProbe, ReqID: uint64(1000 + i)})
	}
	next := uint64(1000)
	for next < 1050 {
		select {
		case in := <-b.tr.Inbound():
			if in.Msg.Type != sm.MsgHeartbeat { // retries of hb may trail
				if in.Msg.ReqID != next || in.From != 0 {
					t.Fatalf("got %+v, want ReqID %d", in, next)
				}
				next++
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("burst stopped at %d", next)
		}
	}
	// Peer 2 is down: sends to it are dropped without blocking anyone.
	a.tr.Send(2, hb)
	a.tr.Send(0, hb)  // to ourselves: dropped
	a.tr.Send(7, hb)  // unknown: dropped
	a.tr.Send(-1, hb) // unknown: dropped
	a.log.wait(t, "to n2 (")
}

func TestForeignCertificateRefused(t *testing.T) {
	pk, evil := certs(t)
	peers := peersOf(freeAddrs(t, 3))
	a := start(t, 0, peers, pk.mats["n0"], nil)
	// mallory claims to be n1 with a certificate from another CA (and
	// trusts the cluster CA, so the refusal is a's).
	mallory := start(t, 1, peers, evil.mats["n1"], nil)
	for range 10 {
		mallory.tr.Send(0, sm.Msg{Type: sm.MsgHeartbeat, Role: sm.RolePrimary, Term: 99})
		time.Sleep(20 * time.Millisecond)
	}
	a.log.wait(t, `tls handshake (certificate "n1"): tls: failed to verify certificate: x509: certificate signed by unknown authority`)
	expectNothing(t, a.tr, 200*time.Millisecond)
	mallory.log.wait(t, "to n0: connection ended")

	// The other direction: a refuses to talk to a server with a foreign
	// certificate, so mallory receives nothing either.
	for range 5 {
		a.tr.Send(1, sm.Msg{Type: sm.MsgHeartbeat})
	}
	a.log.wait(t, "to n1 (")
	expectNothing(t, mallory.tr, 200*time.Millisecond)
	if !strings.Contains(a.log.String(), "unknown authority") {
		t.Errorf("a's log does not name the cause:\n%s", a.log)
	}
}

func TestPeerIdentityChecks(t *testing.T) {
	pk, _ := certs(t)
	peers := peersOf(freeAddrs(t, 3))
	a := start(t, 0, peers, pk.mats["n0"], nil)
	addr := peers[0].Addr
	tests := []struct {
		name  string
		cert  string
		hello *schema.Hello
		log   string
	}{
		{"hello names another peer", "n2", &schema.Hello{Kind: schema.Hello_PEER, Name: "n1"}, `certificate is for "n2" but hello says "n1"`},
		{"not in peers", "n9", &schema.Hello{Kind: schema.Hello_PEER, Name: "n9"}, `refusing peer "n9": not in --peers`},
		{"our own name", "n0", &schema.Hello{Kind: schema.Hello_PEER, Name: "n0"}, `this node's own name`},
		{"client cert as peer", "operator", &schema.Hello{Kind: schema.Hello_PEER, Name: "operator"}, `refusing peer "operator"`},
		{"client cert with a peer's name", "n1-client", &schema.Hello{Kind: schema.Hello_PEER, Name: "n1"}, `refusing peer "n1": its certificate is not a node's (serverAuth and clientAuth)`},
		{"control bytes in hello name", "n2", &schema.Hello{Kind: schema.Hello_PEER, Name: "n\x1b[31m2"}, `hello says "n?[31m2"`},
		{"no hello", "n1", nil, "hello:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, addr, pk.mats[tc.cert], tc.hello)
			if tc.hello != nil {
				m, _ := wire.Encode(sm.Msg{Type: sm.MsgHeartbeat})
				_, _ = c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(m))), m...))
			} else {
				c.CloseWrite()
			}
			expectClosed(t, c)
			a.log.wait(t, tc.log)
		})
	}
	expectNothing(t, a.tr, 100*time.Millisecond)
}

func TestBadFramesCloseTheConnection(t *testing.T) {
	pk, _ := certs(t)
	peers := peersOf(freeAddrs(t, 2))
	a := start(t, 0, peers, pk.mats["n0"], nil)
	addr := peers[0].Addr
	peerHello := &schema.Hello{Kind: schema.Hello_PEER, Name: "n1"}
	hdr := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	tests := []struct {
		name  string
		hello *schema.Hello // nil: the frame is the hello
		frame []byte
		log   string
	}{
		{"oversized peer frame", peerHello, hdr(wire.MaxFrameSize + 1), "exceeds MaxFrameSize"},
		{"undecodable peer frame", peerHello, append(hdr(3), 0xff, 0xff, 0xff), "bad frame"},
		{"peer frame cut short", peerHello, append(hdr(100), 1, 2), "unexpected EOF"},
		{"oversized hello", nil, hdr(wire.MaxHelloSize + 1), "hello length"},
		{"garbage hello", nil, append(hdr(2), 0xff, 0xff), "bad frame: hello"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, addr, pk.mats["n1"], tc.hello)
			if _, err := c.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(tc.name, "cut short") {
				c.CloseWrite()
			}
			expectClosed(t, c)
			a.log.wait(t, tc.log)
		})
	}
	expectNothing(t, a.tr, 100*time.Millisecond)

	// The listener is unharmed: a real peer still gets through.
	b := start(t, 1, peers, pk.mats["n1"], nil)
	if in := sendUntil(t, b.tr, 0, sm.Msg{Type: sm.MsgJoin}, a.tr); in.From != 1 {
		t.Fatalf("from %d", in.From)
	}
}

func TestReconnectAfterListenerRestart(t *testing.T) {
	pk, _ := certs(t)
	peers := peersOf(freeAddrs(t, 2))
	a := start(t, 0, peers, pk.mats["n0"], nil)
	b := start(t, 1, peers, pk.mats["n1"], nil)
	sendUntil(t, a.tr, 1, sm.Msg{Type: sm.MsgProbe, ReqID: 1}, b.tr)

	// b's listener stops (its connections close with it) and comes back.
	b.stop(t)
	a.tr.Send(1, sm.Msg{Type: sm.MsgProbe, ReqID: 2}) // may be lost
	b.listen()
	in := sendUntil(t, a.tr, 1, sm.Msg{Type: sm.MsgProbe, ReqID: 3}, b.tr)
	if in.From != 0 {
		t.Fatalf("from %d", in.From)
	}

	// b restarts as a new process (a new Transport on the same address).
	b.tr.Close()
	b.stop(t)
	b2 := start(t, 1, peers, pk.mats["n1"], nil)
	if in := sendUntil(t, a.tr, 1, sm.Msg{Type: sm.MsgProbe, ReqID: 4}, b2.tr); in.From != 0 {
		t.Fatalf("from %d", in.From)
	}
	a.log.wait(t, "to n1: connection closed by the peer")
}

func TestSendNeverBlocksAndDropsOldest(t *testing.T) {
	pk, _ := certs(t)
	// Peer 1 accepts TCP but never speaks TLS: the sender stalls in its
	// handshake while the queue fills.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	peers := []Peer{{"n0", "127.0.0.1:1"}, {"n1", ln.Addr().String()}}
	tr, err := New(Config{Self: 0, Peers: peers, TLS: pk.mats["n0"], QueueLen: 2, HandshakeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.Send(1, sm.Msg{Type: sm.MsgProbe, ReqID: 0})
	var stalled net.Conn
	select {
	case stalled = <-accepted:
		defer stalled.Close()
	case <-time.After(3 * time.Second):
		t.Fatal("never dialled")
	}
	start := time.Now()
	for i := 1; i <= 100; i++ {
		tr.Send(1, sm.Msg{Type: sm.MsgProbe, ReqID: uint64(i)})
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("100 sends took %v", d)
	}
	if got := tr.Dropped(1); got != 98 {
		t.Errorf("dropped %d, want 98", got)
	}
	q := tr.links[1].q
	if len(q) != 2 {
		t.Fatalf("queue holds %d", len(q))
	}
	if m1, m2 := <-q, <-q; m1.ReqID != 99 || m2.ReqID != 100 {
		t.Fatalf("queue kept %d and %d, want the newest 99 and 100", m1.ReqID, m2.ReqID)
	}
	// Close does not wait for the stalled handshake.
	start = time.Now()
	tr.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
}

// ourGoroutines lists the stacks of goroutines running this package's
// code, other than the caller's.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 {
			continue // the caller
		}
		if strings.Contains(g, "xce/adapters/transport.(*") || strings.Contains(g, "github.com/xce-hpc/xce/adapters/transport.New") {
			out = append(out, g)
		}
	}
	return out
}

func TestCloseLeavesNoGoroutine(t *testing.T) {
	pk, _ := certs(t)
	time.Sleep(50 * time.Millisecond) // let earlier tests' goroutines finish
	before := runtime.NumGoroutine()

	peers := peersOf(freeAddrs(t, 3))
	var trs []*Transport
	var listens []chan error
	for i := range 2 {
		tr, err := New(Config{Self: i, Peers: peers, TLS: pk.mats[peers[i].Name], HTTP: cnHandler})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- tr.Listen(context.Background()) }()
		trs, listens = append(trs, tr), append(listens, done)
	}
	sendUntil(t, trs[0], 1, sm.Msg{Type: sm.MsgHeartbeat}, trs[1])
	sendUntil(t, trs[1], 0, sm.Msg{Type: sm.MsgHeartbeat}, trs[0])
	trs[0].Send(2, sm.Msg{Type: sm.MsgHeartbeat}) // a peer that is down
	cl := apiConnected(t, peers[0].Addr, pk.mats["operator"])
	// Leave the client connected: Close must cut it too.
	for i, tr := range trs {
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-listens[i]:
			if err != nil {
				t.Fatalf("Listen: %v", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Listen did not return after Close")
		}
		for range tr.Inbound() { // drains, then sees the channel closed
		}
		if err := tr.Listen(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Listen after Close: %v", err)
		}
		tr.Send(1-i, sm.Msg{Type: sm.MsgHeartbeat}) // no panic, dropped
		tr.Close()                                  // idempotent
	}
	if _, err := apiGet(cl, peers[0].Addr); err == nil {
		t.Fatal("client still served after Close")
	}
	cl.CloseIdleConnections()

	if !eventually(2*time.Second, func() bool { return len(ourGoroutines()) == 0 && runtime.NumGoroutine() <= before }) {
		t.Fatalf("goroutines: %d before, %d after; ours:\n%s", before, runtime.NumGoroutine(), strings.Join(ourGoroutines(), "\n\n"))
	}
}

func TestNewPeerConnectionReplacesOld(t *testing.T) {
	pk, _ := certs(t)
	peers := peersOf(freeAddrs(t, 2))
	a := start(t, 0, peers, pk.mats["n0"], nil)
	hello := &schema.Hello{Kind: schema.Hello_PEER, Name: "n1"}
	frame := func(m sm.Msg) []byte {
		b, err := wire.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
	}
	old := rawDial(t, peers[0].Addr, pk.mats["n1"], hello)
	if _, err := old.Write(frame(sm.Msg{Type: sm.MsgProbe, ReqID: 1})); err != nil {
		t.Fatal(err)
	}
	if in := recv(t, a.tr); in.From != 1 || in.Msg.ReqID != 1 {
		t.Fatalf("got %+v", in)
	}
	cur := rawDial(t, peers[0].Addr, pk.mats["n1"], hello)
	if _, err := cur.Write(frame(sm.Msg{Type: sm.MsgProbe, ReqID: 2})); err != nil {
		t.Fatal(err)
	}
	if in := recv(t, a.tr); in.From != 1 || in.Msg.ReqID != 2 {
		t.Fatalf("got %+v", in)
	}
	expectClosed(t, old)
	if _, err := cur.Write(frame(sm.Msg{Type: sm.MsgProbe, ReqID: 3})); err != nil {
		t.Fatal(err)
	}
	if in := recv(t, a.tr); in.Msg.ReqID != 3 {
		t.Fatalf("got %+v", in)
	}
}
