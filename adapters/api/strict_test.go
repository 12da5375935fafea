package api_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/schemaconnect"
)

// httpClient is a plain HTTP client of c's nodes as cn, over proto ("h2"
// or "http/1.1").
func httpClient(t *testing.T, c *cluster, cn, proto string) *http.Client {
	t.Helper()
	listening(t, c)
	tc := c.mats[cn].ClientConfig()
	tc.NextProtos = []string{proto}
	var protos http.Protocols
	if proto == "h2" {
		protos.SetHTTP2(true)
	} else {
		protos.SetHTTP1(true)
	}
	tr := &http.Transport{TLSClientConfig: tc, Protocols: &protos}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// post sends body to method on node 0 and returns the status and body.
func post(t *testing.T, cl *http.Client, c *cluster, method, contentType, body string) (int, string) {
	t.Helper()
	rep, err := cl.Post("https://"+c.peers[0].Addr+"/xce.v1.Xce/"+method, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Body.Close()
	b, err := io.ReadAll(rep.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rep.StatusCode, string(b)
}

// A JSON request with a field its message does not have is refused,
// invalid_argument naming the field, and never reaches the node (connect
// ignores unknown fields: a misspelt payload was a job without one);
// known fields, in either spelling, still work, and the answer is written
// in protojson (64-bit numbers as strings, every field, zero ones too).
func TestJSONUnknownFieldRefused(t *testing.T) {
	c := startCluster(t, true)
	var s seen
	c.nodes[0].set(func(r *wire.Request) *wire.Reply { s.add(r); return submitted(r) })
	for _, proto := range []string{"http/1.1", "h2"} {
		cl := httpClient(t, c, "admin", proto)
		for _, ct := range []string{"application/json", "application/json; charset=utf-8"} {
			code, body := post(t, cl, c, "Submit", ct, `{"queue":"batch","paylaod":"aGk="}`)
			var e struct{ Code, Message string }
			if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusBadRequest || e.Code != "invalid_argument" || !strings.Contains(e.Message, `"paylaod"`) {
				t.Fatalf("%s, %s: an unknown field: %d %s, want 400 invalid_argument naming \"paylaod\"", proto, ct, code, body)
			}
		}
		if n := len(s.all()); n != 0 {
			t.Fatalf("%s: %d requests with an unknown field reached the node", proto, n)
		}
		code, body := post(t, cl, c, "Submit", "application/json", `{"queue":"batch","payload":"aGk=","run_at":"5"}`)
		// The node's reply rendered as the daemon's is: the new job's id,
		// the job without its payload. protojson varies its spaces from
		// one build to the next: compared without them.
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(body)); code != http.StatusOK || err != nil || compact.String() != submitReplyJSON {
			t.Fatalf("%s: a good JSON submit: %d %s", proto, code, body)
		}
		got := s.all()
		if len(got) != 1 || string(got[0].Payload) != "hi" || got[0].RunAt != 5 || !got[0].JSON {
			t.Fatalf("%s: the node got %v", proto, got)
		}
		s = seen{}
	}
}

// submitReplyJSON is the reply of TestJSONUnknownFieldRefused's submit:
// every field written, zero ones too, so the pending job's "state" is
// there although JOB_STATE_PENDING is the enum's zero value.
const submitReplyJSON = `{"jobs":[{"id":"7","queue":"","queueId":0,"payload":"","priority":0,"state":"JOB_STATE_PENDING",` +
	`"runAt":"0","seq":"0","enqueuedAt":"0","expiresAt":"0","attempts":0,` +
	`"stamps":{"visibilityTimeoutS":0,"maxAttempts":0,"backoffBaseS":0,"deadLetterRetentionS":0},` +
	`"host":"","resource":0,"claimedAt":"0","claimExpiresAt":"0","lastError":"","diedAt":"0","pin":"","claims":0,` +
	`"claimTerm":"0","claimLsn":"0"}],"oks":[],"moved":0,"deleted":0,"lsn":"0","at":"0","more":false,"ids":["7"],"deduplicated":[]}`

// rawH2 is an HTTP/2 client connection written frame by frame, to see
// what a client that sends its body after its headers sees (as curl
// does): the server's frames of stream 1.
type rawH2 struct {
	t    *testing.T
	conn *tls.Conn
}

func dialH2(t *testing.T, addr string, mat *tlsconf.Material) *rawH2 {
	t.Helper()
	tc := mat.ClientConfig()
	tc.NextProtos = []string{"h2"}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h := &rawH2{t: t, conn: conn}
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	h.frame(0x4, 0, 0, nil) // SETTINGS
	return h
}

func (h *rawH2) frame(typ, flags byte, stream uint32, payload []byte) {
	h.t.Helper()
	hdr := make([]byte, 9, 9+len(payload))
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags
	binary.BigEndian.PutUint32(hdr[5:], stream)
	if _, err := h.conn.Write(append(hdr, payload...)); err != nil {
		h.t.Fatal(err)
	}
}

// headers sends stream 1's headers (HPACK literals, no END_STREAM).
func (h *rawH2) headers(fields ...string) {
	var block []byte
	for i := 0; i+1 < len(fields); i += 2 {
		block = append(block, 0, byte(len(fields[i])))
		block = append(block, fields[i]...)
		block = append(block, byte(len(fields[i+1])))
		block = append(block, fields[i+1]...)
	}
	h.frame(0x1, 0x4, 1, block) // HEADERS, END_HEADERS
}

// until reads frames for d: stream 1's header blocks, whether it ended
// and whether it was reset.
func (h *rawH2) until(d time.Duration) (blocks [][]byte, ended, reset bool) {
	_ = h.conn.SetReadDeadline(time.Now().Add(d))
	var hdr [9]byte
	for {
		if _, err := io.ReadFull(h.conn, hdr[:]); err != nil {
			return
		}
		p := make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
		if _, err := io.ReadFull(h.conn, p); err != nil {
			return
		}
		typ, flags, stream := hdr[3], hdr[4], binary.BigEndian.Uint32(hdr[5:])&(1<<31-1)
		switch {
		case typ == 0x4 && flags&1 == 0: // the server's SETTINGS: ack them
			h.frame(0x4, 1, 0, nil)
		case stream != 1:
		case typ == 0x3: // RST_STREAM
			reset = true
		case typ == 0x1 || typ == 0x0: // HEADERS, DATA
			if typ == 0x1 {
				blocks = append(blocks, p)
			}
			ended = ended || flags&1 != 0
		}
	}
}

// A wrong Content-Type over HTTP/2 is answered 415, as over HTTP/1.1,
// not reset: from a client that sends its body after its headers, the
// body is read before the answer goes, and the stream ends without a
// RST_STREAM (which curl reports as "Stream error in the HTTP/2 framing
// layer" instead of the 415).
func TestWrongContentTypeOverHTTP2(t *testing.T) {
	c := startCluster(t, true)
	c.nodes[0].set(submitted)
	listening(t, c)
	body := `{"queue":"batch"}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded"} {
		h := dialH2(t, c.peers[0].Addr, c.mats["admin"])
		h.headers(":method", "POST", ":scheme", "https", ":path", "/xce.v1.Xce/Submit", ":authority", c.peers[0].Addr,
			"content-type", ct, "content-length", "17")
		early, _, resetEarly := h.until(150 * time.Millisecond)
		h.frame(0x0, 0x1, 1, []byte(body)) // DATA, END_STREAM
		blocks, ended, reset := h.until(150 * time.Millisecond)
		blocks = append(early, blocks...)
		if resetEarly || reset || !ended || len(blocks) == 0 || !bytes.Contains(blocks[0], []byte("\x03415")) {
			t.Fatalf("%s over HTTP/2: reset %v (before the body: %v), ended %v, headers %q; want a 415 and no reset", ct, reset, resetEarly, ended, blocks)
		}
	}
	// HTTP/1.1 and HTTP/2 clients that send at once get 415 too.
	for _, proto := range []string{"http/1.1", "h2"} {
		if code, _ := post(t, httpClient(t, c, "admin", proto), c, "Submit", "text/plain", body); code != http.StatusUnsupportedMediaType {
			t.Fatalf("%s: a wrong Content-Type: %d, want 415", proto, code)
		}
	}
}

// The node sizes a claim's answer for the caller's encoding: a JSON call
// says so to the node (sm.JobRequest.JSON), and so does a standby that
// forwards it, in binary, to the primary (EncodingHeader); a binary call
// does not.
func TestCallersEncodingReachesThePrimary(t *testing.T) {
	c := startCluster(t, true, true)
	var s seen
	c.nodes[0].set(func(r *wire.Request) *wire.Reply { s.add(r); return submitted(r) })
	c.nodes[1].set(notPrimary(0))
	claim := `{"queue":"batch","host":"h","max":4}`
	for _, tc := range []struct {
		node int
		ct   string
		json bool
	}{{0, "application/json", true}, {1, "application/json", true}, {1, "application/json; charset=utf-8", true}} {
		cl := httpClient(t, c, "admin", "h2")
		rep, err := cl.Post("https://"+c.peers[tc.node].Addr+"/xce.v1.Xce/Claim", tc.ct, strings.NewReader(claim))
		if err != nil {
			t.Fatal(err)
		}
		rep.Body.Close()
		got := s.all()
		if rep.StatusCode != http.StatusOK || len(got) != 1 || got[0].JSON != tc.json {
			t.Fatalf("a %s claim through n%d: %s, the primary saw %v", tc.ct, tc.node, rep.Status, got)
		}
		s = seen{}
	}
	cl := newClient(t, c, client.Options{})
	for _, node := range []int{0, 1} {
		if _, _, err := client.Forward(context.Background(), cl, node, client.OnBehalf{}, &schema.ClaimRequest{Queue: "batch", Host: "h", Max: 4}, schemaconnect.XceClient.Claim); err != nil {
			t.Fatal(err)
		}
		if got := s.all(); len(got) != 1 || got[0].JSON {
			t.Fatalf("a binary claim through n%d: the primary saw %v", node, got)
		}
		s = seen{}
	}
}
