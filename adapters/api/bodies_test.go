package api_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/transport"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/schemaconnect"
)

const hugeBody = 100 << 20

// sendHuge writes a Submit of hugeBody bytes to addr over HTTP/1.1 as
// cn, announced by its Content-Length or chunked, writing until the node
// stops reading, and returns its answer whole (its status, headers and
// body) and how long it took to arrive from the first byte sent.
func sendHuge(t *testing.T, c *cluster, cn string, chunked bool) (*http.Response, string, time.Duration) {
	t.Helper()
	tc := c.mats[cn].ClientConfig()
	tc.NextProtos = []string{"http/1.1"}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", c.peers[0].Addr, tc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	framing := fmt.Sprintf("Content-Length: %d", hugeBody)
	if chunked {
		framing = "Transfer-Encoding: chunked"
	}
	start := time.Now()
	if _, err := fmt.Fprintf(conn, "POST /xce.v1.Xce/Submit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s\r\n\r\n", framing); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := make(chan struct{})
	defer close(stop)
	wg.Go(func() {
		chunk := []byte(strings.Repeat("x", 64<<10))
		if chunked {
			chunk = append(fmt.Appendf(nil, "%x\r\n", len(chunk)), append(chunk, "\r\n"...)...)
		}
		for sent := 0; sent < hugeBody; sent += 64 << 10 {
			select {
			case <-stop:
				return
			default:
			}
			_ = conn.SetWriteDeadline(time.Now().Add(3 * time.Second))
			if _, err := conn.Write(chunk); err != nil {
				return // the node stopped reading
			}
		}
	})
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	rep, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a %d-byte body after %v: %v", hugeBody, time.Since(start), err)
	}
	b, err := io.ReadAll(rep.Body)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("the answer to a %d-byte body was cut after %d bytes: %v", hugeBody, len(b), err)
	}
	return rep, string(b), took
}

// A body over its limit is refused at once and never stalls others: one
// announced longer (Content-Length: 100 MiB) before any of it is read, a
// chunked one (or HTTP/2 without a length) as soon as it passes the
// limit; each answer is resource_exhausted and arrives whole (over
// HTTP/1.1, closing the connection); and
// meanwhile another worker's small Submit is not delayed (the node read
// 64 MiB of such a body, the whole budget for bodies, and every other
// request waited up to the body timeout for room).
func TestHugeBodiesRefusedAtOnce(t *testing.T) {
	c := startClusterWith(t, func(cfg *transport.Config) { cfg.BodyTimeout = 2 * time.Second }, true)
	var s seen
	c.nodes[0].set(func(r *wire.Request) *wire.Reply { s.add(r); return submitted(r) })
	listening(t, c)
	other := newClient(t, c, client.Options{})
	submit := func() time.Duration {
		t.Helper()
		start := time.Now()
		if _, _, err := client.Forward(context.Background(), other, 0, client.OnBehalf{}, &schema.SubmitRequest{Queue: "q", Payload: []byte("small")}, schemaconnect.XceClient.Submit); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	submit() // connected

	var wg sync.WaitGroup
	type result struct {
		chunked bool
		rep     *http.Response
		body    string
		took    time.Duration
	}
	results := make(chan result, 4)
	for _, chunked := range []bool{false, true, false, true} {
		wg.Go(func() {
			rep, body, took := sendHuge(t, c, "admin", chunked)
			results <- result{chunked, rep, body, took}
		})
	}
	h2 := httpClient(t, c, "admin", "h2")
	for _, length := range []int64{hugeBody, -1} { // HTTP/2, with and without a length
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPost, "https://"+c.peers[0].Addr+"/xce.v1.Xce/Submit", io.LimitReader(zeros{}, hugeBody))
			if err != nil {
				t.Error(err)
				return
			}
			req.ContentLength = length
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			rep, err := h2.Do(req)
			if err != nil {
				t.Errorf("HTTP/2, length %d: %v", length, err)
				return
			}
			defer rep.Body.Close()
			b, err := io.ReadAll(rep.Body)
			if err != nil {
				t.Errorf("HTTP/2, length %d: the answer was cut: %v", length, err)
				return
			}
			if took := time.Since(start); rep.StatusCode != http.StatusTooManyRequests || took > 500*time.Millisecond {
				t.Errorf("HTTP/2, length %d: %s %q after %v, want resource_exhausted at once", length, rep.Status, b, took)
			}
		})
	}
	time.Sleep(20 * time.Millisecond) // the bodies are being sent
	var slowest time.Duration
	for range 5 {
		slowest = max(slowest, submit())
	}
	wg.Wait()
	close(results)
	for r := range results {
		var e struct{ Code, Message string }
		if err := json.Unmarshal([]byte(r.body), &e); err != nil || r.rep.StatusCode != http.StatusTooManyRequests || e.Code != connect.CodeResourceExhausted.String() {
			t.Fatalf("chunked %v: a %d-byte body answered %s %q, want resource_exhausted whole", r.chunked, hugeBody, r.rep.Status, r.body)
		}
		if !r.rep.Close {
			t.Errorf("chunked %v: the connection is kept after a body refused unread", r.chunked)
		}
		t.Logf("chunked %v: refused after %v: %s", r.chunked, r.took, e.Message)
		if r.took > 500*time.Millisecond {
			t.Errorf("chunked %v: a %d-byte body was refused after %v, want at once", r.chunked, hugeBody, r.took)
		}
	}
	t.Logf("the slowest of 5 small submits meanwhile: %v", slowest)
	if slowest > 250*time.Millisecond {
		t.Errorf("a small submit took %v while huge bodies were sent", slowest)
	}
	for _, r := range s.all() {
		if string(r.Payload) != "small" {
			t.Fatalf("a huge body reached the node: %d bytes", len(r.Payload))
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
