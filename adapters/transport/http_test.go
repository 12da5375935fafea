package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/schema"
)

// cnHandler answers every request with the verified client certificate's
// CN and the protocol it came over.
var cnHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "%s %s", tlsconf.PeerCN(*r.TLS), r.Proto)
})

// apiClient is an HTTP client of the API side with mat, speaking proto
// ("h2" or "http/1.1"; "" is HTTP/1.1 without asking for it in ALPN); it
// keeps its connections until CloseIdleConnections.
func apiClient(t testing.TB, mat *tlsconf.Material, proto string) *http.Client {
	t.Helper()
	tc := mat.ClientConfig()
	if proto != "" {
		tc.NextProtos = []string{proto}
	}
	var protos http.Protocols
	if proto == "h2" {
		protos.SetHTTP2(true)
	} else {
		protos.SetHTTP1(true)
	}
	tr := &http.Transport{TLSClientConfig: tc, Protocols: &protos, ForceAttemptHTTP2: proto == "h2"}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 3 * time.Second}
}

func apiGet(cl *http.Client, addr string) (string, error) {
	rep, err := cl.Get("https://" + addr + "/x")
	if err != nil {
		return "", err
	}
	defer rep.Body.Close()
	b, err := io.ReadAll(rep.Body)
	if err == nil && rep.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %s", rep.Status)
	}
	return string(b), err
}

// ALPN h2 or http/1.1 goes to the HTTP handler with the verified client
// certificate, and so does HTTP/1.1 without ALPN; no ALPN and a first
// byte of 0 is the peer protocol, whose CLIENT hello is gone;
// a transport without a handler, or a certificate of another CA, gets
// nothing.
func TestAPIConnections(t *testing.T) {
	pk, evil := certs(t)
	peers := peersOf(freeAddrs(t, 2))
	a := start(t, 0, peers, pk.mats["n0"], func(c *Config) { c.HTTP = cnHandler })
	b := start(t, 1, peers, pk.mats["n1"], nil) // no handler
	for _, proto := range []string{"h2", "http/1.1", ""} {
		var got string
		if !eventually(3*time.Second, func() bool {
			var err error
			got, err = apiGet(apiClient(t, pk.mats["operator"], proto), peers[0].Addr)
			return err == nil
		}) {
			t.Fatalf("%s: cannot reach the API", proto)
		}
		want := map[string]string{"h2": "operator HTTP/2.0", "http/1.1": "operator HTTP/1.1", "": "operator HTTP/1.1"}[proto]
		if got != want {
			t.Fatalf("%s: handler saw %q, want %q", proto, got, want)
		}
	}

	c := rawDial(t, peers[0].Addr, pk.mats["operator"], &schema.Hello{Kind: schema.Hello_CLIENT, Name: "op"})
	expectClosed(t, c)
	a.log.wait(t, "clients use the API")

	if got, err := apiGet(apiClient(t, pk.mats["operator"], "h2"), peers[1].Addr); err == nil {
		t.Fatalf("a transport without a handler answered %q", got)
	}
	_ = b
	if got, err := apiGet(apiClient(t, evil.mats["operator"], "h2"), peers[0].Addr); err == nil {
		t.Fatalf("a certificate of another CA got %q", got)
	}
	a.log.wait(t, "tls handshake")
}

// API connections count against MaxConnsPerClient; an idle one is closed
// after IdleTimeout; a request body that stalls is cut after BodyTimeout;
// the bodies being read are bounded in total (MaxBuffered).
func TestAPIConnectionLimits(t *testing.T) {
	pk, _ := certs(t)
	peers := peersOf(freeAddrs(t, 1))
	a := start(t, 0, peers, pk.mats["n0"], func(c *Config) {
		c.HTTP = cnHandler
		c.IdleTimeout = 1500 * time.Millisecond
		c.BodyTimeout = 300 * time.Millisecond
		c.MaxConnsPerClient = 2
		c.MaxBuffered = 64 << 10
	})
	addr := peers[0].Addr
	dial := func() *tls.Conn {
		t.Helper()
		tc := pk.mats["operator"].ClientConfig()
		tc.NextProtos = []string{"http/1.1"}
		var c *tls.Conn
		if !eventually(3*time.Second, func() bool {
			var err error
			c, err = tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, tc)
			return err == nil
		}) {
			t.Fatal("cannot connect")
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	post := func(c *tls.Conn, n int, body string) {
		t.Helper()
		if _, err := fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", n, body); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("idle", func(t *testing.T) {
		c := dial()
		start := time.Now()
		expectClosed(t, c) // never a request: closed after the header timeout
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a connection without a request was closed after %v, want the 300 ms header timeout", d)
		}
		c = dial()
		post(c, 0, "")
		if rep, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || rep.StatusCode != http.StatusOK {
			t.Fatalf("request: %v, %v", rep, err)
		}
		start = time.Now()
		expectClosed(t, c)
		if d := time.Since(start); d < time.Second || d > 4*time.Second {
			t.Fatalf("idle connection closed after %v, want the 1.5 s idle timeout", d)
		}
	})
	t.Run("stalled body", func(t *testing.T) {
		c := dial()
		start := time.Now()
		post(c, 1000, "abc")
		expectClosed(t, c)
		if d := time.Since(start); d > 1200*time.Millisecond {
			t.Fatalf("a stalled body held its connection %v, past the 300 ms body timeout", d)
		}
	})
	t.Run("buffered bytes", func(t *testing.T) {
		// A body larger than the whole budget cannot be read: the
		// handler's read fails busy after the body timeout.
		c := dial()
		big := strings.Repeat("x", 128<<10)
		post(c, len(big), big)
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		b, _ := io.ReadAll(c)
		if !strings.Contains(string(b), "busy") {
			t.Fatalf("a body over the budget: %q, want the handler's read to fail busy", b)
		}
		if !a.tr.buffered.TryAcquire(64 << 10) {
			t.Fatal("the budget was not released when the handler returned")
		}
		a.tr.buffered.Release(64 << 10)
	})
	t.Run("per client", func(t *testing.T) {
		open := []*tls.Conn{dial(), dial()}
		time.Sleep(50 * time.Millisecond)
		c := dial()
		expectClosed(t, c)
		a.log.wait(t, "max 2 per client")
		for _, o := range open {
			o.Close()
		}
	})
}

// Close cuts the API connections too, and leaves no goroutine behind
// (checked with the others by TestCloseLeavesNoGoroutine).
func apiConnected(t *testing.T, addr string, mat *tlsconf.Material) *http.Client {
	t.Helper()
	cl := apiClient(t, mat, "h2")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if _, err := apiGet(cl, addr); err == nil {
			return cl
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("cannot reach the API")
	return nil
}

// streamHandler reads its body as a stream of size-byte messages, one at
// a time (Stream.Received, a one-byte answer "k", Stream.Answered),
// until the body ends; a failed read is answered "E" and the error. A
// message that begins with "s" takes serve to answer (a long poll).
func streamHandler(size int, serve time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st := StreamOf(r.Body)
		rc := http.NewResponseController(w)
		w.WriteHeader(http.StatusOK)
		_ = rc.Flush()
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(r.Body, buf); err != nil {
				if err != io.EOF {
					fmt.Fprintf(w, "E%v\n", err)
				}
				return
			}
			if err := st.Received(); err != nil {
				fmt.Fprintf(w, "E%v\n", err)
				return
			}
			if buf[0] == 's' {
				time.Sleep(serve)
			}
			_, _ = w.Write([]byte("k"))
			_ = rc.Flush()
			if err := st.Answered(); err != nil {
				fmt.Fprintf(w, "E%v\n", err)
				return
			}
		}
	}
}

// testStream is one streaming request to streamHandler.
type testStream struct {
	body *io.PipeWriter
	rd   *bufio.Reader
}

func openStream(t *testing.T, cl *http.Client, addr string) *testStream {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, "https://"+addr+"/stream", pr)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// A stream that is never closed fails the test instead of hanging it.
	cut := time.AfterFunc(6*time.Second, func() { rep.Body.Close() })
	t.Cleanup(func() { cut.Stop(); pw.Close(); rep.Body.Close() })
	return &testStream{body: pw, rd: bufio.NewReader(rep.Body)}
}

// exchange sends msg and reads its answer ("k", or the handler's error).
func (s *testStream) exchange(msg []byte) string {
	if _, err := s.body.Write(msg); err != nil {
		return "write: " + err.Error()
	}
	return s.answer()
}

func (s *testStream) answer() string {
	b, err := s.rd.ReadByte()
	if err != nil {
		return "read: " + err.Error()
	}
	if b == 'E' {
		line, _ := s.rd.ReadString('\n')
		return "E" + line
	}
	return string(b)
}

// A stream's limits are per message: one that keeps sending outlives
// BodyTimeout; one that sends more than MaxBuffered in all, in small
// messages, holds only the message being read, and another caller's body
// gets its room at once; one silent past IdleTimeout is closed, and so is
// one whose message stalls past BodyTimeout. A request body that does
// not use Stream keeps its limits (TestAPIConnectionLimits).
func TestAPIStreams(t *testing.T) {
	pk, _ := certs(t)
	peers := peersOf(freeAddrs(t, 1))
	const size = 1 << 10
	mux := http.NewServeMux()
	mux.Handle("/stream", streamHandler(size, 700*time.Millisecond))
	mux.Handle("/x", cnHandler)
	start(t, 0, peers, pk.mats["n0"], func(c *Config) {
		c.HTTP = mux
		c.BodyTimeout = 300 * time.Millisecond
		c.IdleTimeout = 1500 * time.Millisecond
		c.MaxBuffered = 64 << 10
	})
	addr := peers[0].Addr
	apiConnected(t, addr, pk.mats["operator"])
	cl := apiClient(t, pk.mats["operator"], "h2")
	cl.Timeout = 0 // streams outlive a call's timeout
	msg := []byte(strings.Repeat("m", size))

	t.Run("outlives BodyTimeout", func(t *testing.T) {
		s := openStream(t, cl, addr)
		for k, t0 := 0, time.Now(); time.Since(t0) < 1200*time.Millisecond; k++ {
			if got := s.exchange(msg); got != "k" {
				t.Fatalf("message %d, %v into the stream: %q", k, time.Since(t0), got)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("more than MaxBuffered", func(t *testing.T) {
		s := openStream(t, cl, addr)
		for k := range 256 { // 256 KiB, four times the budget
			if got := s.exchange(msg); got != "k" {
				t.Fatalf("message %d: %q", k, got)
			}
		}
		// The stream is open and holds nothing: a body of 3/4 of the
		// budget is read at once (not after a wait of BodyTimeout).
		other := apiClient(t, pk.mats["operator"], "h2")
		t0 := time.Now()
		rep, err := other.Post("https://"+addr+"/x", "application/octet-stream", strings.NewReader(strings.Repeat("x", 48<<10)))
		if err != nil {
			t.Fatal(err)
		}
		rep.Body.Close()
		if rep.StatusCode != http.StatusOK || time.Since(t0) > 250*time.Millisecond {
			t.Fatalf("another caller's body while the stream is open: %s after %v", rep.Status, time.Since(t0))
		}
		if got := s.exchange(msg); got != "k" {
			t.Fatalf("the stream after the other caller: %q", got)
		}
	})
	t.Run("served longer than BodyTimeout", func(t *testing.T) {
		s := openStream(t, cl, addr)
		slow := []byte("s" + strings.Repeat("m", size-1))
		for k, m := range [][]byte{slow, msg, slow, msg} {
			if got := s.exchange(m); got != "k" {
				t.Fatalf("message %d: %q", k, got)
			}
		}
	})
	t.Run("silent", func(t *testing.T) {
		s := openStream(t, cl, addr)
		if got := s.exchange(msg); got != "k" {
			t.Fatal(got)
		}
		t0 := time.Now()
		got := s.answer()
		if d := time.Since(t0); !strings.Contains(got, "i/o timeout") || d < time.Second || d > 4*time.Second {
			t.Fatalf("a silent stream: %q after %v, want closed after the 1.5 s IdleTimeout", got, d)
		}
	})
	t.Run("stalled message", func(t *testing.T) {
		s := openStream(t, cl, addr)
		if got := s.exchange(msg); got != "k" {
			t.Fatal(got)
		}
		t0 := time.Now()
		got := s.exchange(msg[:size/2])
		if d := time.Since(t0); !strings.Contains(got, "i/o timeout") || d > time.Second {
			t.Fatalf("a message stalled halfway: %q after %v, want closed after the 300 ms BodyTimeout", got, d)
		}
	})
}

// One connection's bodies hold at most connShare of the budget, however
// many streams it opens (HTTP/2: hundreds per connection), so the rest
// stays for other connections; a body announced over its limit is
// refused unread, and over HTTP/1.1 the answer arrives whole and the
// connection closes.
func TestAPIBodyShares(t *testing.T) {
	pk, _ := certs(t)
	peers := peersOf(freeAddrs(t, 1))
	a := start(t, 0, peers, pk.mats["n0"], func(c *Config) { c.HTTP = cnHandler })
	addr := peers[0].Addr
	cl := apiConnected(t, addr, pk.mats["operator"])
	cl.Timeout = 0

	// 8 streams on one connection, each stalling after 1.5 MiB: 12 MiB
	// sent, at most connShare (8 MiB) held.
	const streams, each = 8, 3 << 19
	stallBodies(t, cl, addr, streams, each)
	if most, share := mostHeld(a.tr), a.tr.connShare(); most > share || most < share/2 {
		t.Fatalf("one connection's bodies held %d bytes at most, want about its share, %d (of %d sent)", most, share, streams*each)
	}
	// Another connection's body is read at once meanwhile.
	postsAtOnce(t, pk.mats["operator"], addr, "another connection's")

	// Announced over DefaultMaxBody: refused before it is read, the
	// answer whole, the connection closed.
	tc := pk.mats["operator"].ClientConfig()
	tc.NextProtos = []string{"http/1.1"}
	c, err := tls.Dial("tcp", addr, tc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t0 := time.Now()
	fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", DefaultMaxBody+1)
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil || !r.Close || !strings.Contains(string(b), "request body too large") || time.Since(t0) > 300*time.Millisecond {
		t.Fatalf("a body announced over the limit: %s %q (%v), close %v, after %v", r.Status, b, err, r.Close, time.Since(t0))
	}
}

// One client certificate's bodies hold at most its share (cnShare) over
// all its connections (issue 20: one certificate may not take more than
// its share): four connections of one certificate, four streams each,
// each body stalling after 1.5 MiB (24 MiB sent, 6 MiB a connection,
// within its own share), hold at most 16 MiB of the 64 MiB budget, and
// another certificate's body is read at once meanwhile.
func TestAPIBodySharePerCertificate(t *testing.T) {
	pk, _ := certs(t)
	peers := peersOf(freeAddrs(t, 1))
	a := start(t, 0, peers, pk.mats["n0"], func(c *Config) { c.HTTP = cnHandler })
	addr := peers[0].Addr
	const conns, streams, each = 4, 4, 3 << 19
	for range conns {
		cl := apiConnected(t, addr, pk.mats["operator"]) // a connection of its own each
		cl.Timeout = 0
		stallBodies(t, cl, addr, streams, each)
	}
	if most, share := mostHeld(a.tr), a.tr.cnShare(); most > share || most < share/2 {
		t.Fatalf("one certificate's bodies held %d bytes at most, want about its share, %d (of %d sent on %d connections)", most, share, conns*streams*each, conns)
	}
	postsAtOnce(t, pk.mats["n1-client"], addr, "another certificate's")
}

// stallBodies sends streams bodies of each bytes on cl to addr that never
// end (each stalls once its bytes are written); they are cut when the
// test ends.
func stallBodies(t *testing.T, cl *http.Client, addr string, streams, each int) {
	t.Helper()
	var writers []*io.PipeWriter
	done := make(chan struct{}, streams)
	for range streams {
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		go func() {
			defer func() { done <- struct{}{} }()
			// t.Context ends all of them at once, before any cleanup:
			// one ended alone may wait for the share the others hold.
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+addr+"/x", pr)
			if rep, err := cl.Do(req); err == nil {
				rep.Body.Close()
			}
		}()
		go func() { _, _ = pw.Write(make([]byte, each)) }()
	}
	t.Cleanup(func() {
		for _, pw := range writers {
			pw.CloseWithError(errors.New("test over"))
		}
		for range streams {
			<-done
		}
	})
}

// mostHeld is the most the API bodies held of tr's budget over a second,
// by what was left of it.
func mostHeld(tr *Transport) int64 {
	held := func() int64 {
		for free := tr.cfg.MaxBuffered; free > 0; free -= 64 << 10 {
			if tr.buffered.TryAcquire(free) {
				tr.buffered.Release(free)
				return tr.cfg.MaxBuffered - free
			}
		}
		return tr.cfg.MaxBuffered
	}
	var most int64
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		most = max(most, held())
	}
	return most
}

// postsAtOnce: a 1 MiB body from mat's certificate on a new connection is
// read and answered within 500 ms.
func postsAtOnce(t *testing.T, mat *tlsconf.Material, addr, who string) {
	t.Helper()
	cl := apiClient(t, mat, "h2")
	t0 := time.Now()
	rep, err := cl.Post("https://"+addr+"/x", "application/octet-stream", strings.NewReader(strings.Repeat("x", 1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	rep.Body.Close()
	if rep.StatusCode != http.StatusOK || time.Since(t0) > 500*time.Millisecond {
		t.Fatalf("%s body: %s after %v", who, rep.Status, time.Since(t0))
	}
}
