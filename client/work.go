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
	c  *Client
	mu sync.Mutex
	ws *workStream // nil: none open
}

// Worker is a Worker of c's cluster.
func (c *Client) Worker() *Worker { return &Worker{c: c} }

type workStream struct {
	n      *node
	cn     *conn
	st     *connect.BidiStreamForClient[schema.ClaimRequest, schema.JobResponse]
	cancel context.CancelFunc // ends the stream at once
}

// Claim is Client.Claim on the worker's stream.
func (w *Worker) Claim(ctx context.Context, r *schema.ClaimRequest) (*schema.JobResponse, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := checkSize(r); err != nil {
		return nil, err
	}
	if ws := w.ws; ws != nil && ws.cn.cc.Err() != nil {
		w.closeStream() // its connection failed: r cannot go on it
	}
	if ws := w.ws; ws != nil {
		rep, retry, err := ws.claim(ctx, w.c, r)
		if err == nil {
			return rep, nil
		}
		w.closeStream()
		if !retry {
			return nil, err
		}
		// Not applied: the stream had ended. A new one, as a call
		// finds its node.
	}
	var out *schema.JobResponse
	open := func(ctx context.Context, n *node, cn *conn) (http.Header, error) {
		// The stream outlives this call (not ctx's deadline or
		// cancellation) but keeps its values: the trace that tells the
		// search whether the request was written.
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		ws := &workStream{n: n, cn: cn, st: cn.api.Work(sctx), cancel: cancel}
		rep, _, err := ws.exchange(ctx, r)
		if err != nil {
			cancel()
			return nil, err
		}
		out = rep
		hdr := ws.st.ResponseHeader()
		if hdr.Get(PrimaryHeader) == "" {
			w.ws = ws
		} else {
			ws.close() // a standby forwarded it and ends the stream: the next goes to the primary
		}
		return hdr, nil
	}
	if err := find(ctx, w.c, mutation, waitOf(r), open); err != nil {
		return nil, err
	}
	return out, nil
}

// Close ends the worker's stream, if one is open.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closeStream()
	return nil
}

func (w *Worker) closeStream() {
	if w.ws != nil {
		w.ws.close()
		w.ws = nil
	}
}

func (ws *workStream) close() {
	_ = ws.st.CloseRequest() // the node's read ends: it returns
	ws.cancel()
}

// exchange sends r and reads its reply; ctx's end ends the stream. sent
// is false when r was not written whole (the node cannot have applied
// it).
func (ws *workStream) exchange(ctx context.Context, r *schema.ClaimRequest) (_ *schema.JobResponse, sent bool, _ error) {
	// Closing the request side first: once the node's reply headers have
	// arrived, net/http's HTTP/2 client notices a cancelled context only
	// after the request body ends, so a cancel alone would leave a long
	// poll waiting for the node's answer (the whole wait).
	stop := context.AfterFunc(ctx, ws.close)
	defer stop()
	if err := ws.st.Send(r); err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err // io.EOF: the node ended the stream; Receive tells why
	}
	rep, err := ws.st.Receive()
	return rep, true, err
}

// claim is r on the open stream, bounded as a call (Timeout and r's
// wait). retry means the node did not apply r: send it on a new stream.
func (ws *workStream) claim(ctx context.Context, c *Client, r *schema.ClaimRequest) (_ *schema.JobResponse, retry bool, _ error) {
	cctx, cancel := context.WithTimeout(ctx, c.opt.Timeout+waitOf(r))
	defer cancel()
	rep, sent, err := ws.exchange(cctx, r)
	ce := new(connect.Error)
	switch {
	case err == nil:
		return rep, false, nil
	case ctx.Err() != nil && !sent:
		return nil, false, fmt.Errorf("client: %w", ctx.Err())
	case !sent || errors.Is(err, io.EOF):
		return nil, true, err // not written, or the node ended the stream before reading it
	case !errors.As(err, &ce) || !connect.IsWireError(err):
		ws.n.drop(ws.cn)
		return nil, false, &OutcomeUnknownError{Node: ws.n.peer.Name, Err: err}
	case ce.Code() == connect.CodeUnavailable:
		return nil, true, err // nothing applied: the search follows a NotPrimary
	case ce.Code() == connect.CodeUnknown:
		return nil, false, &OutcomeUnknownError{Node: ws.n.peer.Name, Err: ce}
	default:
		return nil, false, &NodeError{Node: ws.n.peer.Name, Err: ce}
	}
}
