package integration

// The attacks of the hostile suite (issue 20): what a stranger without a
// certificate, a client with a worker certificate, or a certificate that
// merely carries a node's name can send to a cluster. Each is a function
// the short tests (hostile_test.go, in `go test ./...`) and the long
// suite (hostile_suite_test.go, build tag hostile, `make hostile`) both
// run; hostile_checks_test.go holds what they measure while an attack
// runs and what they check after it.
//
// Attacker traffic leaves from its own source address (strangerIP, a
// second loopback address: "a stranger on another host"), so that a
// defence by source address can tell it from the nodes and the probes,
// which use 127.0.0.1; sameHostIP runs the same attack from the address
// everyone else uses.

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	strangerIP = net.IPv4(127, 0, 0, 2)
	sameHostIP = net.IPv4(127, 0, 0, 1)
)

// clientHelloStart is the first 3 bytes of a TLS ClientHello record
// (handshake, TLS 1.0 record version): enough to look like a handshake
// starting, never enough to finish one.
var clientHelloStart = []byte{0x16, 0x03, 0x01}

// floodStats counts what a flood achieved, from the attacker's side.
type floodStats struct {
	dials      atomic.Int64 // TCP connections opened
	dialErrs   atomic.Int64 // dials refused, timed out, or (handshake flood) handshakes that failed
	handshakes atomic.Int64 // TLS handshakes completed (handshake flood)
	open       atomic.Int64
	maxOpen    atomic.Int64 // connections open at once, at most
}

func (s *floodStats) opened() {
	n := s.open.Add(1)
	for {
		m := s.maxOpen.Load()
		if n <= m || s.maxOpen.CompareAndSwap(m, n) {
			return
		}
	}
}

func (s *floodStats) closed() { s.open.Add(-1) }

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// holdUntilClosed keeps c open until the other side closes it (or
// resets it, or ctx ends), reading and dropping whatever arrives.
func holdUntilClosed(ctx context.Context, c net.Conn) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			break
		}
	}
	c.Close()
}

// attackDialer dials from the attacker's source address.
func attackDialer(from net.IP) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 2 * time.Second}
}

// preHandshakeFlood (attack 1) keeps conns TCP connections from `from`
// to target that never finish a TLS handshake: half send nothing, half
// the first 3 bytes of a ClientHello. Each is reopened as soon as the
// node closes it; a dial that fails is retried after 10 ms (a refused
// dial costs the node nothing, and retrying it in a tight loop would
// only burn this machine's CPU, which the nodes share). It runs until ctx
// ends.
func preHandshakeFlood(ctx context.Context, from net.IP, target string, conns int) *floodStats {
	d := attackDialer(from)
	return flood(ctx, conns, func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", target) },
		func(st *floodStats, k int, c net.Conn) {
			if k%2 == 1 {
				_, _ = c.Write(clientHelloStart)
			}
			holdUntilClosed(ctx, c)
		})
}

// handshakeFlood (attack 2) runs workers goroutines that each complete
// TLS handshakes (ALPN h2) with tc's certificate from `from` to target,
// over and over: the even ones hold each connection until the node
// closes it (they never send the HTTP/2 preface), the odd ones drop it
// at once and dial again. A failed dial or handshake is retried after
// 10 ms. It runs until ctx ends.
func handshakeFlood(ctx context.Context, from net.IP, target string, tc *tls.Config, workers int) *floodStats {
	tc = tc.Clone()
	tc.NextProtos = []string{"h2"}
	d := &tls.Dialer{NetDialer: attackDialer(from), Config: tc}
	return flood(ctx, workers, func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", target) },
		func(st *floodStats, k int, c net.Conn) {
			st.handshakes.Add(1)
			if k%2 == 0 {
				holdUntilClosed(ctx, c)
			} else {
				c.Close()
			}
		})
}

// flood runs workers goroutines until ctx ends, each dialling with dial
// over and over (a failed dial retried after 10 ms) and handing each
// connection to use, worker k's with k; it counts dials and open
// connections.
func flood(ctx context.Context, workers int, dial func(context.Context) (net.Conn, error), use func(st *floodStats, k int, c net.Conn)) *floodStats {
	st := &floodStats{}
	var wg sync.WaitGroup
	for k := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := dial(ctx)
				if err != nil {
					if ctx.Err() == nil {
						st.dialErrs.Add(1)
					}
					sleepCtx(ctx, 10*time.Millisecond)
					continue
				}
				st.dials.Add(1)
				st.opened()
				use(st, k, c)
				st.closed()
			}
		})
	}
	wg.Wait()
	return st
}

// ---- oversized bodies (attack 4) ----

// bodyVariant is one way to send an oversized body.
type bodyVariant struct {
	name    string
	h2      bool // HTTP/2 (else HTTP/1.1 over a raw TLS connection)
	chunked bool // no Content-Length: HTTP/1.1 chunked, or an HTTP/2 body of unknown length
	// afterUpload: the reply is read once the upload ended (sent whole,
	// or its write failed), as a simple client does; else it is read
	// while the body goes out.
	afterUpload bool
}

var bodyVariants = []bodyVariant{
	{name: "HTTP/1.1 Content-Length"},
	{name: "HTTP/1.1 C-L, read after", afterUpload: true},
	{name: "HTTP/1.1 chunked", chunked: true},
	{name: "HTTP/2 Content-Length", h2: true},
	{name: "HTTP/2 no length", h2: true, chunked: true},
}

// bodyResult is what the attacker saw of one oversized request.
type bodyResult struct {
	variant   bodyVariant
	status    int           // the reply's HTTP status (0: none arrived)
	body      string        // the reply's body, as much as arrived
	complete  bool          // the whole reply arrived (its body read to its end without error)
	replyErr  error         // why no reply, or why its body ended early
	replyIn   time.Duration // from the first byte sent to the reply's status line (or the failure)
	sentFirst int64         // body bytes the kernel had taken when the reply's status arrived
	sent      int64         // body bytes the kernel took in all
}

// replied records the reply (or err, none arrived) that came in after
// in, when the kernel had taken sentFirst body bytes, and reads its body
// to its end.
func (res *bodyResult) replied(resp *http.Response, err error, in time.Duration, sentFirst int64) {
	res.replyIn, res.sentFirst = in, sentFirst
	if err != nil {
		res.replyErr = fmt.Errorf("no reply: %w", err)
		return
	}
	res.status = resp.StatusCode
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	res.body = string(b)
	res.complete = err == nil
	if err != nil {
		res.replyErr = fmt.Errorf("reply body cut after %d bytes: %w", len(b), err)
	}
}

// countingZeros is a reader of zero bytes counting what was read.
type countingZeros struct {
	left int64
	n    *atomic.Int64
}

func (z *countingZeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > z.left {
		p = p[:z.left]
	}
	clear(p)
	z.left -= int64(len(p))
	z.n.Add(int64(len(p)))
	return len(p), nil
}

// oversizedBody sends one binary Submit of size body bytes (zeros) to
// addr with tc's certificate, the reply read concurrently with the
// upload, and reports how the node answered. limit bounds the whole
// exchange.
func oversizedBody(v bodyVariant, addr string, tc *tls.Config, size int64, limit time.Duration) bodyResult {
	if v.h2 {
		return oversizedBodyH2(v, addr, tc, size, limit)
	}
	return oversizedBodyH1(v, addr, tc, size, limit)
}

func oversizedBodyH1(v bodyVariant, addr string, tc *tls.Config, size int64, limit time.Duration) bodyResult {
	res := bodyResult{variant: v}
	tc = tc.Clone()
	tc.NextProtos = []string{"http/1.1"}
	t0 := time.Now()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, tc)
	if err != nil {
		res.replyErr = fmt.Errorf("dial: %w", err)
		return res
	}
	defer conn.Close()
	_ = conn.SetDeadline(t0.Add(limit))
	var sent atomic.Int64
	framing := "Content-Length: " + strconv.FormatInt(size, 10)
	if v.chunked {
		framing = "Transfer-Encoding: chunked"
	}
	head := "POST /xce.v1.Xce/Submit HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/proto\r\n" + framing + "\r\n\r\n"
	stop := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		chunk := make([]byte, 64<<10)
		for left := size; left > 0; {
			select {
			case <-stop:
				return
			default:
			}
			n := min(int64(len(chunk)), left)
			var err error
			if v.chunked {
				_, err = fmt.Fprintf(conn, "%x\r\n", n)
				if err == nil {
					_, err = conn.Write(chunk[:n])
				}
				if err == nil {
					_, err = io.WriteString(conn, "\r\n")
				}
			} else {
				_, err = conn.Write(chunk[:n])
			}
			if err != nil {
				return
			}
			sent.Add(n)
			left -= n
		}
		if v.chunked {
			_, _ = io.WriteString(conn, "0\r\n\r\n")
		}
	}()
	if v.afterUpload {
		<-wrote
	}
	br := bufio.NewReader(conn)
	req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/xce.v1.Xce/Submit", nil)
	resp, err := http.ReadResponse(br, req)
	res.replied(resp, err, time.Since(t0), sent.Load())
	close(stop)
	conn.Close()
	<-wrote
	res.sent = sent.Load()
	return res
}

func oversizedBodyH2(v bodyVariant, addr string, tc *tls.Config, size int64, limit time.Duration) bodyResult {
	res := bodyResult{variant: v}
	tc = tc.Clone()
	tc.NextProtos = []string{"h2"}
	var protos http.Protocols
	protos.SetHTTP2(true)
	tr := &http.Transport{TLSClientConfig: tc, Protocols: &protos, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var sent atomic.Int64
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/xce.v1.Xce/Submit", &countingZeros{left: size, n: &sent})
	if err != nil {
		res.replyErr = err
		return res
	}
	req.Header.Set("Content-Type", "application/proto")
	req.ContentLength = size
	if v.chunked {
		req.ContentLength = -1
	}
	t0 := time.Now()
	resp, err := tr.RoundTrip(req)
	res.replied(resp, err, time.Since(t0), sent.Load())
	cancel()
	res.sent = sent.Load()
	return res
}

// ---- JSON over HTTP (attack 5) ----

// jsonCall POSTs body as Connect JSON to method on addr with tc's
// certificate over HTTP/2, accepting no compressed answer, and returns
// the reply's status and body.
func jsonCall(ctx context.Context, addr string, tc *tls.Config, method, body string) (int, []byte, error) {
	tc = tc.Clone()
	tc.NextProtos = []string{"h2"}
	var protos http.Protocols
	protos.SetHTTP2(true)
	tr := &http.Transport{TLSClientConfig: tc, Protocols: &protos, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/xce.v1.Xce/"+method, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	// No compression, as curl without --compressed: the answer's size is
	// then its JSON's size.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, b, fmt.Errorf("reading the %s reply: %w", method, err)
	}
	return resp.StatusCode, b, nil
}
