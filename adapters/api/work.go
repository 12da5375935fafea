package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/transport"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
)

// Work serves a worker's stream of claims one at a time, each exactly as
// the unary Claim serves it (s.Claim: the same validation, door,
// authorisation, metrics and forwarding); a refusal ends the stream with
// its code. Over a Transport the stream's limits are per message
// (transport.Stream): it may live as long as messages keep coming.
//
// A standby forwards a request to the primary as it forwards a Claim,
// then ends the stream once the reply is sent (the first reply's stream
// header names the primary): the worker then opens its next stream on
// the primary, not through this node.
func (s *server) Work(ctx context.Context, st *connect.BidiStream[schema.ClaimRequest, schema.JobResponse]) error {
	return serveStream(ctx, st, s.Claim)
}

// SubmitStream serves a submitter's stream of submits as Work serves
// claims, each exactly as the unary Submit.
func (s *server) SubmitStream(ctx context.Context, st *connect.BidiStream[schema.SubmitRequest, schema.JobResponse]) error {
	return serveStream(ctx, st, s.Submit)
}

// serveStream answers each request of st with unary, in order, one at a
// time (Work's rules).
func serveStream[Req any](ctx context.Context, st *connect.BidiStream[Req, schema.JobResponse],
	unary func(context.Context, *connect.Request[Req]) (*jobReply, error)) error {
	tr := callerOf(ctx).stream // nil when not served by a Transport
	for first := true; ; first = false {
		m, err := st.Receive()
		if errors.Is(err, io.EOF) {
			return nil // the client closed the stream
		}
		if err != nil {
			return workReadError(err)
		}
		if tr != nil {
			if err := tr.Received(); err != nil {
				return connect.NewError(connect.CodeInternal, err)
			}
		}
		rep, err := unary(ctx, connect.NewRequest(m))
		if err != nil {
			return err
		}
		fwd := rep.Header().Get(client.PrimaryHeader)
		if fwd != "" && first {
			st.ResponseHeader().Set(client.PrimaryHeader, fwd)
		}
		if err := st.Send(rep.Msg); err != nil {
			return err
		}
		if fwd != "" {
			return nil // forwarded: the client's next stream goes to the primary
		}
		if tr != nil {
			if err := tr.Answered(); err != nil {
				return connect.NewError(connect.CodeInternal, err)
			}
		}
	}
}

// workReadError is the stream's end after a failed read of its next
// request, which was not applied: a missed deadline (no message within
// the idle bound, or one that did not arrive whole in time) or no room in
// the transport's budget is unavailable (open a new stream); connect's
// own refusals keep their codes.
func workReadError(err error) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("stream closed: no whole request within its bound (a stream idle too long, or a request that stalled): %w", err))
	case errors.Is(err, transport.ErrBusy):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("stream closed: %w", err))
	}
	return err
}
