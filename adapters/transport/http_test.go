package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"xce/adapters/tlsconf"
	"xce/schema"
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
