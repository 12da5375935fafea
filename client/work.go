package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/schema"
)

// Worker claims over one Work stream (schema/api.proto): each Claim is
// one message on a stream kept open between calls, where Client.Claim
// costs an HTTP/2 stream of its own. The stream is opened by the search
// every call uses (see the package comment) and reopened the same way
// when it ends: on a new primary after a failover, after a standby's
// forwarded answer, after the node closed it for idleness. Its
// outcomes are Client.Claim's: a claim written and not answered, or
// answered with code unknown, is ErrOutcomeUnknown and never sent again;
// one the node did not apply (the stream had ended, or code unavailable)
// goes to a new stream. One claim at a time: concurrent calls wait their
// turn. Close it when done.
type Worker struct {
	s streamer[schema.ClaimRequest]
}

// Worker is a Worker of c's cluster.
func (c *Client) Worker() *Worker {
	return &Worker{s: streamer[schema.ClaimRequest]{c: c, open: (*conn).openWork}}
}

// Claim is Client.Claim on the worker's stream.
func (w *Worker) Claim(ctx context.Context, r *schema.ClaimRequest) (*schema.JobResponse, error) {
	return w.s.do(ctx, r)
}

// Close ends the worker's stream, if one is open.
func (w *Worker) Close() error {
	w.s.close()
	return nil
}

func (cn *conn) openWork(ctx context.Context) *connect.BidiStreamForClient[schema.ClaimRequest, schema.JobResponse] {
	return cn.api.Work(ctx)
}

func (cn *conn) openSubmits(ctx context.Context) *connect.BidiStreamForClient[schema.SubmitRequest, schema.JobResponse] {
	return cn.api.SubmitStream(ctx)
}

// streamer sends requests one at a time over a stream kept open between
// them (a Worker's claims, Submit's submits), with Worker's rules: the
// search opens the stream and opens it again once it ends.
type streamer[Req any] struct {
	c    *Client
	open func(*conn, context.Context) *connect.BidiStreamForClient[Req, schema.JobResponse]
	// proc names the procedure (StreamsHeader) if a node may not serve
	// it; unary is then the call that takes a request to such a node.
	proc  string
	unary Method[Req, schema.JobResponse]
	mu    sync.Mutex
	rs    *reqStream[Req] // nil: none open
}

type reqStream[Req any] struct {
	n      *node
	cn     *conn
	st     *connect.BidiStreamForClient[Req, schema.JobResponse]
	cancel context.CancelFunc // ends the stream at once
}

// do sends r on the open stream, or on a new one the search opens.
func (s *streamer[Req]) do(ctx context.Context, r *Req) (*schema.JobResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkSize(r); err != nil {
		return nil, err
	}
	if rs := s.rs; rs != nil && rs.cn.cc.Err() != nil {
		s.closeStream() // its connection failed: r cannot go on it
	}
	if rs := s.rs; rs != nil {
		rep, retry, err := rs.send(ctx, s.c, r)
		if err == nil {
			return rep, nil
		}
		s.closeStream()
		if !retry {
			return nil, err
		}
		// Not applied: the stream had ended. A new one, as a call
		// finds its node.
	}
	var out *schema.JobResponse
	open := func(ctx context.Context, n *node, cn *conn) (http.Header, error) {
		if s.proc != "" && !cn.serves(s.proc) {
			rep, err := s.unary(cn.api, ctx, connect.NewRequest(r))
			if err != nil {
				return nil, err
			}
			out = rep.Msg
			return rep.Header(), nil
		}
		// The stream outlives this call (not ctx's deadline or
		// cancellation) but keeps its values: the trace that tells the
		// search whether the request was written.
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		rs := &reqStream[Req]{n: n, cn: cn, st: s.open(cn, sctx), cancel: cancel}
		rep, _, err := rs.exchange(ctx, r)
		if err != nil {
			cancel()
			return nil, err
		}
		out = rep
		hdr := rs.st.ResponseHeader()
		if hdr.Get(PrimaryHeader) == "" {
			s.rs = rs
		} else {
			rs.close() // a standby forwarded it and ends the stream: the next goes to the primary
		}
		return hdr, nil
	}
	if err := find(ctx, s.c, mutation, waitOf(r), open); err != nil {
		return nil, err
	}
	return out, nil
}

// close ends the stream, if one is open.
func (s *streamer[Req]) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeStream()
}

func (s *streamer[Req]) closeStream() {
	if s.rs != nil {
		s.rs.close()
		s.rs = nil
	}
}

func (rs *reqStream[Req]) close() {
	_ = rs.st.CloseRequest() // the node's read ends: it returns
	rs.cancel()
}

// exchange sends r and reads its reply; ctx's end ends the stream. sent
// is false when r was not written whole (the node cannot have applied
// it).
func (rs *reqStream[Req]) exchange(ctx context.Context, r *Req) (_ *schema.JobResponse, sent bool, _ error) {
	// Closing the request side first: once the node's reply headers have
	// arrived, net/http's HTTP/2 client notices a cancelled context only
	// after the request body ends, so a cancel alone would leave a long
	// poll waiting for the node's answer (the whole wait).
	stop := context.AfterFunc(ctx, rs.close)
	defer stop()
	if err := rs.st.Send(r); err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err // io.EOF: the node ended the stream; Receive tells why
	}
	rep, err := rs.st.Receive()
	return rep, true, err
}

// send is r on the open stream, bounded as a call (Timeout and r's
// wait). retry means the node did not apply r: send it on a new stream.
func (rs *reqStream[Req]) send(ctx context.Context, c *Client, r *Req) (_ *schema.JobResponse, retry bool, _ error) {
	cctx, cancel := context.WithTimeout(ctx, c.opt.Timeout+waitOf(r))
	defer cancel()
	rep, sent, err := rs.exchange(cctx, r)
	ce := new(connect.Error)
	switch {
	case err == nil:
		return rep, false, nil
	case ctx.Err() != nil && !sent:
		return nil, false, fmt.Errorf("client: %w", ctx.Err())
	case !sent || errors.Is(err, io.EOF):
		return nil, true, err // not written, or the node ended the stream before reading it
	case !errors.As(err, &ce) || !connect.IsWireError(err):
		rs.n.drop(rs.cn)
		return nil, false, &OutcomeUnknownError{Node: rs.n.peer.Name, Err: err}
	case ce.Code() == connect.CodeUnavailable:
		return nil, true, err // nothing applied: the search follows a NotPrimary
	case ce.Code() == connect.CodeUnknown:
		return nil, false, &OutcomeUnknownError{Node: rs.n.peer.Name, Err: ce}
	default:
		return nil, false, &NodeError{Node: rs.n.peer.Name, Err: ce}
	}
}
