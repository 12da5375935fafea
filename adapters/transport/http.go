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

	"xce/adapters/tlsconf"
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
}

func newHTTPSide(t *Transport) *httpSide {
	h := &httpSide{ln: newConnListener(), open: make(map[net.Conn]chan struct{})}
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

// budget bounds the request bodies all API connections hold while their
// handlers read them to MaxBuffered bytes, as admit bounds the peer
// frames: a body that cannot get its share within BodyTimeout fails
// (ErrBusy), and what a handler read is released when it returns (a
// stream's, as it consumes each message: see Stream).
func (t *Transport) budget(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			r.TLS, _ = r.Context().Value(tlsStateKey{}).(*tls.ConnectionState)
		}
		b := &budgetBody{ReadCloser: r.Body, t: t, ctx: r.Context(), deadline: time.Now().Add(t.cfg.BodyTimeout), w: w}
		defer func() { t.buffered.Release(b.held) }()
		r.Body = b
		h.ServeHTTP(w, r)
	})
}

type budgetBody struct {
	io.ReadCloser
	t        *Transport
	ctx      context.Context
	deadline time.Time // for the budget's share of what is read now
	held     int64     // bytes acquired from t.buffered
	w        http.ResponseWriter
	// A stream's, from its first Stream.Received: idle is true from a
	// reply until the next message's first bytes.
	rc   *http.ResponseController
	idle bool
}

func (b *budgetBody) Read(p []byte) (int, error) {
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
	if n > 0 && !b.t.buffered.TryAcquire(int64(n)) {
		ctx, cancel := context.WithDeadline(b.ctx, b.deadline)
		defer cancel()
		if aerr := b.t.buffered.Acquire(ctx, int64(n)); aerr != nil {
			return 0, fmt.Errorf("%w: no room for %d more bytes of a request body within %v (bodies being read are bounded to %d bytes)", ErrBusy, n, b.t.cfg.BodyTimeout, b.t.cfg.MaxBuffered)
		}
	}
	b.held += int64(n)
	return n, err
}

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
	s.t.buffered.Release(s.held)
	s.held = 0
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
