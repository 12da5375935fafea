package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/schemaconnect"
	"github.com/xce-hpc/xce/sm"
)

// kind is what a call may do, which decides what happens after a lost
// answer.
type kind int

const (
	// mutation: may apply something; never written twice.
	mutation kind = iota
	// read of the primary's state: repeating it applies nothing.
	read
	// local: answered by whichever node is asked (status, config); an
	// answer does not make that node the known primary.
	local
)

// Method is a method expression of the generated client, e.g.
// schemaconnect.XceClient.Submit.
type Method[Req, Resp any] func(schemaconnect.XceClient, context.Context, *connect.Request[Req]) (*connect.Response[Resp], error)

// call sends msg with m (see the package comment) and returns the answer.
func call[Req, Resp any](ctx context.Context, c *Client, k kind, msg *Req, m Method[Req, Resp]) (*Resp, error) {
	var out *Resp
	send := func(ctx context.Context, _ *node, cn *conn) (http.Header, error) {
		rep, err := m(cn.api, ctx, connect.NewRequest(msg))
		if err != nil {
			return nil, err
		}
		out = rep.Msg
		return rep.Header(), nil
	}
	if err := checkSize(msg); err != nil {
		return nil, err
	}
	if err := find(ctx, c, k, waitOf(msg), send); err != nil {
		return nil, err
	}
	return out, nil
}

// find sends with send to the node that takes it (see the package
// comment): the one search for the primary, for calls and for a
// Worker's stream alike. wait is how much longer than Timeout the answer
// may take.
func find(ctx context.Context, c *Client, k kind, wait time.Duration, send sendFunc) error {
	if len(c.peers) == 0 {
		return &NoPrimaryError{}
	}
	s := &search{c: c, ctx: ctx, k: k, state: make([]peerState, len(c.peers)), conns: make([]*conn, len(c.peers)),
		results: make(chan dialResult, len(c.peers)), wait: wait}
	return s.run(send)
}

// OnBehalf is the caller a node forwards a call for: its certificate's CN
// and its role (OnBehalfHeader, OnBehalfRoleHeader), and whether it reads
// the answer in JSON (EncodingHeader: the node forwards in binary).
type OnBehalf struct {
	CN, Role string
	JSON     bool
}

// Forward sends msg to node i only, on behalf of the caller onBehalf (its
// zero value sends no header), on the kept connection or a new one: no
// search, no redirect. It is how a standby forwards a call
// to the primary. The error is a *NodeError for the node's answer, an
// *OutcomeUnknownError when the request was written and no answer came,
// else the reason nothing was sent.
func Forward[Req, Resp any](ctx context.Context, c *Client, i int, onBehalf OnBehalf, msg *Req, m Method[Req, Resp]) (*Resp, http.Header, error) {
	return once(ctx, c, i, onBehalf, msg, m)
}

func once[Req, Resp any](ctx context.Context, c *Client, i int, onBehalf OnBehalf, msg *Req, m Method[Req, Resp]) (*Resp, http.Header, error) {
	if i < 0 || i >= len(c.nodes) {
		return nil, nil, fmt.Errorf("client: no node %d", i)
	}
	if err := checkSize(msg); err != nil {
		return nil, nil, err
	}
	n := c.nodes[i]
	dctx, cancel := context.WithTimeout(ctx, c.opt.ConnectTimeout)
	cn, err := n.dial(dctx)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", n.peer.Name, err)
	}
	var wrote atomic.Bool
	cctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }})
	cctx, cancel = context.WithTimeout(cctx, c.opt.Timeout+waitOf(msg))
	defer cancel()
	req := connect.NewRequest(msg)
	if onBehalf.CN != "" {
		req.Header().Set(OnBehalfHeader, onBehalf.CN)
		req.Header().Set(OnBehalfRoleHeader, onBehalf.Role)
	}
	if onBehalf.JSON {
		req.Header().Set(EncodingHeader, "json")
	}
	rep, err := m(cn.api, cctx, req)
	if err != nil {
		if ce := new(connect.Error); errors.As(err, &ce) && connect.IsWireError(err) {
			return nil, ce.Meta(), &NodeError{Node: n.peer.Name, Err: ce}
		}
		n.drop(cn)
		if wrote.Load() {
			return nil, nil, &OutcomeUnknownError{Node: n.peer.Name, Err: err}
		}
		return nil, nil, fmt.Errorf("%s: %w", n.peer.Name, err)
	}
	return rep.Msg, rep.Header(), nil
}

// checkSize refuses a request over MaxMessageBytes before it is sent: the
// node would refuse it, and a refusal in mid-request would leave its
// outcome unknown.
func checkSize(msg any) error {
	m, ok := msg.(proto.Message)
	if !ok {
		return fmt.Errorf("client: %T is not a protobuf message", msg)
	}
	if n := proto.Size(m); n > MaxMessageBytes {
		return fmt.Errorf("%w: the request encodes to %d bytes, above the API's limit of %d", ErrRefusedLocally, n, MaxMessageBytes)
	}
	return nil
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
	conn *conn
	err  error
}

// search is the state of one call. Only run's goroutine touches it; the
// dials report on results (which has room for every node, so a dial
// never blocks, and the kept connections outlive the search).
type search struct {
	c       *Client
	ctx     context.Context
	k       kind
	state   []peerState
	conns   []*conn
	results chan dialResult
	pending int
	fanned  bool
	tried   []Attempt
	wait    time.Duration // a long-poll claim's wait: the answer may take that much longer
}

// waitOf is how long the node may hold msg before answering: a claim's
// long-poll wait, a switchover's handover.
func waitOf(msg any) time.Duration {
	switch m := msg.(type) {
	case *schema.ClaimRequest:
		return time.Duration(m.GetWaitMs()) * time.Millisecond
	case *schema.SwitchoverRequest:
		return sm.HandoverTimeout
	}
	return 0
}

func (s *search) note(i int, why string) {
	s.tried = append(s.tried, Attempt{Node: s.c.peers[i].Name, Err: why})
}

// dial makes node i ready: at once with its kept connection, else by a
// dial in the background.
func (s *search) dial(i int) {
	if s.state[i] != idle {
		return
	}
	n := s.c.nodes[i]
	if cn := n.up(); cn != nil {
		s.state[i], s.conns[i] = ready, cn
		return
	}
	s.state[i] = dialing
	s.pending++
	go func() {
		// Not the caller's context: a dial that completes after the call
		// ended is kept for the next call, within the connect timeout.
		ctx, cancel := context.WithTimeout(context.Background(), s.c.opt.ConnectTimeout)
		defer cancel()
		cn, err := n.dial(ctx)
		s.results <- dialResult{i: i, conn: cn, err: err}
	}()
}

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

// pick is the node to send to now, or -1 to wait: the redirect target
// while it may still connect, else the preferred node, else the first
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

// sendFunc sends on cn, node n's connection, within ctx (which bounds the
// answer's wait and traces the request's writing), and returns the
// answer's header.
type sendFunc func(ctx context.Context, n *node, cn *conn) (http.Header, error)

func (s *search) run(send sendFunc) error {
	first := 0
	if p, ok := s.c.Primary(); ok && p < len(s.c.peers) {
		first = p
	}
	s.dial(first)
	hedge := time.NewTimer(s.c.opt.HedgeDelay)
	defer hedge.Stop()
	hedged := false
	redirect := -1
	for {
		if err := s.ctx.Err(); err != nil {
			return fmt.Errorf("client: %w", err)
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
				return &NoPrimaryError{Attempts: s.tried}
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
		next, end, err := s.send(i, send)
		if end {
			return err
		}
		redirect = next
		if redirect >= 0 {
			s.dial(redirect) // a no-op if it is up already or on its way
		} else if !s.fanned {
			s.fanOut() // the preferred node cannot serve: ask everyone
		}
	}
}

// send sends on node i's connection: the end of the search (with the
// call's error, nil for its answer), else the node to go to next (-1:
// any).
func (s *search) send(i int, send sendFunc) (next int, end bool, err error) {
	cn := s.conns[i]
	s.conns[i], s.state[i] = nil, done
	n := s.c.nodes[i]
	var wrote atomic.Bool
	ctx := httptrace.WithClientTrace(s.ctx, &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }})
	ctx, cancel := context.WithTimeout(ctx, s.c.opt.Timeout+s.wait)
	defer cancel()
	hdr, err := send(ctx, n, cn)
	if err == nil {
		if s.k != local {
			if p := s.c.indexOf(hdr.Get(PrimaryHeader)); p >= 0 {
				s.c.setPrimary(p) // a standby forwarded it there
			} else {
				s.c.setPrimary(i)
			}
		}
		return -1, true, nil
	}
	ce := new(connect.Error)
	if !errors.As(err, &ce) || !connect.IsWireError(err) {
		// No answer from the node: the connection failed, or the call
		// timed out.
		switch {
		case !wrote.Load():
			n.drop(cn)
			if s.ctx.Err() != nil {
				return -1, true, fmt.Errorf("client: %w", s.ctx.Err())
			}
			s.note(i, "not sent: "+err.Error())
			return -1, false, nil
		case s.k == mutation:
			n.drop(cn)
			return -1, true, &OutcomeUnknownError{Node: n.peer.Name, Err: err, Attempts: s.tried}
		case s.ctx.Err() != nil:
			return -1, true, fmt.Errorf("client: %w", s.ctx.Err())
		default:
			n.drop(cn)
			s.note(i, err.Error())
			return -1, false, nil
		}
	}
	switch ce.Code() {
	case connect.CodeUnavailable: // nothing was applied there
		prim := -1
		if np := notPrimary(ce); np != nil {
			prim = s.c.indexOf(np.GetPrimaryName())
		}
		if prim < 0 {
			s.note(i, ce.Message())
			return -1, false, nil
		}
		s.note(i, ce.Message()+" (primary "+s.c.peers[prim].Name+")")
		if s.state[prim] == done {
			return -1, false, nil // tried already: no loops
		}
		return prim, false, nil
	case connect.CodeUnknown:
		if s.k == mutation {
			return -1, true, &OutcomeUnknownError{Node: n.peer.Name, Err: ce, Attempts: s.tried}
		}
		s.note(i, ce.Message())
		return -1, false, nil
	default:
		return -1, true, &NodeError{Node: n.peer.Name, Err: ce}
	}
}

// notPrimary is the NotPrimary detail of an unavailable answer, if any.
func notPrimary(ce *connect.Error) *schema.NotPrimary {
	for _, d := range ce.Details() {
		v, err := d.Value()
		if np, ok := v.(*schema.NotPrimary); err == nil && ok {
			return np
		}
	}
	return nil
}
