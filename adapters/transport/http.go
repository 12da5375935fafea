package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/xce-hpc/xce/adapters/tlsconf"
)

// httpProtos are the ALPN protocols of the client API. The peer protocol
// asks for none, as it always has; an HTTP/1.1 client that asks for none
// is told from a peer by its first byte.
var httpProtos = []string{"h2", "http/1.1"}

// httpSide is the http.Server the API's connections are handed to: the
// transport accepts, handshakes and counts them; the server reads them.
type httpSide struct {
	srv *http.Server
	ln  *connListener

	mu   sync.Mutex
	open map[net.Conn]chan struct{} // closed when the server is done with the conn
	// certs holds each client certificate's share of the body budget
	// while any of its requests is being served (mu).
	certs map[string]*certShare
}

// certShare is one certificate's share of the bodies' budget (cnShare)
// and how many of its requests hold it.
type certShare struct {
	sem   *semaphore.Weighted
	users int
}

// certShareOf is cn's share, held until done is called.
func (h *httpSide) certShareOf(cn string, size int64) (sem *semaphore.Weighted, done func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.certs[cn]
	if c == nil {
		c = &certShare{sem: semaphore.NewWeighted(size)}
		h.certs[cn] = c
	}
	c.users++
	return c.sem, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if c.users--; c.users == 0 {
			delete(h.certs, cn)
		}
	}
}

func newHTTPSide(t *Transport) *httpSide {
	h := &httpSide{ln: newConnListener(), open: make(map[net.Conn]chan struct{}), certs: make(map[string]*certShare)}
	h.srv = &http.Server{
		Handler:           t.budget(t.cfg.HTTP),
		IdleTimeout:       t.cfg.IdleTimeout,
		ReadHeaderTimeout: t.cfg.BodyTimeout,
		// A request's body has BodyTimeout to arrive (per stream in
		// HTTP/2), as a peer frame's body after its header.
		ReadTimeout: t.cfg.BodyTimeout,
		ErrorLog: log.New(writerFunc(func(p []byte) (int, error) {
			t.logf("api: %s", strings.TrimSpace(string(p)))
			return len(p), nil
		}), "", 0),
		// A connection without ALPN reaches the server as a prefixConn,
		// not a *tls.Conn: its TLS state travels in the context instead.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			// Each connection's request bodies share connShare bytes of
			// the budget, so that no client (one HTTP/2 connection may
			// carry hundreds of streams) holds the budget others need.
			ctx = context.WithValue(ctx, connShareKey{}, semaphore.NewWeighted(t.connShare()))
			if pc, ok := c.(*prefixConn); ok {
				return context.WithValue(ctx, tlsStateKey{}, &pc.state)
			}
			return ctx
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				h.mu.Lock()
				if done, ok := h.open[c]; ok {
					close(done)
					delete(h.open, c)
				}
				h.mu.Unlock()
			}
		},
	}
	return h
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// serveHTTP hands an API connection to the HTTP server and waits until the
// server is done with it, so that the connection counts against MaxConns
// and MaxConnsPerClient while it is open.
func (t *Transport) serveHTTP(ctx context.Context, raw net.Conn, tc net.Conn, cn, remote string) {
	if t.http == nil {
		t.logf("from %s (cert %q): refusing an API connection: this transport serves none", remote, tlsconf.SanitizeCN(cn))
		return
	}
	t.mu.Lock()
	n := t.perCN[cn]
	switch {
	case t.clients >= t.cfg.MaxConns:
		t.mu.Unlock()
		t.gate.refuse(RefusedClients)
		t.refused(RefusedClients, remote)
		return
	case n >= t.cfg.MaxConnsPerClient:
		t.mu.Unlock()
		t.gate.refuse(RefusedPerCN)
		t.logf("from %s: refusing client %q: %d connections open (max %d per client)", remote, tlsconf.SanitizeCN(cn), n, t.cfg.MaxConnsPerClient)
		return
	}
	t.perCN[cn] = n + 1
	t.clients++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.clients--
		if t.perCN[cn]--; t.perCN[cn] == 0 {
			delete(t.perCN, cn)
		}
		t.mu.Unlock()
	}()
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return
	}
	h := t.http
	done := make(chan struct{})
	h.mu.Lock()
	h.open[tc] = done
	h.mu.Unlock()
	if !h.ln.push(ctx, tc) {
		h.mu.Lock()
		delete(h.open, tc)
		h.mu.Unlock()
		return
	}
	select {
	case <-done:
	case <-ctx.Done(): // the caller closes raw: the server then lets go
	}
}

// connListener is the HTTP server's listener: it accepts what serveHTTP
// pushes.
type connListener struct {
	ch        chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) push(ctx context.Context, c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
	case <-ctx.Done():
	}
	return false
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.TCPAddr{} }

// DefaultMaxBody bounds the bytes one request body holds at once (a
// stream's: one message's) unless its handler sets its own (LimitBody):
// a body announced longer is refused before any of it is read, and one
// of unknown length (chunked, HTTP/2 without a length) is cut there.
const DefaultMaxBody = 2 << 20

// connShare is the most of MaxBuffered one connection's bodies hold
// together: a few of the largest bodies, so that a connection that sends
// more waits for its own, not others' (at most the whole budget).
func (t *Transport) connShare() int64 { return min(t.cfg.MaxBuffered, 4*DefaultMaxBody) }

// cnShare is the most of MaxBuffered one client certificate's bodies hold
// over all its connections: two connections' shares, so that it takes
// four certificates to fill the budget. A --peers CN has none: a standby
// forwards every client's call over its own certificate, and each of
// those calls was held to its caller's share where it arrived.
func (t *Transport) cnShare() int64 { return min(t.cfg.MaxBuffered, 2*t.connShare()) }

type connShareKey struct{}

// budget bounds the request bodies all API connections hold while their
// handlers read them to MaxBuffered bytes, as admit bounds the peer
// frames, each connection's to connShare, each body's to its limit
// (DefaultMaxBody, or LimitBody's): a body that cannot get its share
// within BodyTimeout fails (ErrBusy), one over its limit is refused
// (*http.MaxBytesError), and what a handler read is released when it
// returns (a stream's, as it consumes each message: see Stream).
//
// A handler that answers without reading any of its body (a wrong
// Content-Type, an unknown path) has the body, up to its limit, read and
// dropped before its answer goes: an HTTP/2 answer sent while the client
// is still sending is followed by a reset of the stream, which some
// clients (curl) report instead of the answer.
func (t *Transport) budget(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			r.TLS, _ = r.Context().Value(tlsStateKey{}).(*tls.ConnectionState)
		}
		conn, _ := r.Context().Value(connShareKey{}).(*semaphore.Weighted)
		b := &budgetBody{ReadCloser: r.Body, t: t, ctx: r.Context(), deadline: time.Now().Add(t.cfg.BodyTimeout), w: w, conn: conn}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cn := r.TLS.PeerCertificates[0].Subject.CommonName
			if _, peer := t.byName[cn]; !peer {
				var done func()
				b.cert, done = t.http.certShareOf(cn, t.cnShare())
				defer done()
			}
		}
		b.limit(r.ContentLength, DefaultMaxBody)
		defer b.release()
		r.Body = b
		a := &answerWriter{ResponseWriter: w}
		h.ServeHTTP(a, r)
		b.dropUnread(a, r.ContentLength)
	})
}

type budgetBody struct {
	io.ReadCloser
	t        *Transport
	ctx      context.Context
	deadline time.Time // for the budget's share of what is read now
	held     int64     // bytes acquired from t.buffered and conn
	w        http.ResponseWriter
	conn     *semaphore.Weighted // the connection's share; nil: none
	cert     *semaphore.Weighted // the client certificate's share; nil: none (a peer's)
	max      int64               // the most held at once
	refused  bool                // announced longer than max: never read
	tooLarge bool                // over max: every read fails
	read     bool                // the handler read (or tried to)
	// A stream's, from its first Stream.Received: idle is true from a
	// reply until the next message's first bytes.
	rc   *http.ResponseController
	idle bool
}

// LimitBody bounds the body of r (which came through a Transport; else
// it does nothing) to n bytes held at once (a stream's: one message's)
// instead of DefaultMaxBody, before its handler reads it: a body
// announced longer is refused before any of it is read, one of unknown
// length is cut at n. A refused body's reads fail with an
// *http.MaxBytesError (which connect answers as resource_exhausted); over
// HTTP/1.1 the connection is closed once the answer is written whole.
// More than connShare cannot be held however large n is.
func LimitBody(r *http.Request, n int64) {
	if b, ok := r.Body.(*budgetBody); ok && !b.read {
		b.limit(r.ContentLength, n)
	}
}

func (b *budgetBody) limit(length, n int64) {
	b.max = n
	b.refused = length > n
}

func (b *budgetBody) release() {
	if b.held == 0 {
		return
	}
	b.t.buffered.Release(b.held)
	if b.conn != nil {
		b.conn.Release(b.held)
	}
	if b.cert != nil {
		b.cert.Release(b.held)
	}
	b.held = 0
}

// overLimit fails the body: every later read returns the error, and an
// HTTP/1.1 connection is closed after the answer. The server is told so
// the one way it can be, by an http.MaxBytesReader passing its limit
// (here over one byte of its own, not the body's): it then writes the
// answer whole, with "Connection: close", and waits a moment before it
// closes, so that a client still sending its body reads the answer
// (closed at once, the unread body makes the close a reset, which cut
// the answer).
func (b *budgetBody) overLimit() error {
	b.tooLarge = true
	var one [1]byte
	_, _ = http.MaxBytesReader(b.w, io.NopCloser(strings.NewReader("x")), 0).Read(one[:])
	return &http.MaxBytesError{Limit: b.max}
}

func (b *budgetBody) Read(p []byte) (int, error) {
	b.read = true
	if b.refused || b.tooLarge {
		return 0, b.overLimit()
	}
	if room := b.max - b.held; int64(len(p)) > room+1 {
		// No read past the limit but the one byte that shows it passed.
		p = p[:room+1]
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 && b.idle {
		// A stream's next message began: it has BodyTimeout to arrive
		// whole, as a request's body has.
		b.idle = false
		b.deadline = time.Now().Add(b.t.cfg.BodyTimeout)
		if derr := (*Stream)(b).setReadDeadline(b.deadline); derr != nil {
			return 0, derr
		}
	}
	if n == 0 {
		return 0, err
	}
	if b.held+int64(n) > b.max {
		return 0, b.overLimit()
	}
	if err := b.acquire(int64(n)); err != nil {
		return 0, err
	}
	b.held += int64(n)
	return n, err
}

// acquire takes n bytes of the connection's share, of the certificate's,
// then of the budget, waiting until the body's deadline at most.
func (b *budgetBody) acquire(n int64) error {
	ctx, cancel := context.WithDeadline(b.ctx, b.deadline)
	defer cancel()
	var taken []*semaphore.Weighted
	for _, sem := range []*semaphore.Weighted{b.conn, b.cert, b.t.buffered} {
		if sem == nil || sem.TryAcquire(n) {
			taken = append(taken, sem)
			continue
		}
		if err := sem.Acquire(ctx, n); err != nil {
			for _, s := range taken {
				if s != nil {
					s.Release(n)
				}
			}
			return fmt.Errorf("%w: no room for %d more bytes of a request body within %v (bodies being read are bounded to %d bytes, a connection's to %d, a certificate's to %d)",
				ErrBusy, n, b.t.cfg.BodyTimeout, b.t.cfg.MaxBuffered, b.t.connShare(), b.t.cnShare())
		}
		taken = append(taken, sem)
	}
	return nil
}

// answerWriter is a handler's ResponseWriter, which tells budget whether
// the handler flushed its answer (a stream's, sent as it goes).
type answerWriter struct {
	http.ResponseWriter
	flushed bool
}

func (a *answerWriter) Flush() {
	a.flushed = true
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// dropUnread reads and drops the body of a request whose handler
// returned without reading any of it, up to its limit (see budget), when
// its answer still waits to be sent (not flushed).
func (b *budgetBody) dropUnread(a *answerWriter, length int64) {
	// Not when the handler closes the connection anyway (connect does
	// for a stream over HTTP/1.1, whose client may not end its body), nor
	// for a body refused by its length (the reset is the point).
	if b.read || a.flushed || length == 0 || b.refused || a.Header().Get("Connection") == "close" {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(b.ReadCloser, b.max))
}

// Unwrap is for http.ResponseController.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// Stream is the body of a long-lived request (a bidi-streaming RPC) that
// its handler reads one message at a time, answering each before reading
// the next. A request body's limits would end it: BodyTimeout for the
// whole body, and its bytes held against MaxBuffered until the handler
// returns. A stream's instead apply per message: the handler calls
// Received when it has a message whole and Answered when its reply is
// sent; from then on the next message has IdleTimeout to begin (a stream
// without messages is closed like an idle connection) and BodyTimeout to
// arrive whole, and no deadline runs while a message is served. Until
// the first Received, the request's own limits apply. A deadline missed
// fails the handler's next read (os.ErrDeadlineExceeded). Only for
// HTTP/2 (a deadline there is the stream's, not the connection's); the
// methods are the handler's, from the goroutine that reads the body.
type Stream budgetBody

// StreamOf is the Stream of a request whose body is body (a handler's
// r.Body, before anything wraps it); nil for one that did not come
// through a Transport.
func StreamOf(body io.Reader) *Stream {
	b, _ := body.(*budgetBody)
	return (*Stream)(b)
}

// Received: a message was read whole. Its bytes are released, and no
// read deadline runs while it is served.
func (s *Stream) Received() error {
	(*budgetBody)(s).release()
	if s.rc == nil {
		s.rc = http.NewResponseController(s.w)
	}
	return s.setReadDeadline(time.Time{})
}

// Answered: the message's reply was sent. The next message has
// IdleTimeout to begin.
func (s *Stream) Answered() error {
	if s.rc == nil {
		return errors.New("transport: Answered before Received")
	}
	s.idle = true
	return s.setReadDeadline(time.Now().Add(s.t.cfg.IdleTimeout))
}

func (s *Stream) setReadDeadline(d time.Time) error {
	if err := s.rc.SetReadDeadline(d); err != nil {
		return fmt.Errorf("transport: a stream's read deadline: %w", err)
	}
	return nil
}

// prefixConn is a TLS connection whose first byte was read to tell an
// HTTP client from a peer; it hands that byte back first.
type prefixConn struct {
	net.Conn
	prefix []byte
	state  tls.ConnectionState
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

type tlsStateKey struct{}
