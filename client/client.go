// Package client is the Go client of an xce cluster's API (the Xce
// service of schema/api.proto, served by every controller with
// connectrpc.com/connect over mutual TLS). It is the one way xcecli,
// xce-config, the tests and the load generators talk to a cluster, and the
// one way to find the primary.
//
// How a call travels:
//
//  1. The node that last answered as primary (else --peers entry 0) is
//     used alone: its connection, kept open between calls, or a new one.
//     On a healthy cluster a call costs one HTTP/2 stream.
//  2. If no connection to it is up within HedgeDelay, it cannot be
//     reached, or it does not take the call, every other node is dialled
//     at once (hedged dials). Each dial, TLS handshake included, is
//     bounded by ConnectTimeout: a hung node (a SIGSTOPped process still
//     completes the TCP handshake in the kernel, but never answers TLS)
//     costs at most that, not the call's Timeout.
//  3. The call goes to one node at a time: the primary a NotPrimary answer
//     named, else the preferred node, else the first node in --peers order
//     whose connection is up. A standby that knows the primary forwards the
//     call itself and says so (header Xce-Primary): the client then prefers
//     that primary next time.
//  4. Once the request is written, Timeout applies: the primary answers a
//     mutation after its durable write. A mutation that was written and
//     not answered, or answered with code unknown, has an unknown outcome:
//     it is reported as ErrOutcomeUnknown and never sent again (a blind
//     retry could apply it twice), except a submit with idempotency keys,
//     which the key makes safe to repeat (Submit). A read is sent on to
//     the next node.
//
// A Worker's claims travel as messages on a Work stream instead, and
// Submit's as messages on SubmitStream streams, which the same search
// opens and reopens (see Worker and Submit).
//
// Errors: ErrOutcomeUnknown (*OutcomeUnknownError), ErrNoPrimary
// (*NoPrimaryError: nothing was applied anywhere), ErrRefusedLocally (the
// request breaks the API's limits and was sent nowhere), or a *NodeError
// carrying the node's definite answer (connect.CodeOf gives its code:
// invalid argument, failed precondition for a refused handle, ...).
package client

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/tlsconf"
)

// Defaults for the zero Options.
const (
	// DefaultConnectTimeout bounds the TCP connect and the TLS handshake to
	// one node. A healthy node completes both in milliseconds; 400 ms
	// leaves room for a loaded host while keeping a hung node's cost well
	// under the cluster's own failover time (--failure-timeout, 1.5 s by
	// default).
	DefaultConnectTimeout = 400 * time.Millisecond
	// DefaultTimeout bounds the wait for the answer to a written request,
	// which for a mutation includes the primary's durable write.
	DefaultTimeout = 5 * time.Second
	// pingAfter: a kept connection that has read nothing for this long is
	// pinged, and closed when the ping is not answered within the connect
	// timeout, so that a node hung since the last call is noticed before
	// a call is written to it, in most cases.
	pingAfter = time.Second
)

// Headers of the API beyond Connect's own.
const (
	// PrimaryHeader: on a reply forwarded by a standby, the name of the
	// primary that answered.
	PrimaryHeader = "Xce-Primary"
	// OnBehalfHeader: on a call a standby forwards, the common name of the
	// certificate that made it, and OnBehalfRoleHeader the role that
	// standby gave it. The primary believes them only from a node's own
	// certificate (a name in --peers, issued for serverAuth and
	// clientAuth), and never for an admin operation.
	OnBehalfHeader     = "Xce-On-Behalf-Of"
	OnBehalfRoleHeader = "Xce-On-Behalf-Role"
	// EncodingHeader "json": the answer is for a caller that reads JSON
	// (a standby forwards a JSON call in binary: OnBehalf.JSON): the node
	// sizes a claim's jobs and a list's page for JSON, smaller than
	// binary's. Anyone may send it; it only makes answers smaller.
	EncodingHeader = "Xce-Encoding"
	// StreamsHeader: on a node's ClusterStatus answer, the streaming
	// procedures it serves beyond Work, comma-separated ("SubmitStream").
	// A node of a version before them sends none, and the client calls
	// instead: a streaming request to a node without the procedure is
	// answered only once the node gives up on its body.
	StreamsHeader = "Xce-Streams"
)

// Peer is one controller of --peers: its name (its certificate's CN) and
// its host:port.
type Peer struct{ Name, Addr string }

// Options tune a Client; the zero value is the defaults.
type Options struct {
	ConnectTimeout time.Duration // 0 = DefaultConnectTimeout
	Timeout        time.Duration // 0 = DefaultTimeout
	// HedgeDelay is how long the preferred node is tried alone before the
	// others are dialled too; 0 = ConnectTimeout/4.
	HedgeDelay time.Duration
	// Header is added to every request.
	Header http.Header
	// KeyedAttempts bounds how many times a submit with idempotency keys
	// is sent while its outcome is unknown or no primary answers (0 =
	// DefaultKeyedAttempts; 1 = never repeated); KeyedRetryBase is the
	// first wait between them (0 = DefaultKeyedRetryBase), doubling.
	KeyedAttempts  int
	KeyedRetryBase time.Duration
}

// Defaults of a keyed submit's repeats: about 10 s of waits in all, a
// failover's worth (--failure-timeout 1.5 s, then an election).
const (
	DefaultKeyedAttempts  = 8
	DefaultKeyedRetryBase = 100 * time.Millisecond
	maxKeyedRetryWait     = 2 * time.Second
)

// Sentinel errors (see the package comment).
var (
	ErrOutcomeUnknown = errors.New("outcome unknown")
	ErrNoPrimary      = errors.New("no primary answered")
	ErrRefusedLocally = errors.New("refused locally")
)

// Attempt is one node passed over on the way to the answer.
type Attempt struct {
	Node string
	Err  string
}

func joinAttempts(as []Attempt) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Node + ": " + a.Err
	}
	return strings.Join(parts, "; ")
}

// NoPrimaryError: no node took the call; nothing was applied. Every
// attempt is listed.
type NoPrimaryError struct{ Attempts []Attempt }

func (e *NoPrimaryError) Error() string {
	if len(e.Attempts) == 0 {
		return ErrNoPrimary.Error() + ": no peers"
	}
	return ErrNoPrimary.Error() + " (" + e.List() + ")"
}

// Is makes errors.Is(err, ErrNoPrimary) true.
func (e *NoPrimaryError) Is(target error) bool { return target == ErrNoPrimary }

// List is "node: why; node: why; ..." in the order the attempts ended.
func (e *NoPrimaryError) List() string { return joinAttempts(e.Attempts) }

// OutcomeUnknownError: the call was written to Node and may have been
// applied there; Err is what came instead of an answer.
type OutcomeUnknownError struct {
	Node     string
	Err      error
	Attempts []Attempt // nodes passed over before Node
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("%v: %s: %v", ErrOutcomeUnknown, e.Node, e.Err)
}

// Is makes errors.Is(err, ErrOutcomeUnknown) true.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// NodeError is a node's definite answer refusing the call: nothing was
// applied. connect.CodeOf(err) is its code.
type NodeError struct {
	Node string
	Err  *connect.Error
}

func (e *NodeError) Error() string {
	return e.Node + ": " + e.Err.Message() + " (" + e.Err.Code().String() + ")"
}

func (e *NodeError) Unwrap() error { return e.Err }

// Code is the answer's code.
func (e *NodeError) Code() connect.Code { return e.Err.Code() }

// Client calls the API of the nodes of Peers. It keeps one connection per
// node it reached and remembers the last node that answered as primary.
// Safe for concurrent use.
type Client struct {
	peers []Peer
	opt   Options
	nodes []*node

	mu      sync.Mutex
	primary int  // the last node that answered as primary
	known   bool // primary is set

	submits submitPool // Submit's streams (submits.go)
}

// New is a Client of peers that authenticates with mat. It dials nothing
// until the first call.
func New(peers []Peer, mat *tlsconf.Material, opt Options) (*Client, error) {
	if mat == nil {
		return nil, errors.New("client: no TLS material")
	}
	if opt.ConnectTimeout <= 0 {
		opt.ConnectTimeout = DefaultConnectTimeout
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.KeyedAttempts <= 0 {
		opt.KeyedAttempts = DefaultKeyedAttempts
	}
	if opt.KeyedRetryBase <= 0 {
		opt.KeyedRetryBase = DefaultKeyedRetryBase
	}
	if opt.HedgeDelay <= 0 {
		opt.HedgeDelay = opt.ConnectTimeout / 4
	}
	c := &Client{peers: append([]Peer(nil), peers...), opt: opt}
	for i, p := range c.peers {
		if p.Name == "" || p.Addr == "" {
			return nil, fmt.Errorf("client: peer %d needs a name and an address", i)
		}
		c.nodes = append(c.nodes, newNode(p, mat, opt))
	}
	return c, nil
}

// Peers is the client's node list.
func (c *Client) Peers() []Peer { return append([]Peer(nil), c.peers...) }

// Primary is the last node that answered as primary, if any.
func (c *Client) Primary() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.primary, c.known
}

func (c *Client) setPrimary(i int) {
	c.mu.Lock()
	c.primary, c.known = i, true
	c.mu.Unlock()
}

// indexOf is the index of the peer named name, or -1.
func (c *Client) indexOf(name string) int {
	for i, p := range c.peers {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// Close closes every kept connection; calls in progress fail. The Client
// must not be used afterwards.
func (c *Client) Close() error {
	c.submits.close()
	for _, n := range c.nodes {
		n.close()
	}
	return nil
}
