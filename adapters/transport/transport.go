// Package transport carries the state machine's messages between
// controllers over TLS 1.3 with mutual authentication (DESIGN.md §3.2,
// seed 002 §5.3, §5.4, §9.2), and serves the operator/worker client
// protocol on the same port.
//
// Connections. Every connection is TLS 1.3, both sides presenting a
// certificate signed by the cluster CA (tlsconf.Material). The dialer's
// first frame is a Hello (wire.WriteHello):
//
//   - PEER: a controller. The certificate's CN must equal Hello.name and be
//     a name in --peers other than our own; otherwise the connection is
//     closed and the refusal logged (CN sanitised). Every further frame is
//     an Envelope (wire.ReadFrame), delivered on Inbound() with From = the
//     sender's index in --peers, taken from the certificate, never from
//     the message. Nothing is written back: replies travel on the
//     connection the other controller dials to us.
//   - CLIENT: an operator tool or worker with any CA-signed certificate.
//     Each request is answered, in order, by Config.Client, which
//     gets the certificate's CN and decides what that CN may do.
//
// A frame over the size limit, an undecodable frame or a bad Hello closes
// the connection (logged); nothing here panics on input.
//
// Sending. Send never blocks: each peer has a bounded queue (QueueLen,
// default DefaultQueueLen) drained by one goroutine that dials lazily on
// the next message (DialTimeout for the TCP connect, HandshakeTimeout for
// TLS and the Hello), keeps the connection while it works, and on any error
// closes it and dials again for the next message. When a queue is full the
// OLDEST queued message is dropped: every message carries the sender's
// current view (role, term, tag), so the newest is the most useful, and the
// state machine's timers cover the loss. Delivery is best effort: a message
// queued, written to a connection the peer has just closed, or waiting for
// a failed dial is lost without notice.
package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// Defaults for the zero values of Config.
const (
	DefaultDialTimeout      = 500 * time.Millisecond // seed 002 §9.2 probe_connect_timeout_ms
	DefaultHandshakeTimeout = 2 * time.Second
	DefaultWriteTimeout     = 5 * time.Second
	DefaultQueueLen         = 64
	// Bounds on what connections may hold (issue 8): a slow or silent
	// client never costs more than its share. Peers' connections count
	// against neither (one per peer: a newer replaces the older), and a
	// connection still in its handshake counts against the gate's pools
	// only (gate.go).
	DefaultMaxConns          = 512              // API connections at once
	DefaultMaxConnsPerClient = 64               // per client certificate CN
	DefaultIdleTimeout       = 2 * time.Minute  // no frame started for this long: closed
	DefaultBodyTimeout       = 10 * time.Second // a frame's body after its header
	DefaultMaxBuffered       = 64 << 20         // frame bodies being read, all connections
	// InboundLen is the capacity of the Inbound channel. When it is full,
	// readers wait (TCP flow control pushes back on the senders, whose
	// writes then time out and whose queues drop their oldest messages).
	InboundLen = 256
)

// orDefault sets *v to def unless it is positive (a Config zero value).
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// ErrClosed is returned by Listen after Close.
var ErrClosed = errors.New("transport: closed")

// Peer is one controller of --peers; its index there is its priority.
type Peer struct{ Name, Addr string }

// Config configures a Transport.
type Config struct {
	Self  int    // our index in Peers
	Peers []Peer // --peers, in priority order
	// TLS is our identity; its certificate's CN must be Peers[Self].Name,
	// since that is what the other controllers check. SetTLS replaces it.
	TLS *tlsconf.Material
	// DialTimeout bounds each TCP connect; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// HandshakeTimeout bounds the TLS handshake plus the Hello, on both
	// sides; 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds writing one frame; 0 means DefaultWriteTimeout.
	WriteTimeout time.Duration
	// QueueLen is the per-peer outbound queue; 0 means DefaultQueueLen.
	QueueLen int
	// MaxConns, MaxConnsPerClient, IdleTimeout, BodyTimeout, MaxBuffered:
	// 0 means the Default of the same name.
	MaxConns          int
	MaxConnsPerClient int
	IdleTimeout       time.Duration
	BodyTimeout       time.Duration
	MaxBuffered       int64
	// Handshakes, HandshakesPerSource, PeerHandshakes, NewConnsPerSecond:
	// the admission of connections before they are authenticated
	// (gate.go); 0 means the Default of the same name.
	Handshakes          int
	HandshakesPerSource int
	PeerHandshakes      int
	NewConnsPerSecond   int
	// Logf receives diagnostics (refused connections, bad frames, dial
	// failures — the latter once per change of error); nil discards them.
	Logf func(format string, args ...any)
	// HTTP serves the client API's connections (ALPN h2 or http/1.1); the
	// request's TLS state holds the verified client certificate. nil
	// refuses them.
	HTTP http.Handler
}

// Inbound is one message received from a peer. From is the sender's index
// in Peers, established by its certificate. Same shape as runner.Inbound.
type Inbound struct {
	From int
	Msg  sm.Msg
}

// Transport is the real network adapter. Its methods are safe for
// concurrent use.
type Transport struct {
	cfg    Config
	mat    atomic.Pointer[tlsconf.Material] // cfg.TLS, then SetTLS's
	byName map[string]int
	links  []*link // per peer; nil at Self
	in     chan Inbound

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // every goroutine started by the transport
	// peerConn holds, per peer index, the current accepted connection from
	// that peer; a newer one replaces (closes) it.
	peerConn map[int]net.Conn
	bound    net.Listener   // from Bind, for the next Listen
	clients  int            // API connections open (mu)
	perCN    map[string]int // API connections per certificate CN (mu)
	gate     *gate          // handshake slots before authentication
	tarpit   *tarpit        // refused connections, held a while before they are closed
	// local is the address this node dials its peers from: its own
	// --peers address, so that the others admit it from their peer pool.
	local    *net.TCPAddr
	refusals atomic.Uint64       // refused connections, to log at powers of two
	buffered *semaphore.Weighted // bytes of API request bodies being read
	// peerBuffered is the same bound for peer frames, apart: a client's
	// large bodies must never hold up a heartbeat (a 100 MiB body took
	// the shared budget for seconds and the primary stepped down).
	peerBuffered *semaphore.Weighted
	http         *httpSide // nil without Config.HTTP

	closeOnce sync.Once
}

// link is the outbound side towards one peer.
type link struct {
	idx     int
	name    string
	addr    string
	q       chan sm.Msg
	dropped atomic.Uint64
}

// New checks cfg and starts one sender goroutine per other peer.
func New(cfg Config) (*Transport, error) {
	if len(cfg.Peers) == 0 {
		return nil, errors.New("transport: no peers")
	}
	if cfg.Self < 0 || cfg.Self >= len(cfg.Peers) {
		return nil, fmt.Errorf("transport: self index %d out of range 0..%d", cfg.Self, len(cfg.Peers)-1)
	}
	if len(cfg.Peers) > wire.MaxPriority+1 {
		return nil, fmt.Errorf("transport: %d peers, max %d", len(cfg.Peers), wire.MaxPriority+1)
	}
	byName := make(map[string]int, len(cfg.Peers))
	for i, p := range cfg.Peers {
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("transport: peer %d has no name", i)
		case len(p.Name) > wire.MaxNameLen:
			return nil, fmt.Errorf("transport: peer %d name longer than %d bytes", i, wire.MaxNameLen)
		case p.Addr == "":
			return nil, fmt.Errorf("transport: peer %d (%s) has no address", i, p.Name)
		}
		if j, dup := byName[p.Name]; dup {
			return nil, fmt.Errorf("transport: peers %d and %d are both named %q", j, i, p.Name)
		}
		byName[p.Name] = i
	}
	if err := checkOwn(cfg.TLS, cfg.Peers[cfg.Self].Name); err != nil {
		return nil, err
	}
	orDefault(&cfg.DialTimeout, DefaultDialTimeout)
	orDefault(&cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	orDefault(&cfg.WriteTimeout, DefaultWriteTimeout)
	orDefault(&cfg.QueueLen, DefaultQueueLen)
	orDefault(&cfg.MaxConns, DefaultMaxConns)
	orDefault(&cfg.MaxConnsPerClient, DefaultMaxConnsPerClient)
	orDefault(&cfg.IdleTimeout, DefaultIdleTimeout)
	orDefault(&cfg.BodyTimeout, DefaultBodyTimeout)
	orDefault(&cfg.MaxBuffered, DefaultMaxBuffered)
	orDefault(&cfg.Handshakes, DefaultHandshakes)
	orDefault(&cfg.HandshakesPerSource, DefaultHandshakesPerSource)
	orDefault(&cfg.PeerHandshakes, DefaultPeerHandshakes)
	orDefault(&cfg.NewConnsPerSecond, DefaultNewConnsPerSecond)
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	t := &Transport{
		cfg:          cfg,
		byName:       byName,
		links:        make([]*link, len(cfg.Peers)),
		in:           make(chan Inbound, InboundLen),
		peerConn:     make(map[int]net.Conn),
		buffered:     semaphore.NewWeighted(cfg.MaxBuffered),
		peerBuffered: semaphore.NewWeighted(cfg.MaxBuffered),
		perCN:        make(map[string]int),
	}
	peerIPs := make(map[netip.Addr]bool)
	for i, p := range cfg.Peers {
		ips, err := hostIPs(p.Addr)
		if err != nil {
			// Not fatal: the peer may come to resolve; until this node
			// restarts, its connections are admitted as a stranger's.
			cfg.Logf("transport: peer %s (%s): %v; its connections are admitted as any other address's", p.Name, p.Addr, err)
		}
		for _, ip := range ips {
			peerIPs[ip] = true
		}
		// Dial from our own --peers address when it is an IP literal, so
		// that the other nodes admit us from its pool whatever address
		// the route would pick. A name is left to the route: it may
		// resolve to several addresses, and one of another family than a
		// peer's would leave no address to dial it at.
		if host, _, err := net.SplitHostPort(p.Addr); i == cfg.Self && err == nil {
			if ip, err := netip.ParseAddr(host); err == nil && !ip.IsUnspecified() {
				t.local = &net.TCPAddr{IP: ip.Unmap().AsSlice()}
			}
		}
	}
	t.tarpit = newTarpit(tarpitCap, tarpitHold)
	t.gate = newGate(gateLimits{
		handshakes: cfg.Handshakes, perSource: cfg.HandshakesPerSource, peerPool: cfg.PeerHandshakes,
		rate: rate.Limit(cfg.NewConnsPerSecond), burst: 2 * cfg.NewConnsPerSecond,
	}, peerIPs)
	t.mat.Store(cfg.TLS)
	t.ctx, t.cancel = context.WithCancel(context.Background())
	if cfg.HTTP != nil {
		t.http = newHTTPSide(t)
		t.wg.Go(func() { _ = t.http.srv.Serve(t.http.ln) }) // until Close
	}
	for i, p := range cfg.Peers {
		if i == cfg.Self {
			continue
		}
		l := &link{idx: i, name: p.Name, addr: p.Addr, q: make(chan sm.Msg, cfg.QueueLen)}
		t.links[i] = l
		t.wg.Add(1)
		go t.runLink(l)
	}
	return t, nil
}

// checkOwn: our certificate must be for our name in --peers.
func checkOwn(m *tlsconf.Material, self string) error {
	if m == nil || m.Leaf == nil || m.CAs == nil {
		return errors.New("transport: no TLS material")
	}
	if cn := m.Leaf.Subject.CommonName; cn != self {
		return fmt.Errorf("transport: own certificate is for %q but --peers names this node %q; the other controllers would refuse it",
			tlsconf.SanitizeCN(cn), self)
	}
	if !tlsconf.IsNodeCert(m.Leaf) {
		// It serves the peers and the clients and dials the peers: without
		// serverAuth no one verifies it, without clientAuth the peers
		// refuse it as a dialler.
		return fmt.Errorf("transport: own certificate %q has extended key usages %s; a node's certificate needs both serverAuth and clientAuth",
			tlsconf.SanitizeCN(m.Leaf.Subject.CommonName), tlsconf.EKUNames(m.Leaf))
	}
	return nil
}

// SetTLS replaces our certificate, key and CA (a rotation): every
// connection made or accepted from now on uses m — each builds its
// tls.Config from the material current at its start — while those already
// established keep theirs. m is refused, and the old material kept, when
// its certificate is not for our name.
func (t *Transport) SetTLS(m *tlsconf.Material) error {
	if err := checkOwn(m, t.cfg.Peers[t.cfg.Self].Name); err != nil {
		return err
	}
	t.mat.Store(m)
	return nil
}

// TLS is the material new connections use.
func (t *Transport) TLS() *tlsconf.Material { return t.mat.Load() }

func (t *Transport) logf(format string, args ...any) {
	t.cfg.Logf("transport %s: "+format, append([]any{t.cfg.Peers[t.cfg.Self].Name}, args...)...)
}

// Inbound returns the channel of messages received from peers. It is
// closed by Close once every receiving goroutine has stopped.
func (t *Transport) Inbound() <-chan Inbound { return t.in }

// Send queues m for peer to and returns at once. Messages to ourselves, to
// an unknown index or after Close are dropped; when the peer's queue is
// full its oldest message is dropped (see the package comment). m is
// encoded later, on the peer's goroutine: the caller must not modify
// m.SHA256 or m.Bytes after Send.
func (t *Transport) Send(to int, m sm.Msg) {
	if to < 0 || to >= len(t.links) || t.links[to] == nil || t.ctx.Err() != nil {
		return
	}
	l := t.links[to]
	for {
		select {
		case l.q <- m:
			return
		default:
		}
		select {
		case <-l.q:
			if n := l.dropped.Add(1); n&(n-1) == 0 { // log at 1, 2, 4, 8, ...
				t.logf("queue to %s full: dropped %d messages so far (oldest first)", l.name, n)
			}
		default:
		}
	}
}

// Dropped reports how many messages to peer were dropped because its queue
// was full.
func (t *Transport) Dropped(peer int) uint64 {
	if peer < 0 || peer >= len(t.links) || t.links[peer] == nil {
		return 0
	}
	return t.links[peer].dropped.Load()
}

// Close stops every goroutine (senders, Listen and its connections),
// closes every connection, waits for all of them, then closes Inbound().
// Queued messages are discarded. Close is idempotent.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		if t.bound != nil { // bound but never served
			t.bound.Close()
			t.bound = nil
		}
		t.mu.Unlock()
		t.cancel()
		if t.http != nil {
			_ = t.http.srv.Close() // its listener and every API connection
		}
		t.wg.Wait()
		close(t.in)
	})
	return nil
}

// goTracked runs f in a goroutine counted by Close, unless the transport
// is closed (then it returns false and f does not run).
func (t *Transport) goTracked(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Go(f)
	return true
}

// ---- outbound ----

// runLink drains one peer's queue onto a lazily dialled connection.
func (t *Transport) runLink(l *link) {
	defer t.wg.Done()
	var (
		oc      *outConn
		lastErr string // last dial error logged, to log each change once
	)
	defer func() {
		if oc != nil {
			oc.close()
		}
	}()
	for {
		var m sm.Msg
		select {
		case <-t.ctx.Done():
			return
		case m = <-l.q:
		}
		if oc != nil && oc.dead() {
			oc.close()
			oc = nil
		}
		if oc == nil {
			c, err := t.dial(l)
			if err != nil {
				if t.ctx.Err() != nil {
					return
				}
				if s := err.Error(); s != lastErr {
					t.logf("to %s (%s): %v; will retry on the next message", l.name, l.addr, err)
					lastErr = s
				}
				continue // m is lost; the next message retries
			}
			if lastErr != "" {
				t.logf("to %s (%s): connected", l.name, l.addr)
				lastErr = ""
			}
			oc = c
		}
		if err := oc.write(m, t.cfg.WriteTimeout); err != nil {
			if errors.Is(err, wire.ErrBadMsg) || errors.Is(err, wire.ErrFrameTooBig) {
				t.logf("to %s: dropping %s that cannot be encoded: %v", l.name, m.Type, err)
				continue
			}
			if t.ctx.Err() == nil {
				t.logf("to %s: %v; reconnecting on the next message", l.name, err)
			}
			oc.close()
			oc = nil
		}
	}
}

// outConn is a dialled connection to a peer, with a reader goroutine that
// notices when the peer closes it (or refuses our certificate, which TLS
// 1.3 reports after the client's handshake has completed).
type outConn struct {
	raw      net.Conn
	tc       *tls.Conn
	readDone chan struct{}
	unhook   func() bool // stops closing raw when the transport closes
}

func (o *outConn) dead() bool {
	select {
	case <-o.readDone:
		return true
	default:
		return false
	}
}

// close closes the socket (no TLS close_notify, which could block on a
// stuck peer) and waits for the reader.
func (o *outConn) close() {
	o.unhook()
	o.raw.Close()
	<-o.readDone
}

func (o *outConn) write(m sm.Msg, timeout time.Duration) error {
	if err := o.raw.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	return wire.WriteFrame(o.tc, m)
}

// dial connects to l, completes the TLS handshake (the server must present
// a CA-signed certificate for l.name) and sends our Hello.
func (t *Transport) dial(l *link) (*outConn, error) {
	d := net.Dialer{Timeout: t.cfg.DialTimeout}
	if t.local != nil {
		d.LocalAddr = t.local
	}
	raw, err := d.DialContext(t.ctx, "tcp", l.addr)
	if err != nil {
		return nil, err
	}
	// Close interrupts the handshake and, later, a blocked write.
	unhook := context.AfterFunc(t.ctx, func() { raw.Close() })
	fail := func(err error) (*outConn, error) {
		unhook()
		raw.Close()
		return nil, err
	}
	if err := raw.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout)); err != nil {
		return fail(err)
	}
	tc := tls.Client(raw, t.TLS().ClientConfigFor(l.name))
	if err := tc.Handshake(); err != nil {
		return fail(fmt.Errorf("tls handshake: %w", err))
	}
	if err := wire.WriteHello(tc, &schema.Hello{Kind: schema.Hello_PEER, Name: t.cfg.Peers[t.cfg.Self].Name}); err != nil {
		return fail(err)
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return fail(err)
	}
	o := &outConn{raw: raw, tc: tc, readDone: make(chan struct{}), unhook: unhook}
	if !t.goTracked(func() { t.drain(l, o) }) {
		return fail(ErrClosed)
	}
	return o, nil
}

// drain reads the dialled connection until it fails. The peer sends no
// application data, so this only sees TLS post-handshake messages, a
// refusal of our certificate, or the close.
func (t *Transport) drain(l *link, o *outConn) {
	defer close(o.readDone)
	defer o.raw.Close()
	n, err := io.Copy(io.Discard, o.tc)
	switch {
	case t.ctx.Err() != nil:
	case n > 0:
		t.logf("to %s: peer sent %d unexpected bytes; closing", l.name, n)
	case err == nil:
		t.logf("to %s: connection closed by the peer", l.name)
	case !errors.Is(err, net.ErrClosed):
		t.logf("to %s: connection ended: %v", l.name, err)
	}
}

// ---- inbound ----

// Bind binds Peers[Self].Addr now, so a taken port is an error at start
// (before the node runs an election), not in a goroutine; the next Listen
// serves on it.
func (t *Transport) Bind(ctx context.Context) error {
	addr := t.cfg.Peers[t.cfg.Self].Addr
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("transport: listen %s: %w", addr, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		ln.Close()
		return ErrClosed
	}
	if t.bound != nil {
		t.bound.Close()
	}
	t.bound = ln
	return nil
}

// Listen binds Peers[Self].Addr (unless Bind did) and serves connections until ctx is done
// or the transport is closed; it then closes the listener and every
// connection it accepted, waits for their goroutines, and returns nil. It
// returns an error if it cannot bind (or if the listener fails for good),
// and ErrClosed after Close. Listen may be called again after it has
// returned, e.g. to rebind after the address came back.
func (t *Transport) Listen(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	t.wg.Add(1)
	ln := t.bound
	t.bound = nil
	t.mu.Unlock()
	defer t.wg.Done()

	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopOnClose := context.AfterFunc(t.ctx, cancel)
	defer stopOnClose()

	addr := t.cfg.Peers[t.cfg.Self].Addr
	if ln == nil {
		var lc net.ListenConfig
		var err error
		if ln, err = lc.Listen(lctx, "tcp", addr); err != nil {
			if lctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("transport: listen %s: %w", addr, err)
		}
	}
	stopLn := context.AfterFunc(lctx, func() { ln.Close() })
	defer stopLn()
	// The tarpit closes every connection it holds when Listen returns.
	tctx, stopTarpit := context.WithCancel(lctx)
	var tarpitDone sync.WaitGroup
	tarpitDone.Go(func() { t.tarpit.run(tctx) })
	defer func() { stopTarpit(); tarpitDone.Wait() }()

	var conns sync.WaitGroup // each connection closes itself when lctx is done
	defer conns.Wait()
	var backoff time.Duration
	swept := time.Now()
	for {
		c, err := ln.Accept()
		if err != nil {
			if lctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("transport: accept on %s: %w", addr, err)
			}
			// EMFILE and friends: wait and retry, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t.logf("accept: %v; retrying in %v", err, backoff)
			select {
			case <-time.After(backoff):
			case <-lctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		now := time.Now()
		if now.Sub(swept) > sourceIdle {
			t.gate.sweep(now)
			swept = now
		}
		cc := &countingConn{Conn: c}
		leave, why := t.gate.enter(addrOf(c.RemoteAddr()), now, c, &cc.read)
		if why != "" {
			t.refused(why, c.RemoteAddr().String())
			t.tarpit.put(c, now) // before any TLS work; closed in a while
			continue
		}
		conns.Go(func() {
			defer c.Close()
			defer leave()
			t.serve(lctx, cc, leave)
		})
	}
}

// serve runs one accepted connection until it fails or ctx is done;
// leave gives back its handshake slot once it is known what it is.
func (t *Transport) serve(ctx context.Context, raw net.Conn, leave func()) {
	remote := raw.RemoteAddr().String()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	if err := raw.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout)); err != nil {
		return
	}
	cfg := t.TLS().ServerConfig()
	if t.cfg.HTTP != nil {
		cfg.NextProtos = httpProtos
	}
	tc := tls.Server(raw, cfg)
	if err := tc.Handshake(); err != nil {
		if ctx.Err() == nil {
			claimed := ""
			var cve *tls.CertificateVerificationError
			if errors.As(err, &cve) && len(cve.UnverifiedCertificates) > 0 {
				claimed = fmt.Sprintf(" (certificate %q)", tlsconf.SanitizeCN(cve.UnverifiedCertificates[0].Subject.CommonName))
			}
			t.logf("from %s: tls handshake%s: %v", remote, claimed, err)
		}
		return
	}
	cn := tlsconf.PeerCN(tc.ConnectionState())
	if p := tc.ConnectionState().NegotiatedProtocol; p != "" {
		leave()
		t.serveHTTP(ctx, raw, tc, cn, remote)
		return
	}
	// No ALPN: a peer, whose Hello starts with its length (a first byte of
	// 0: at most MaxHelloSize), or an HTTP client that asked for no
	// protocol (its request starts with a method name).
	var first [1]byte
	if _, err := io.ReadFull(tc, first[:]); err != nil {
		if ctx.Err() == nil {
			t.logf("from %s (cert %q): hello: %v; closing", remote, tlsconf.SanitizeCN(cn), err)
		}
		return
	}
	if first[0] != 0 {
		leave()
		t.serveHTTP(ctx, raw, &prefixConn{Conn: tc, prefix: first[:], state: tc.ConnectionState()}, cn, remote)
		return
	}
	hello, err := wire.ReadHello(io.MultiReader(bytes.NewReader(first[:]), tc))
	if err != nil {
		if ctx.Err() == nil {
			t.logf("from %s (cert %q): hello: %v; closing", remote, tlsconf.SanitizeCN(cn), err)
		}
		return
	}
	leave()
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return
	}
	switch hello.GetKind() {
	case schema.Hello_PEER:
		idx, ok := t.byName[cn]
		switch {
		case cn != hello.GetName():
			t.logf("from %s: refusing peer: certificate is for %q but hello says %q",
				remote, tlsconf.SanitizeCN(cn), tlsconf.SanitizeCN(hello.GetName()))
			return
		case !ok:
			t.logf("from %s: refusing peer %q: not in --peers", remote, tlsconf.SanitizeCN(cn))
			return
		case idx == t.cfg.Self:
			t.logf("from %s: refusing peer %q: that is this node's own name", remote, tlsconf.SanitizeCN(cn))
			return
		case !tlsconf.IsNodeCert(leafOf(tc)):
			// A client certificate the CA issued with a node's name is
			// not that node.
			t.logf("from %s: refusing peer %q: its certificate is not a node's (serverAuth and clientAuth)", remote, tlsconf.SanitizeCN(cn))
			return
		}
		t.servePeer(ctx, raw, tc, idx, remote)
	default:
		t.logf("from %s (cert %q): refusing a %s hello: clients use the API (TLS ALPN h2 or http/1.1)", remote, tlsconf.SanitizeCN(cn), hello.GetKind())
	}
}

// leafOf is the verified certificate of the other side of tc.
func leafOf(tc *tls.Conn) *x509.Certificate {
	if cs := tc.ConnectionState(); len(cs.PeerCertificates) > 0 {
		return cs.PeerCertificates[0]
	}
	return nil
}

// admit bounds the bytes every peer connection's frame bodies hold while
// being read (MaxBuffered, apart from the API's bodies), and gives a body
// BodyTimeout to arrive once its header has: a peer that sends a header
// and then stalls holds its share for that long at most.
func (t *Transport) admit(ctx context.Context, raw net.Conn) wire.Admit {
	return func(n int) (func(), error) {
		deadline := time.Now().Add(t.cfg.BodyTimeout)
		if err := raw.SetReadDeadline(deadline); err != nil {
			return nil, err
		}
		if !t.peerBuffered.TryAcquire(int64(n)) {
			actx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			if err := t.peerBuffered.Acquire(actx, int64(n)); err != nil {
				return nil, fmt.Errorf("%w: no room for %d more bytes within %v (frame bodies being read are bounded to %d bytes)", ErrBusy, n, t.cfg.BodyTimeout, t.cfg.MaxBuffered)
			}
		}
		return func() { t.peerBuffered.Release(int64(n)) }, nil
	}
}

// ErrBusy: a frame could not be buffered within the body timeout.
var ErrBusy = errors.New("transport: busy")

// servePeer delivers the frames of an authenticated peer connection.
func (t *Transport) servePeer(ctx context.Context, raw net.Conn, tc *tls.Conn, idx int, remote string) {
	name := t.cfg.Peers[idx].Name
	t.mu.Lock()
	if old := t.peerConn[idx]; old != nil {
		old.Close() // the peer redialled: its old connection is dead to it
	}
	t.peerConn[idx] = raw
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if t.peerConn[idx] == raw {
			delete(t.peerConn, idx)
		}
		t.mu.Unlock()
	}()
	for {
		if err := raw.SetReadDeadline(time.Now().Add(t.cfg.IdleTimeout)); err != nil {
			return
		}
		m, err := wire.ReadFrameAdmit(tc, t.admit(ctx, raw))
		if err != nil {
			switch {
			case ctx.Err() != nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
			default:
				t.logf("from %s (%s): %v; closing", name, remote, err)
			}
			return
		}
		select {
		case t.in <- Inbound{From: idx, Msg: m}:
		case <-ctx.Done():
			return
		}
	}
}
