package clitool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// Send runs the job operation req, the API request message of its call
// (the form xcecli's commands build: *schema.SubmitRequest,
// *schema.ClaimRequest, ...; KindOf names them), through that call. The
// errors are package client's: a *client.NodeError for the node's
// refusal, client.ErrOutcomeUnknown, client.ErrNoPrimary.
func Send(ctx context.Context, cl *client.Client, req proto.Message) (*schema.JobResponse, error) {
	rep, err := send(ctx, cl, req)
	var ne *client.NodeError
	switch {
	case errors.Is(err, client.ErrOutcomeUnknown):
		// Not retried elsewhere: a blind retry could apply it twice.
		return nil, fmt.Errorf("%s: %w (check with job get / job list)", KindOf(req), err)
	case errors.As(err, &ne) && ne.Code() == connect.CodeFailedPrecondition:
		return nil, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return rep, err
}

func send(ctx context.Context, cl *client.Client, req proto.Message) (*schema.JobResponse, error) {
	switch r := req.(type) {
	case *schema.SubmitRequest:
		return cl.Submit(ctx, r)
	case *schema.SubmitBatchRequest:
		return cl.SubmitBatch(ctx, r)
	case *schema.ClaimRequest:
		return cl.Claim(ctx, r)
	case *schema.AckRequest:
		return cl.Ack(ctx, r)
	case *schema.AckBatchRequest:
		return cl.AckBatch(ctx, r)
	case *schema.HeartbeatRequest:
		return cl.Heartbeat(ctx, r)
	case *schema.RetryRequest:
		return cl.Retry(ctx, r)
	case *schema.FailRequest:
		return cl.Fail(ctx, r)
	case *schema.CancelRequest:
		return cl.Cancel(ctx, r)
	case *schema.GetRequest:
		return cl.Get(ctx, r)
	case *schema.ListRequest:
		return cl.List(ctx, r)
	case *schema.RedriveRequest:
		return cl.Redrive(ctx, r)
	case *schema.SweepRequest:
		return cl.Sweep(ctx, r)
	case *schema.TickRequest:
		return cl.Tick(ctx, r)
	case *schema.DrainLostAndFoundRequest:
		return cl.DrainLostAndFound(ctx, r)
	case *schema.RegisterScheduleRequest:
		return cl.RegisterSchedule(ctx, r)
	case *schema.UnregisterScheduleRequest:
		return cl.UnregisterSchedule(ctx, r)
	default:
		return nil, fmt.Errorf("%T is not the request of a job operation", req)
	}
}

// KindOf is the job operation whose API request req is; 0 (named
// "job-op?") for any other message.
func KindOf(req proto.Message) sm.JobKind {
	switch req.(type) {
	case *schema.SubmitRequest:
		return sm.JobEnqueue
	case *schema.SubmitBatchRequest:
		return sm.JobEnqueueBatch
	case *schema.ClaimRequest:
		return sm.JobClaim
	case *schema.AckRequest:
		return sm.JobAck
	case *schema.AckBatchRequest:
		return sm.JobAckBatch
	case *schema.HeartbeatRequest:
		return sm.JobHeartbeat
	case *schema.RetryRequest:
		return sm.JobRetry
	case *schema.FailRequest:
		return sm.JobFail
	case *schema.CancelRequest:
		return sm.JobCancel
	case *schema.GetRequest:
		return sm.JobGet
	case *schema.ListRequest:
		return sm.JobList
	case *schema.RedriveRequest:
		return sm.JobRedrive
	case *schema.SweepRequest:
		return sm.JobSweep
	case *schema.TickRequest:
		return sm.JobTick
	case *schema.DrainLostAndFoundRequest:
		return sm.JobDrainLostAndFound
	case *schema.RegisterScheduleRequest:
		return sm.JobRegister
	case *schema.UnregisterScheduleRequest:
		return sm.JobUnregister
	}
	return 0
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
