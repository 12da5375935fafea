package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/schemaconnect"
	"github.com/xce-hpc/xce/sm"
)

// node is the kept connection to one controller: HTTP/2 over mutual TLS,
// the server's certificate pinned to the peer's name.
type node struct {
	peer Peer
	tr   *http.Transport
	hdr  http.Header

	mu     sync.Mutex
	conn   *conn // nil: none up
	closed bool
}

// conn is one HTTP/2 connection and the API client over it.
type conn struct {
	cc  *http.ClientConn
	api schemaconnect.XceClient
	// streams: the streaming procedures beyond Work the node announced
	// when the connection was confirmed (StreamsHeader).
	streams []string
}

// serves: the node announced procedure p.
func (c *conn) serves(p string) bool { return slices.Contains(c.streams, p) }

func newNode(p Peer, mat *tlsconf.Material, opt Options) *node {
	tc := mat.ClientConfigFor(p.Name)
	tc.NextProtos = []string{"h2"}
	var protos http.Protocols
	protos.SetHTTP2(true)
	return &node{peer: p, hdr: opt.Header, tr: &http.Transport{
		TLSClientConfig:   tc,
		Protocols:         &protos,
		ForceAttemptHTTP2: true,
		DialContext:       (&net.Dialer{}).DialContext, // bounded by the dial's context
		HTTP2:             &http.HTTP2Config{SendPingTimeout: pingAfter, PingTimeout: opt.ConnectTimeout},
	}}
}

// up is the kept connection if it is still usable: not failed, and not
// told to go away (the node closes a connection idle for its idle
// timeout with a GOAWAY: it then takes nothing new, and has nothing in
// flight).
func (n *node) up() *conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn != nil && (n.conn.cc.Err() != nil || n.conn.cc.Available() == 0 && n.conn.cc.InFlight() == 0) {
		n.conn.cc.Close()
		n.conn = nil
	}
	return n.conn
}

// dial opens a connection (ctx bounds the TCP connect and the TLS
// handshake) and keeps it, unless another one came up meanwhile: then
// that one is used.
func (n *node) dial(ctx context.Context) (*conn, error) {
	if c := n.up(); c != nil {
		return c, nil
	}
	cc, err := n.tr.NewClientConn(ctx, "https", n.peer.Addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", n.peer.Addr, err)
	}
	c := &conn{cc: cc}
	c.api = schemaconnect.NewXceClient(doer{cc: cc, hdr: n.hdr}, "https://"+n.peer.Addr, connect.WithReadMaxBytes(MaxJSONMessageBytes))
	// In TLS 1.3 a node that refuses our certificate says so only after our
	// side of the handshake, so a request written first would have an
	// unknown outcome although it was never read. One node-local call
	// confirms the connection before any request goes on it: any answer
	// of the node's (even a refusal) means it accepted us. It asks for no
	// queue depths: the answer is the published status, with no look at
	// the node's event loop (a busy loop must not fail new connections).
	st, err := c.api.ClusterStatus(ctx, connect.NewRequest(&schema.ClusterStatusRequest{}))
	if err != nil && !connect.IsWireError(err) {
		cc.Close()
		return nil, fmt.Errorf("dial %s: the node did not accept the connection: %w", n.peer.Addr, err)
	}
	announced := ""
	if ce := new(connect.Error); errors.As(err, &ce) {
		announced = ce.Meta().Get(StreamsHeader) // a refusal announces them too
	} else if err == nil {
		announced = st.Header().Get(StreamsHeader)
	}
	c.streams = strings.Split(announced, ",")
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.closed:
		cc.Close()
		return nil, errors.New("client closed")
	case n.conn != nil && n.conn.cc.Err() == nil:
		cc.Close()
		return n.conn, nil
	}
	n.conn = c
	return c, nil
}

// drop forgets c after a failure on it (the next call dials anew) and
// closes it once the calls still on it have ended: closing it at once
// would fail them, and with them calls whose answers were on the way.
func (n *node) drop(c *conn) {
	n.mu.Lock()
	if n.conn == c {
		n.conn = nil
	}
	n.mu.Unlock()
	c.cc.SetStateHook(func(cc *http.ClientConn) {
		if cc.InFlight() == 0 {
			cc.Close()
		}
	})
}

func (n *node) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.conn != nil {
		n.conn.cc.Close()
		n.conn = nil
	}
}

// MaxMessageBytes bounds every request and reply of the API in binary
// protobuf, as it bounds every peer frame: the largest log record and
// room around it. The server refuses a larger request; the client does
// not send one (checkSize).
const MaxMessageBytes = sm.MaxFrameSize

// MaxJSONMessageBytes bounds every request and reply of the API in JSON
// (larger: bytes in base64, strings escaped): the JSON of the largest
// request, and a claim or list page sized for a JSON caller (sm's
// ClaimReplyBudgetJSON) with room around it. The client reads replies
// up to it: a standby forwards a JSON caller's call, in binary, and its
// answer is sized for JSON.
const MaxJSONMessageBytes = sm.MaxJSONFrameSize

// doer sends every request on one connection, with the client's headers.
type doer struct {
	cc  *http.ClientConn
	hdr http.Header
}

func (d doer) Do(r *http.Request) (*http.Response, error) {
	for k, vs := range d.hdr {
		r.Header[k] = vs
	}
	wrapStreamBody(r)
	return d.cc.RoundTrip(r)
}
