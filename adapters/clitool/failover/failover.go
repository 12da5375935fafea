// Package failover sends one client request to an xce cluster's primary:
// it finds the primary, follows "not primary" redirects, passes over
// nodes that are down or hung, and tells "nothing was applied" from
// "outcome unknown". It is the one way xcecli's job, schedule and listing
// commands and xce-config push reach the cluster.
//
// How a request travels:
//
//  1. The peer that last answered as primary (else --peers entry 0) is
//     dialled alone: on a healthy cluster a request costs one connection.
//  2. If it has not completed TCP and TLS within HedgeDelay, cannot be
//     reached, or is not the primary, every other peer is dialled at once.
//     Each dial, TLS handshake included, is bounded by ConnectTimeout: a
//     hung node (a SIGSTOPped process still completes the TCP handshake in
//     the kernel, but never answers TLS) costs at most that, not the long
//     request Timeout.
//  3. The request goes to one node at a time over a connection already
//     up: the primary a redirect named, else the preferred peer, else the
//     first peer in --peers order whose connection is up. A redirect is
//     followed to any peer not tried yet.
//  4. Only once the request is written does the long Timeout apply: the
//     primary answers a mutation after its durable write. A mutation that
//     was sent and not answered has an unknown outcome: it is reported as
//     such and never sent to another node (a blind retry could apply it
//     twice). A read is sent on to the next node.
package failover

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"xce/adapters/daemon"
	"xce/adapters/tlsconf"
	"xce/adapters/transport"
	"xce/adapters/wire"
	"xce/schema"
)

// DefaultConnectTimeout bounds the TCP connect and the TLS handshake to
// one node. A healthy node completes both in milliseconds (loopback, LAN);
// 400 ms leaves room for a loaded host while keeping a hung node's cost
// well under the cluster's own failover time (--failure-timeout, 1.5 s by
// default), so a client is never slower to get past a dead primary than
// the cluster is.
const DefaultConnectTimeout = 400 * time.Millisecond

// ErrNoPrimary: no peer took the request (all down, or none primary).
// Nothing was applied.
var ErrNoPrimary = errors.New("no primary answered")

// ErrUnknownOutcome: a mutation reached a node but no answer came back (the
// connection failed after sending, the node timed out, or it lost its role
// while the request waited). It may have been applied.
var ErrUnknownOutcome = errors.New("outcome unknown")

// ErrRefusedLocally: the request cannot travel (the wire's limits or
// fields refuse it) and was sent to nobody.
var ErrRefusedLocally = errors.New("refused locally")

// Verdict is what a reply means for the search of the primary.
type Verdict int

const (
	// Done: the answer, success or a refusal of the request itself; the
	// search ends.
	Done Verdict = iota
	// Next: nothing was applied there (starting, recovering, op disabled):
	// try another peer.
	Next
	// Unknown: the request may have been applied; the search ends with
	// ErrUnknownOutcome, unless the request is read-only.
	Unknown
)

// Request is one request and how to read its replies. A "not primary"
// reply (wire.Redirect) is handled before Classify sees anything.
type Request struct {
	Msg *schema.ClientRequest
	// ReadOnly requests may be repeated on another node after a lost
	// answer: repeating them cannot apply anything twice.
	ReadOnly bool
	// AnyNode requests (the running config) are answered by standbys too,
	// so an answer does not make its node the known primary.
	AnyNode bool
	// Classify reads a reply of peer p. With Done, a non-nil error is the
	// search's result (the node's refusal); with Next or Unknown it is why
	// (nil: the reply's error text).
	Classify func(p daemon.Peer, rep *schema.ClientReply) (Verdict, error)
}

// Attempt is one peer passed over on the way to the answer.
type Attempt struct {
	Peer string
	Err  string
}

// Result is the answer and the peers passed over before it.
type Result struct {
	Peer     int    // index into Peers of the node that answered
	Name     string // its name
	Reply    *schema.ClientReply
	Attempts []Attempt
}

// NoPrimaryError: no peer took the request; every attempt is listed.
type NoPrimaryError struct{ Attempts []Attempt }

func (e *NoPrimaryError) Error() string {
	if len(e.Attempts) == 0 {
		return ErrNoPrimary.Error() + ": no peers"
	}
	return ErrNoPrimary.Error() + " (" + e.List() + ")"
}

// Is makes errors.Is(err, ErrNoPrimary) true.
func (e *NoPrimaryError) Is(target error) bool { return target == ErrNoPrimary }

// List is "peer: why; peer: why; ..." in the order the attempts ended.
func (e *NoPrimaryError) List() string { return joinAttempts(e.Attempts) }

// UnknownOutcomeError: the request was sent to Peer and may have been
// applied there; Err is what happened instead of an answer.
type UnknownOutcomeError struct {
	Peer     string
	Err      error
	Attempts []Attempt // peers passed over before Peer
}

func (e *UnknownOutcomeError) Error() string {
	return fmt.Sprintf("%v: %s: %v", ErrUnknownOutcome, e.Peer, e.Err)
}

// Is makes errors.Is(err, ErrUnknownOutcome) true.
func (e *UnknownOutcomeError) Is(target error) bool { return target == ErrUnknownOutcome }

func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

func joinAttempts(as []Attempt) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Peer + ": " + a.Err
	}
	return strings.Join(parts, "; ")
}

// Conn is one client connection to one node (a *transport.Client).
type Conn interface {
	Call(ctx context.Context, req *schema.ClientRequest) (*schema.ClientReply, error)
	Close() error
}

// DialFunc connects to addr. ctx carries the connect deadline and bounds
// the TCP connect and the TLS handshake; the connection's calls must not
// inherit it.
type DialFunc func(ctx context.Context, addr string) (Conn, error)

// Client sends requests to the primary of Peers. It remembers the last
// peer that answered as primary and tries it first next time. Safe for
// concurrent use; the fields must not change while a Call runs.
type Client struct {
	Peers []daemon.Peer
	TLS   *tlsconf.Material
	// ConnectTimeout bounds the TCP connect plus the TLS handshake to one
	// node; 0 = DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Timeout bounds the wait for the answer to a sent request, which for
	// a mutation includes the primary's durable write; 0 =
	// transport.DefaultClientTimeout.
	Timeout time.Duration
	// HedgeDelay is how long the preferred peer is dialled alone before the
	// others are dialled too; 0 = ConnectTimeout/4, so that a healthy
	// cluster sees one connection per request while a hung preferred peer
	// delays the request by a fraction of ConnectTimeout only.
	HedgeDelay time.Duration
	// Dial replaces the TLS dial (tests, other transports); nil =
	// transport.DialClient with TLS and Timeout.
	Dial DialFunc

	mu      sync.Mutex
	primary int  // the last peer that answered as primary
	known   bool // primary is set
}

// New is a Client of peers that waits timeout for each answer (0 =
// transport.DefaultClientTimeout), with the default connect timeout.
func New(peers []daemon.Peer, mat *tlsconf.Material, timeout time.Duration) *Client {
	return &Client{Peers: peers, TLS: mat, Timeout: timeout}
}

// Primary is the last peer that answered as primary, if any.
func (c *Client) Primary() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known || c.primary >= len(c.Peers) {
		return 0, false
	}
	return c.primary, true
}

func (c *Client) setPrimary(i int) {
	c.mu.Lock()
	c.primary, c.known = i, true
	c.mu.Unlock()
}

func (c *Client) connectTimeout() time.Duration {
	if c.ConnectTimeout > 0 {
		return c.ConnectTimeout
	}
	return DefaultConnectTimeout
}

func (c *Client) hedgeDelay() time.Duration {
	if c.HedgeDelay > 0 {
		return c.HedgeDelay
	}
	return c.connectTimeout() / 4
}

func (c *Client) dial(ctx context.Context, addr string) (Conn, error) {
	if c.Dial != nil {
		return c.Dial(ctx, addr)
	}
	// ctx's deadline (the connect timeout) bounds the connect and the
	// handshake; Timeout, given as the connection's own timeout, bounds
	// each later call. DialClient drops its hook on ctx before returning,
	// so cancelling ctx afterwards leaves the connection alone.
	cl, err := transport.DialClient(ctx, addr, c.TLS, c.Timeout)
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// Sent reports whether a failed call's request may have reached the node:
// false when it could not be written (transport.ErrNotSent) or when the
// node answered with a TLS alert (in TLS 1.3 a refused client certificate
// shows up only at the first read, after the request was written, but the
// node never read it).
func Sent(err error) bool {
	if errors.Is(err, transport.ErrNotSent) {
		return false
	}
	var oe *net.OpError
	return !errors.As(err, &oe) || oe.Op != "remote error"
}

// Call sends r to the primary (see the package comment). The result is
// the node's answer, or: the error Classify gave with Done; a
// *UnknownOutcomeError (ErrUnknownOutcome); a *NoPrimaryError
// (ErrNoPrimary); ErrRefusedLocally; or ctx's error.
func (c *Client) Call(ctx context.Context, r Request) (*Result, error) {
	if r.Msg == nil || r.Classify == nil {
		return nil, errors.New("failover: request without a message or a classifier")
	}
	// A request the wire refuses (too large, bad fields) is refused here,
	// before any node sees it: never "outcome unknown".
	if _, err := wire.EncodeClientRequest(r.Msg); err != nil {
		return nil, fmt.Errorf("%w: not sent: %w", ErrRefusedLocally, err)
	}
	if len(c.Peers) == 0 {
		return nil, &NoPrimaryError{}
	}
	s := newSearch(ctx, c)
	defer s.close()
	return s.run(r)
}

type peerState int

const (
	idle    peerState = iota // not dialled
	dialing                  // dial in flight
	ready                    // connected, nothing sent yet
	done                     // answered, unreachable, or failed
)

type dialResult struct {
	i    int
	conn Conn
	err  error
}

// search is the state of one Call. Only run's goroutine touches it; the
// dials report on results.
type search struct {
	c       *Client
	ctx     context.Context
	dctx    context.Context // the dials'; cancelled when the search ends
	cancel  context.CancelFunc
	state   []peerState
	conns   []Conn
	results chan dialResult // room for every peer: a dial never blocks
	pending int
	fanned  bool
	tried   []Attempt
}

func newSearch(ctx context.Context, c *Client) *search {
	dctx, cancel := context.WithCancel(ctx)
	n := len(c.Peers)
	return &search{c: c, ctx: ctx, dctx: dctx, cancel: cancel, state: make([]peerState, n),
		conns: make([]Conn, n), results: make(chan dialResult, n)}
}

func (s *search) note(i int, why string) {
	s.tried = append(s.tried, Attempt{Peer: s.c.Peers[i].Name, Err: why})
}

// dial starts connecting to peer i, unless that was done already.
func (s *search) dial(i int) {
	if s.state[i] != idle {
		return
	}
	s.state[i] = dialing
	s.pending++
	addr := s.c.Peers[i].Addr()
	go func() {
		ctx, cancel := context.WithTimeout(s.dctx, s.c.connectTimeout())
		defer cancel()
		conn, err := s.c.dial(ctx, addr)
		s.results <- dialResult{i: i, conn: conn, err: err}
	}()
}

// fanOut dials every peer not dialled yet, at once.
func (s *search) fanOut() {
	s.fanned = true
	for i := range s.state {
		s.dial(i)
	}
}

func (s *search) record(d dialResult) {
	s.pending--
	if d.err != nil {
		s.state[d.i] = done
		s.note(d.i, d.err.Error())
		return
	}
	s.state[d.i], s.conns[d.i] = ready, d.conn
}

// close cancels the dials still in flight, waits for them (cancelled, they
// end at once) and closes every connection not used.
func (s *search) close() {
	s.cancel()
	for ; s.pending > 0; s.pending-- {
		if d := <-s.results; d.conn != nil {
			_ = d.conn.Close()
		}
	}
	for _, cn := range s.conns {
		if cn != nil {
			_ = cn.Close()
		}
	}
}

// pick is the peer to send to now, or -1 to wait: the redirect target
// while it may still connect, else the preferred peer, else the first
// connected one in --peers order.
func (s *search) pick(redirect, first int) int {
	if redirect >= 0 {
		if s.state[redirect] == ready {
			return redirect
		}
		return -1
	}
	if s.state[first] == ready {
		return first
	}
	for i, st := range s.state {
		if st == ready {
			return i
		}
	}
	return -1
}

func (s *search) run(r Request) (*Result, error) {
	first := 0
	if p, ok := s.c.Primary(); ok {
		first = p
	}
	s.dial(first)
	hedge := time.NewTimer(s.c.hedgeDelay())
	defer hedge.Stop()
	hedged := false
	redirect := -1
	for {
		if err := s.ctx.Err(); err != nil {
			return nil, fmt.Errorf("failover: %w", err)
		}
		if redirect >= 0 && s.state[redirect] == done {
			redirect = -1 // the named primary could not be reached
		}
		i := s.pick(redirect, first)
		if i < 0 {
			if !s.fanned && (s.pending == 0 || hedged) {
				s.fanOut()
				continue
			}
			if s.pending == 0 {
				return nil, &NoPrimaryError{Attempts: s.tried}
			}
			select {
			case d := <-s.results:
				s.record(d)
			case <-hedge.C:
				hedged = true
			case <-s.ctx.Done():
			}
			continue
		}
		res, next, err := s.send(i, r)
		if res != nil || err != nil {
			return res, err
		}
		redirect = next
		if redirect >= 0 {
			s.dial(redirect) // a no-op if it is up already or on its way
		} else if !s.fanned {
			s.fanOut() // the preferred peer cannot serve: ask everyone
		}
	}
}

// send sends r on peer i's connection (then closed): the result or a final
// error, else the peer to go to next (-1: any).
func (s *search) send(i int, r Request) (*Result, int, error) {
	conn := s.conns[i]
	s.conns[i], s.state[i] = nil, done
	defer conn.Close()
	p := s.c.Peers[i]
	rep, err := conn.Call(s.ctx, r.Msg)
	if err != nil {
		if !Sent(err) || r.ReadOnly {
			s.note(i, err.Error())
			return nil, -1, nil
		}
		return nil, -1, &UnknownOutcomeError{Peer: p.Name, Err: err, Attempts: s.tried}
	}
	if prim, ok := wire.Redirect(rep); ok {
		why := rep.GetError()
		if prim < 0 || prim >= len(s.c.Peers) {
			s.note(i, why)
			return nil, -1, nil
		}
		s.note(i, why+" (primary "+s.c.Peers[prim].Name+")")
		if s.state[prim] == done {
			return nil, -1, nil // tried already: no loops
		}
		return nil, prim, nil
	}
	v, cerr := r.Classify(p, rep)
	if v != Done && cerr == nil {
		cerr = errors.New(rep.GetError())
	}
	switch {
	case v == Done:
		if !r.AnyNode {
			s.c.setPrimary(i)
		}
		if cerr != nil {
			return nil, -1, cerr
		}
		return &Result{Peer: i, Name: p.Name, Reply: rep, Attempts: s.tried}, -1, nil
	case v == Unknown && !r.ReadOnly:
		return nil, -1, &UnknownOutcomeError{Peer: p.Name, Err: cerr, Attempts: s.tried}
	default: // Next, or Unknown for a read
		s.note(i, cerr.Error())
		return nil, -1, nil
	}
}
