package clitool

import (
	"connectrpc.com/connect"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"xce/adapters/tlsconf"
	"xce/client"
	"xce/schema"
	"xce/sm"
)

// Send runs the job operation req (the form xcecli's commands build)
// through the API call of its kind. The errors are package client's: a
// *client.NodeError for the node's refusal, client.ErrOutcomeUnknown,
// client.ErrNoPrimary.
func Send(ctx context.Context, cl *client.Client, req *schema.JobRequest) (*schema.JobResponse, error) {
	rep, err := send(ctx, cl, req)
	var ne *client.NodeError
	switch {
	case errors.Is(err, client.ErrOutcomeUnknown):
		// Not retried elsewhere: a blind retry could apply it twice.
		return nil, fmt.Errorf("%s: %w (check with job get / job list)", kindName(req.GetKind()), err)
	case errors.As(err, &ne) && ne.Code() == connect.CodeFailedPrecondition:
		return nil, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return rep, err
}

func send(ctx context.Context, cl *client.Client, r *schema.JobRequest) (*schema.JobResponse, error) {
	switch r.GetKind() {
	case schema.JobRequest_ENQUEUE:
		return cl.Submit(ctx, &schema.SubmitRequest{Queue: r.GetQueue(), Payload: r.GetPayload(), Priority: r.GetPriority(), Delay: r.GetDelay(),
			RunAt: r.GetRunAt(), Expires: r.GetExpires(), Resource: r.GetResource(), Host: r.GetHost()})
	case schema.JobRequest_ENQUEUE_BATCH:
		return cl.SubmitBatch(ctx, &schema.SubmitBatchRequest{Queue: r.GetQueue(), Payloads: r.GetPayloads(), Priority: r.GetPriority(), Delay: r.GetDelay(),
			RunAt: r.GetRunAt(), Expires: r.GetExpires(), Resource: r.GetResource(), Host: r.GetHost()})
	case schema.JobRequest_CLAIM:
		return cl.Claim(ctx, &schema.ClaimRequest{Queue: r.GetQueue(), Host: r.GetHost(), Max: r.GetMax(), WaitMs: r.GetWaitMs(), Ack: r.GetHandles()})
	case schema.JobRequest_ACK:
		return cl.Ack(ctx, &schema.AckRequest{Handle: r.GetHandle()})
	case schema.JobRequest_ACK_BATCH:
		return cl.AckBatch(ctx, &schema.AckBatchRequest{Handles: r.GetHandles()})
	case schema.JobRequest_HEARTBEAT:
		return cl.Heartbeat(ctx, &schema.HeartbeatRequest{Handle: r.GetHandle()})
	case schema.JobRequest_RETRY:
		return cl.Retry(ctx, &schema.RetryRequest{Handle: r.GetHandle(), Error: r.GetError()})
	case schema.JobRequest_FAIL:
		return cl.Fail(ctx, &schema.FailRequest{Handle: r.GetHandle(), Error: r.GetError()})
	case schema.JobRequest_CANCEL:
		return cl.Cancel(ctx, &schema.CancelRequest{Id: r.GetId()})
	case schema.JobRequest_GET:
		return cl.Get(ctx, &schema.GetRequest{Id: r.GetId()})
	case schema.JobRequest_LIST:
		return cl.List(ctx, &schema.ListRequest{Queue: r.GetQueue(), AfterId: r.GetAfterId()})
	case schema.JobRequest_REDRIVE:
		return cl.Redrive(ctx, &schema.RedriveRequest{Id: r.GetId()})
	case schema.JobRequest_SWEEP:
		return cl.Sweep(ctx, &schema.SweepRequest{})
	case schema.JobRequest_TICK:
		return cl.Tick(ctx, &schema.TickRequest{})
	case schema.JobRequest_LOST_AND_FOUND_DRAIN:
		return cl.DrainLostAndFound(ctx, &schema.DrainLostAndFoundRequest{Queue: r.GetQueue(), Host: r.GetHost(), Cancel: r.GetCancel()})
	case schema.JobRequest_REGISTER:
		return cl.RegisterSchedule(ctx, &schema.RegisterScheduleRequest{Name: r.GetName(), Spec: r.GetSpec(), Queue: r.GetQueue(),
			Payload: r.GetPayload(), Fire: r.GetFire()})
	case schema.JobRequest_UNREGISTER:
		return cl.UnregisterSchedule(ctx, &schema.UnregisterScheduleRequest{Name: r.GetName()})
	default:
		return nil, fmt.Errorf("job operation %s has no API call", r.GetKind())
	}
}

func kindName(k schema.JobRequest_Kind) string {
	return strings.ToLower(strings.ReplaceAll(k.String(), "_", "-"))
}

// FetchConfig asks the peers for the running config and returns the first
// answer, decoded, and the node that gave it; the blob must hash to the
// tag the node reports.
func FetchConfig(ctx context.Context, peersFlag string, mat *tlsconf.Material, timeout time.Duration) (*schema.ClusterConfig, error) {
	cl, err := client.NewFromFlag(peersFlag, mat, client.Options{Timeout: timeout})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rep, err := cl.GetConfig(ctx, &schema.GetConfigRequest{})
	if err != nil {
		return nil, err
	}
	return decodeConfig(rep)
}

func decodeConfig(cr *schema.GetConfigResponse) (*schema.ClusterConfig, error) {
	if tag := sm.TagOf(cr.GetBlob()); tag != cr.GetVersionTag() {
		return nil, fmt.Errorf("config blob hashes to tag %016x but the node reports %016x", tag, cr.GetVersionTag())
	}
	return schema.DecodeClusterConfig(cr.GetBlob())
}
