package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/schemaconnect"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// Each job RPC is the node's own request of its kind (sm.JobRequest),
// built field for field from the typed request and handed to the node as
// is (serveJob); its answer, the node's sm.Reply, is rendered as the
// JobResponse (render.go).

type (
	jobReply = connect.Response[schema.JobResponse]
	xc       = schemaconnect.XceClient
)

func (s *server) Submit(ctx context.Context, r *connect.Request[schema.SubmitRequest]) (*jobReply, error) {
	m := r.Msg
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobEnqueue, Queue: m.GetQueue(), Payload: m.GetPayload(),
		Priority: m.GetPriority(), Delay: m.GetDelay(), RunAt: m.GetRunAt(), Expires: m.GetExpires(), Resource: m.GetResource(),
		Host: m.GetHost(), Key: m.GetIdempotencyKey()}, xc.Submit)
}

func (s *server) SubmitBatch(ctx context.Context, r *connect.Request[schema.SubmitBatchRequest]) (*jobReply, error) {
	m := r.Msg
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobEnqueueBatch, Queue: m.GetQueue(), Payloads: m.GetPayloads(),
		Priority: m.GetPriority(), Delay: m.GetDelay(), RunAt: m.GetRunAt(), Expires: m.GetExpires(), Resource: m.GetResource(),
		Host: m.GetHost(), Keys: m.GetIdempotencyKeys()}, xc.SubmitBatch)
}

func (s *server) Claim(ctx context.Context, r *connect.Request[schema.ClaimRequest]) (*jobReply, error) {
	m := r.Msg
	// The acks it carries are the request's handles: the node applies
	// them, then claims, in one request (one durable write).
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobClaim, Queue: m.GetQueue(), Host: m.GetHost(), Max: int(m.GetMax()),
		Wait: time.Duration(m.GetWaitMs()) * time.Millisecond, Handles: handlesOf(m.GetAck())}, xc.Claim)
}

func (s *server) Ack(ctx context.Context, r *connect.Request[schema.AckRequest]) (*jobReply, error) {
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobAck, Handle: sm.HandleOf(r.Msg.GetHandle())}, xc.Ack)
}

func (s *server) AckBatch(ctx context.Context, r *connect.Request[schema.AckBatchRequest]) (*jobReply, error) {
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobAckBatch, Handles: handlesOf(r.Msg.GetHandles())}, xc.AckBatch)
}

func (s *server) Heartbeat(ctx context.Context, r *connect.Request[schema.HeartbeatRequest]) (*jobReply, error) {
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobHeartbeat, Handle: sm.HandleOf(r.Msg.GetHandle())}, xc.Heartbeat)
}

func (s *server) Retry(ctx context.Context, r *connect.Request[schema.RetryRequest]) (*jobReply, error) {
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobRetry, Handle: sm.HandleOf(r.Msg.GetHandle()), Error: r.Msg.GetError(),
		RetryDelay: r.Msg.GetDelay()}, xc.Retry)
}

func (s *server) Fail(ctx context.Context, r *connect.Request[schema.FailRequest]) (*jobReply, error) {
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobFail, Handle: sm.HandleOf(r.Msg.GetHandle()), Error: r.Msg.GetError()}, xc.Fail)
}

func (s *server) Cancel(ctx context.Context, r *connect.Request[schema.CancelRequest]) (*jobReply, error) {
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobCancel, ID: r.Msg.GetId()}, xc.Cancel)
}

func (s *server) Get(ctx context.Context, r *connect.Request[schema.GetRequest]) (*jobReply, error) {
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobGet, ID: r.Msg.GetId()}, xc.Get)
}

func (s *server) List(ctx context.Context, r *connect.Request[schema.ListRequest]) (*jobReply, error) {
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobList, Queue: r.Msg.GetQueue(), AfterID: r.Msg.GetAfterId()}, xc.List)
}

func (s *server) Redrive(ctx context.Context, r *connect.Request[schema.RedriveRequest]) (*jobReply, error) {
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobRedrive, ID: r.Msg.GetId()}, xc.Redrive)
}

func (s *server) Sweep(ctx context.Context, r *connect.Request[schema.SweepRequest]) (*jobReply, error) {
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobSweep}, xc.Sweep)
}

func (s *server) Tick(ctx context.Context, r *connect.Request[schema.TickRequest]) (*jobReply, error) {
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobTick}, xc.Tick)
}

func (s *server) DrainLostAndFound(ctx context.Context, r *connect.Request[schema.DrainLostAndFoundRequest]) (*jobReply, error) {
	m := r.Msg
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobDrainLostAndFound, Queue: m.GetQueue(), Host: m.GetHost(), Cancel: m.GetCancel()}, xc.DrainLostAndFound)
}

func (s *server) RegisterSchedule(ctx context.Context, r *connect.Request[schema.RegisterScheduleRequest]) (*jobReply, error) {
	m := r.Msg
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobRegister, Name: m.GetName(), Spec: m.GetSpec(), Queue: m.GetQueue(),
		Payload: m.GetPayload(), Fire: queue.FireOpts{Priority: m.GetFire().GetPriority(), ExpiresS: m.GetFire().GetExpiresS()}}, xc.RegisterSchedule)
}

func (s *server) UnregisterSchedule(ctx context.Context, r *connect.Request[schema.UnregisterScheduleRequest]) (*jobReply, error) {
	return serveJob(ctx, s, r, &sm.JobRequest{Kind: sm.JobUnregister, Name: r.Msg.GetName()}, xc.UnregisterSchedule)
}

func (s *server) ListSchedules(ctx context.Context, r *connect.Request[schema.ListSchedulesRequest]) (*connect.Response[schema.ListSchedulesResponse], error) {
	return serveJobAs(ctx, s, r, &sm.JobRequest{Kind: sm.JobListSchedules}, xc.ListSchedules,
		func(_ *sm.JobRequest, rep *sm.Reply) (*schema.ListSchedulesResponse, error) {
			return schedulesResponse(rep), nil
		})
}

// handlesOf is the node's form of the handles of a request (nil for none).
func handlesOf(hs []*schema.WalHandle) []queue.Handle {
	if len(hs) == 0 {
		return nil
	}
	out := make([]queue.Handle, len(hs))
	for i, h := range hs {
		out[i] = sm.HandleOf(h)
	}
	return out
}

func (s *server) ClusterStatus(ctx context.Context, r *connect.Request[schema.ClusterStatusRequest]) (*connect.Response[schema.StatusReply], error) {
	// Every answer announces the streams served, a refusal too: the
	// client reads it from the call that confirms a new connection.
	rep, err := s.serve(ctx, &wire.Request{Status: &schema.StatusRequest{Queues: r.Msg.GetQueues()}})
	if err == nil && rep.StatusReply == nil {
		err = connect.NewError(connect.CodeInternal, errNoBody)
	}
	if err != nil {
		err = s.local(err)
		if ce := new(connect.Error); errors.As(err, &ce) && s.served != "" {
			ce.Meta().Set(client.StreamsHeader, s.served)
		}
		return nil, err
	}
	out := connect.NewResponse(rep.StatusReply)
	if s.served != "" {
		out.Header().Set(client.StreamsHeader, s.served)
	}
	return out, nil
}

// streamsServed is the StreamsHeader of a node's answers under cfg.
func streamsServed(cfg Config) string {
	var served []string
	for _, p := range streams {
		if !slices.Contains(cfg.Without, p) {
			served = append(served, p)
		}
	}
	return strings.Join(served, ",")
}

func (s *server) GetConfig(ctx context.Context, _ *connect.Request[schema.GetConfigRequest]) (*connect.Response[schema.GetConfigResponse], error) {
	cr, _, err := s.config(ctx)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&schema.GetConfigResponse{Blob: cr.GetBlob(), VersionTag: cr.GetVersionTag()}), nil
}

func (s *server) ListQueues(ctx context.Context, _ *connect.Request[schema.ListQueuesRequest]) (*connect.Response[schema.ListQueuesResponse], error) {
	cr, cfg, err := s.config(ctx)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&schema.ListQueuesResponse{Queues: cfg.GetQueues(), VersionTag: cr.GetVersionTag()}), nil
}

func (s *server) ListHosts(ctx context.Context, _ *connect.Request[schema.ListHostsRequest]) (*connect.Response[schema.ListHostsResponse], error) {
	cr, cfg, err := s.config(ctx)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&schema.ListHostsResponse{Hosts: cfg.GetHosts(), Resources: cfg.GetResources(), VersionTag: cr.GetVersionTag()}), nil
}

// config is the node's running config, raw and decoded.
func (s *server) config(ctx context.Context) (*schema.ConfigReply, *schema.ClusterConfig, error) {
	rep, err := s.serve(ctx, &wire.Request{Config: true})
	if err != nil {
		return nil, nil, s.local(err)
	}
	cr := rep.Config
	if cr == nil {
		return nil, nil, connect.NewError(connect.CodeInternal, errNoBody)
	}
	cfg, err := schema.DecodeClusterConfig(cr.GetBlob())
	if err != nil {
		return nil, nil, connect.NewError(connect.CodeInternal, err)
	}
	return cr, cfg, nil
}

func (s *server) UpgradeConfig(ctx context.Context, r *connect.Request[schema.UpgradeConfigRequest]) (*connect.Response[schema.UpgradeConfigResponse], error) {
	// Never forwarded: the admin's tool follows the redirect itself, so
	// that the restart it causes is never a standby's doing.
	rep, err := s.serve(ctx, &wire.Request{Upgrade: r.Msg})
	if err != nil {
		return nil, s.local(err)
	}
	u := rep.Upgrade
	if u == nil || u.GetVersionTag() == 0 {
		return nil, connect.NewError(connect.CodeInternal, errNoBody)
	}
	return connect.NewResponse(&schema.UpgradeConfigResponse{VersionTag: u.GetVersionTag(), AckedCount: u.GetAckedCount()}), nil
}

func (s *server) Switchover(ctx context.Context, r *connect.Request[schema.SwitchoverRequest]) (*connect.Response[schema.SwitchoverResponse], error) {
	to := -1 // the primary picks the best synced standby
	if name := r.Msg.GetTo(); name != "" {
		if to = s.memberIndex(name); to < 0 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("switchover to %q: no such member (the members are %s)", name, s.memberNames()))
		}
	}
	// Never forwarded, as UpgradeConfig: the admin's tool follows the
	// redirect to the primary itself.
	rep, err := s.serve(ctx, &wire.Request{Switchover: &sm.Switchover{To: to}})
	if err != nil {
		return nil, s.local(err)
	}
	sw := rep.Switchover
	if sw == nil || sw.Primary < 0 || sw.Primary >= len(s.cfg.Peers) {
		return nil, connect.NewError(connect.CodeInternal, errNoBody)
	}
	return connect.NewResponse(&schema.SwitchoverResponse{Primary: s.cfg.Peers[sw.Primary].Name, Term: sw.Term}), nil
}

// memberIndex is the index in --peers of the node named name, -1 if none.
func (s *server) memberIndex(name string) int {
	for i, p := range s.cfg.Peers {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// memberNames lists the names in --peers, for an error text.
func (s *server) memberNames() string {
	names := make([]string, len(s.cfg.Peers))
	for i, p := range s.cfg.Peers {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
