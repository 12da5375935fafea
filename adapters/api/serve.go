package api

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/authz"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

var errNoBody = errors.New("the node's reply has no body")

// redirectError is a standby's "not primary" refusal: nothing was
// applied; primary is the index of the primary it follows, -1 if none.
type redirectError struct {
	primary int
	why     string
}

func (e *redirectError) Error() string { return e.why }

// serve checks req (the one validation of client input) and hands it to
// the door. A reply with a non-zero status is an error: a *redirectError
// when the reply says not primary (Reply.NotPrimary), else a *connect.Error with the status's code.
func (s *server) serve(ctx context.Context, req *wire.Request) (*wire.Reply, error) {
	if err := wire.CheckRequest(req); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	rep := s.cfg.Door(ctx, callerOf(ctx).Caller, req)
	if rep == nil {
		return nil, connect.NewError(connect.CodeInternal, errors.New("the node gave no reply"))
	}
	if rep.Status == sm.StatusOK {
		return rep, nil
	}
	if rep.NotPrimary {
		prim := -1
		switch {
		case rep.Job != nil:
			prim = rep.Job.Primary
		case rep.Upgrade != nil:
			prim = int(rep.Upgrade.GetPrimary())
		case rep.Switchover != nil:
			prim = rep.Switchover.Primary
		}
		return rep, &redirectError{primary: prim, why: rep.Error}
	}
	return rep, connect.NewError(codeOf(rep.Status), errors.New(rep.Error))
}

// CodeOK is the code of a call answered without an error (connect names
// none: its codes start at 1, as gRPC's after OK).
const CodeOK connect.Code = 0

// CodeOf is the code the API answers req with when the node replied rep
// (not a standby's "not primary", which the API forwards or answers as
// unavailable): CodeOK, the code of rep's status (codeOf), or the code of
// a job operation the queue refused without a status (refusalOf). The
// daemon counts each request by it, so the metrics name what the client
// was told.
func CodeOf(req *wire.Request, rep *wire.Reply) connect.Code {
	switch {
	case rep == nil:
		return connect.CodeInternal // serve: the node gave no reply
	case rep.Status != sm.StatusOK:
		return codeOf(rep.Status)
	case req != nil && req.Job != nil && rep.Job != nil:
		code, _ := refusalOf(req.Job, rep.Job)
		return code
	}
	return CodeOK
}

// codeOf maps a reply status (negative errno, as sm and the daemon answer)
// to the Connect code. Every code but unknown means nothing was applied.
func codeOf(status int32) connect.Code {
	switch status {
	case authz.StatusForbidden:
		return connect.CodePermissionDenied
	case sm.StatusEAGAIN, sm.StatusNoConfig:
		return connect.CodeUnavailable
	case sm.StatusEINVAL:
		return connect.CodeInvalidArgument
	case sm.StatusEEXIST:
		return connect.CodeAlreadyExists
	case wire.StatusBusy:
		return connect.CodeAborted
	case wire.StatusNotInSync:
		return connect.CodeFailedPrecondition
	case wire.StatusUnsupported:
		return connect.CodeUnimplemented
	case sm.StatusOutcomeUnknown:
		return connect.CodeUnknown
	default: // EIO and what this build does not know
		return connect.CodeInternal
	}
}

// notPrimary is the unavailable answer naming the primary (if known).
func (s *server) notPrimary(rd *redirectError) error {
	np := &schema.NotPrimary{Node: s.cfg.Peers[s.cfg.Self].Name}
	msg := rd.why
	if p := rd.primary; p >= 0 && p < len(s.cfg.Peers) && p != s.cfg.Self {
		np.PrimaryName, np.PrimaryAddr = s.cfg.Peers[p].Name, s.cfg.Peers[p].Addr
		msg = fmt.Sprintf("%s %s (%s)", strings.TrimSuffix(msg, " primary"), np.PrimaryName, np.PrimaryAddr)
	}
	ce := connect.NewError(connect.CodeUnavailable, errors.New(msg))
	if d, err := connect.NewErrorDetail(np); err == nil {
		ce.AddDetail(d)
	}
	return ce
}

// local is err for a call this node answers itself: a redirect there is
// answered as unavailable, never forwarded.
func (s *server) local(err error) error {
	if rd := new(redirectError); errors.As(err, &rd) {
		return s.notPrimary(rd)
	}
	return err
}

// forward sends a call a standby refused to the primary it named, once,
// with the caller's CN and role. An admin operation (need) is never
// forwarded: the primary would refuse it (authz.DecideOnBehalf), and the
// admin's tool follows the redirect itself.
func forward[Req, Resp any](ctx context.Context, s *server, r *connect.Request[Req], rd *redirectError, need authz.Role, m client.Method[Req, Resp]) (*connect.Response[Resp], error) {
	c := callerOf(ctx)
	p := rd.primary
	if c.forwarded() || need == authz.RoleAdmin || s.cfg.Forward == nil || s.cfg.Policy == nil || p < 0 || p >= len(s.cfg.Peers) || p == s.cfg.Self {
		return nil, s.notPrimary(rd)
	}
	// The primary sizes the answer for the caller (JSON), not for this hop.
	on := client.OnBehalf{CN: c.CN, Role: s.cfg.Policy.RoleOf(c.CN).String(), JSON: c.json}
	out, _, err := client.Forward(ctx, s.cfg.Forward, p, on, r.Msg, m)
	if err != nil {
		var ne *client.NodeError
		var ue *client.OutcomeUnknownError
		switch {
		case errors.As(err, &ne):
			return nil, ne.Err // the primary's answer, code and details
		case errors.As(err, &ue):
			return nil, connect.NewError(connect.CodeUnknown, fmt.Errorf("outcome unknown: forwarded to the primary %s, no answer: %w", s.cfg.Peers[p].Name, ue.Err))
		default: // nothing was sent: the caller may try the primary itself
			return nil, s.notPrimary(&redirectError{primary: p, why: rd.why + "; forwarding failed: " + err.Error()})
		}
	}
	rep := connect.NewResponse(out)
	rep.Header().Set(client.PrimaryHeader, s.cfg.Peers[p].Name)
	return rep, nil
}

// serveJob serves one job operation: its answer, forwarded to the primary
// from a standby. jr goes to the node as is; the node's reply is rendered
// as the JobResponse (jobResponse).
func serveJob[Req any](ctx context.Context, s *server, r *connect.Request[Req], jr *sm.JobRequest, m client.Method[Req, schema.JobResponse]) (*jobReply, error) {
	return serveJobAs(ctx, s, r, jr, m, func(jr *sm.JobRequest, body *sm.Reply) (*schema.JobResponse, error) {
		if err := refusal(jr, body); err != nil {
			return nil, err
		}
		return jobResponse(jr.Kind, body), nil
	})
}

// serveJobAs is serveJob for an operation whose answer render builds
// from the node's reply.
func serveJobAs[Req, Resp any](ctx context.Context, s *server, r *connect.Request[Req], jr *sm.JobRequest, m client.Method[Req, Resp],
	render func(*sm.JobRequest, *sm.Reply) (*Resp, error)) (*connect.Response[Resp], error) {
	jr.JSON = callerOf(ctx).json // a claim's jobs, a list's page, sized for the caller
	req := &wire.Request{Job: jr}
	rep, err := s.serve(ctx, req)
	if rd := new(redirectError); errors.As(err, &rd) {
		need, _ := authz.Need(req)
		return forward(ctx, s, r, rd, need, m)
	}
	if err != nil {
		return nil, err
	}
	body := rep.Job
	if body == nil {
		return nil, connect.NewError(connect.CodeInternal, errNoBody)
	}
	out, err := render(jr, body)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// refusal is the error of an operation the queue refused without a
// status (ok = false): nothing changed.
func refusal(jr *sm.JobRequest, body *sm.Reply) error {
	code, msg := refusalOf(jr, body)
	if code == CodeOK {
		return nil
	}
	return connect.NewError(code, errors.New(msg))
}

// refusalOf is the code and message of refusal; CodeOK when the reply is
// no refusal.
func refusalOf(jr *sm.JobRequest, body *sm.Reply) (code connect.Code, msg string) {
	if body.OK {
		return CodeOK, ""
	}
	switch jr.Kind {
	case sm.JobAck, sm.JobHeartbeat, sm.JobRetry, sm.JobFail:
		code, msg = connect.CodeFailedPrecondition, "handle refused: the claim is not current (acked, expired, retried or never made)"
	case sm.JobCancel:
		code, msg = connect.CodeFailedPrecondition, fmt.Sprintf("cancel refused: job %d is not pending", jr.ID)
	case sm.JobRedrive:
		code, msg = connect.CodeFailedPrecondition, fmt.Sprintf("redrive refused: job %d is not dead", jr.ID)
	case sm.JobGet:
		code, msg = connect.CodeNotFound, fmt.Sprintf("job %d not found", jr.ID)
	case sm.JobUnregister:
		code, msg = connect.CodeNotFound, fmt.Sprintf("no schedule named %q", jr.Name)
	default: // claim (nothing ready), batches, sweeps: ok says nothing
		return CodeOK, ""
	}
	return code, msg
}
