package transport

import (
	"context"
	"crypto/tls"
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
	if n >= t.cfg.MaxConnsPerClient {
		t.mu.Unlock()
		t.logf("from %s: refusing client %q: %d connections open (max %d per client)", remote, tlsconf.SanitizeCN(cn), n, t.cfg.MaxConnsPerClient)
		return
	}
	t.perCN[cn] = n + 1
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
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
// (ErrBusy), and what a handler read is released when it returns.
func (t *Transport) budget(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			r.TLS, _ = r.Context().Value(tlsStateKey{}).(*tls.ConnectionState)
		}
		b := &budgetBody{ReadCloser: r.Body, t: t, ctx: r.Context(), deadline: time.Now().Add(t.cfg.BodyTimeout)}
		defer func() { t.buffered.Release(b.held) }()
		r.Body = b
		h.ServeHTTP(w, r)
	})
}

type budgetBody struct {
	io.ReadCloser
	t        *Transport
	ctx      context.Context
	deadline time.Time
	held     int64 // bytes acquired from t.buffered
}

func (b *budgetBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
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
