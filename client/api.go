package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/schemaconnect"
)

// The API's calls, one per RPC of the Xce service (schema/api.proto). A
// mutation's lost answer is ErrOutcomeUnknown, never retried, but for a
// submit with idempotency keys; a read is retried on the next node.

// Submit enqueues one job, as a message on a SubmitStream stream
// (submits.go). With an idempotency key the submit is safe to
// repeat, and Submit repeats it itself while its outcome is unknown or
// no primary answers (retryKeyed); the answer of a repeat that found the
// first one's job says so (Deduplicated).
func (c *Client) Submit(ctx context.Context, r *schema.SubmitRequest) (*schema.JobResponse, error) {
	if r.GetIdempotencyKey() == "" {
		return c.submit(ctx, r)
	}
	return retryKeyed(ctx, c.opt, func() (*schema.JobResponse, error) { return c.submit(ctx, r) })
}

// SubmitBatch enqueues one job per payload in one durable write. When
// every payload has an idempotency key it is repeated as Submit is.
func (c *Client) SubmitBatch(ctx context.Context, r *schema.SubmitBatchRequest) (*schema.JobResponse, error) {
	keys := r.GetIdempotencyKeys()
	if len(keys) == 0 || len(keys) != len(r.GetPayloads()) || slices.Contains(keys, "") {
		return call(ctx, c, mutation, r, schemaconnect.XceClient.SubmitBatch)
	}
	return retryKeyed(ctx, c.opt, func() (*schema.JobResponse, error) {
		return call(ctx, c, mutation, r, schemaconnect.XceClient.SubmitBatch)
	})
}

// retryKeyed runs a keyed submit until it has a definite answer: while it
// fails with an unknown outcome or no primary, it is sent again after a
// backoff (KeyedRetryBase doubling, at most 2 s), up to KeyedAttempts
// times or until ctx ends. The key makes a repeat answer the first
// submit's job, within the queue's window (5 minutes by default), which
// the retries stay far inside of.
func retryKeyed(ctx context.Context, opt Options, send func() (*schema.JobResponse, error)) (*schema.JobResponse, error) {
	wait := opt.KeyedRetryBase
	var unknown error // the first attempt whose outcome is unknown
	for attempt := 1; ; attempt++ {
		rep, err := send()
		if err != nil && unknown == nil && errors.Is(err, ErrOutcomeUnknown) {
			unknown = err
		}
		if err == nil || attempt >= opt.KeyedAttempts || !errors.Is(err, ErrOutcomeUnknown) && !errors.Is(err, ErrNoPrimary) {
			return rep, keyedErr(err, unknown, attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, keyedErr(fmt.Errorf("%w (keyed submit not repeated: %v)", err, ctx.Err()), unknown, attempt)
		case <-t.C:
		}
		wait = min(2*wait, maxKeyedRetryWait)
	}
}

// keyedErr is the error a keyed submit ends with: last, unless an earlier
// attempt's outcome is unknown and last is not, because that attempt may
// have been applied whatever the later ones were told (no primary, a
// refusal), so the submit as a whole is ErrOutcomeUnknown.
func keyedErr(last, unknown error, attempts int) error {
	if last == nil || unknown == nil || errors.Is(last, ErrOutcomeUnknown) {
		return last
	}
	return fmt.Errorf("%w; the last of %d attempts: %v", unknown, attempts, last)
}

// Claim claims up to max ready jobs for a worker host. With r.Ack (the
// handles of jobs done, at most 1000) it first acknowledges them in the
// same call, as AckBatch would, and one durable write carries both:
// Oks is then their results, in order. A lost answer is
// ErrOutcomeUnknown for the acks too.
func (c *Client) Claim(ctx context.Context, r *schema.ClaimRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.Claim)
}

// Ack completes a claimed job; a stale handle is code failed_precondition.
func (c *Client) Ack(ctx context.Context, r *schema.AckRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.Ack)
}

// AckBatch completes several claimed jobs; Oks says which handles were taken.
func (c *Client) AckBatch(ctx context.Context, r *schema.AckBatchRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.AckBatch)
}

// Heartbeat extends a claim; a stale handle is code failed_precondition.
func (c *Client) Heartbeat(ctx context.Context, r *schema.HeartbeatRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.Heartbeat)
}

// Retry gives a claimed job back for a later attempt: after the queue's
// backoff, or after r.Delay seconds when the worker sets it (at most 24 h;
// RetryAfter).
func (c *Client) Retry(ctx context.Context, r *schema.RetryRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.Retry)
}

// RetryAfter gives the claimed job h back with errMsg, claimable again
// only after delay (whole seconds, rounded up; at most 24 h), not after
// the queue's backoff. A delay under a second, zero included, is one
// second: "0" would mean the backoff.
func (c *Client) RetryAfter(ctx context.Context, h *schema.WalHandle, errMsg string, delay time.Duration) (*schema.JobResponse, error) {
	s := int64((delay + time.Second - 1) / time.Second)
	return c.Retry(ctx, &schema.RetryRequest{Handle: h, Error: errMsg, Delay: max(s, 1)})
}

// Fail dead-letters a claimed job.
func (c *Client) Fail(ctx context.Context, r *schema.FailRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.Fail)
}

// Cancel deletes a pending job.
func (c *Client) Cancel(ctx context.Context, r *schema.CancelRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.Cancel)
}

// Get reads one job; an unknown id is code not_found.
func (c *Client) Get(ctx context.Context, r *schema.GetRequest) (*schema.JobResponse, error) {
	return call(ctx, c, read, r, schemaconnect.XceClient.Get)
}

// List reads one page of a queue's jobs.
func (c *Client) List(ctx context.Context, r *schema.ListRequest) (*schema.JobResponse, error) {
	return call(ctx, c, read, r, schemaconnect.XceClient.List)
}

// Redrive moves a dead job back to pending (admin).
func (c *Client) Redrive(ctx context.Context, r *schema.RedriveRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.Redrive)
}

// Sweep dead-letters expired jobs and deletes dead ones past retention (admin).
func (c *Client) Sweep(ctx context.Context, r *schema.SweepRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.Sweep)
}

// Tick fires the schedules that are due (admin).
func (c *Client) Tick(ctx context.Context, r *schema.TickRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.Tick)
}

// DrainLostAndFound moves or deletes the jobs in lost_and_found (admin).
func (c *Client) DrainLostAndFound(ctx context.Context, r *schema.DrainLostAndFoundRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.DrainLostAndFound)
}

// RegisterSchedule creates or replaces a schedule.
func (c *Client) RegisterSchedule(ctx context.Context, r *schema.RegisterScheduleRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.RegisterSchedule)
}

// UnregisterSchedule deletes a schedule.
func (c *Client) UnregisterSchedule(ctx context.Context, r *schema.UnregisterScheduleRequest) (*schema.JobResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.UnregisterSchedule)
}

// ListSchedules lists every schedule with its next fire time, sorted by
// name (the primary's).
func (c *Client) ListSchedules(ctx context.Context, r *schema.ListSchedulesRequest) (*schema.ListSchedulesResponse, error) {
	return call(ctx, c, read, r, schemaconnect.XceClient.ListSchedules)
}

// GetConfig is the running config of the first node that has one.
func (c *Client) GetConfig(ctx context.Context, r *schema.GetConfigRequest) (*schema.GetConfigResponse, error) {
	return call(ctx, c, local, r, schemaconnect.XceClient.GetConfig)
}

// ListQueues lists the running config's queues.
func (c *Client) ListQueues(ctx context.Context, r *schema.ListQueuesRequest) (*schema.ListQueuesResponse, error) {
	return call(ctx, c, local, r, schemaconnect.XceClient.ListQueues)
}

// ListHosts lists the running config's hosts and resources.
func (c *Client) ListHosts(ctx context.Context, r *schema.ListHostsRequest) (*schema.ListHostsResponse, error) {
	return call(ctx, c, local, r, schemaconnect.XceClient.ListHosts)
}

// UpgradeConfig is OP_upgradeConfig (admin): the primary saves the config, pushes it to its standbys and restarts with it.
func (c *Client) UpgradeConfig(ctx context.Context, r *schema.UpgradeConfigRequest) (*schema.UpgradeConfigResponse, error) {
	return call(ctx, c, mutation, r, schemaconnect.XceClient.UpgradeConfig)
}

// Switchover asks the primary (admin) to hand its role to the standby
// named to ("": the primary picks the synced standby with the most of its
// log). It answers once the target leads, naming it and its term; the
// client then prefers it. A standby does not forward it: its "not
// primary" answer is followed to the primary, as for any call. Refusals
// are *NodeError with the codes schema/api.proto lists (failed
// precondition: the target is not in sync; aborted: busy, or the handover
// did not complete in time). Like every mutation, a lost answer is
// ErrOutcomeUnknown and is not sent again: ClusterStatus tells who leads.
func (c *Client) Switchover(ctx context.Context, to string) (*schema.SwitchoverResponse, error) {
	rep, err := call(ctx, c, mutation, &schema.SwitchoverRequest{To: to}, schemaconnect.XceClient.Switchover)
	if err != nil {
		return nil, err
	}
	if p := c.indexOf(rep.GetPrimary()); p >= 0 {
		c.setPrimary(p) // the node that answered has stepped down
	}
	return rep, nil
}

// ClusterStatus asks node i (an index into Peers) for its view of the
// cluster, a primary's queue depths included; that node only, no search.
func (c *Client) ClusterStatus(ctx context.Context, i int) (*schema.StatusReply, error) {
	st, _, err := once(ctx, c, i, OnBehalf{}, &schema.ClusterStatusRequest{Queues: true}, schemaconnect.XceClient.ClusterStatus)
	return st, err
}
