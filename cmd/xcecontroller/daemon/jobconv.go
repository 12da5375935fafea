package daemon

import (
	"time"
	"xce/schema"
	"xce/sm"
	"xce/sm/queue"
)

// JobRequestFromProto converts the wire form of a job operation.
func JobRequestFromProto(j *schema.JobRequest) sm.JobRequest {
	req := sm.JobRequest{Kind: sm.JobKind(j.GetKind()), Queue: j.GetQueue(), Payload: j.GetPayload(), Priority: j.GetPriority(),
		Delay: j.GetDelay(), RunAt: j.GetRunAt(), Expires: j.GetExpires(), Resource: j.GetResource(), Host: j.GetHost(),
		Max: int(j.GetMax()), Wait: time.Duration(j.GetWaitMs()) * time.Millisecond, ID: j.GetId(), AfterID: j.GetAfterId(), Error: j.GetError(), Name: j.GetName(), Spec: j.GetSpec(),
		Handle: sm.HandleOf(j.GetHandle()), Cancel: j.GetCancel(), JSON: j.GetJson(),
		Fire: queue.FireOpts{Priority: j.GetFire().GetPriority(), ExpiresS: j.GetFire().GetExpiresS()}}
	req.Payloads = j.GetPayloads()
	for _, h := range j.GetHandles() {
		req.Handles = append(req.Handles, sm.HandleOf(h))
	}
	return req
}

// JobReplyToProto converts a node's reply to a request of kind for the
// wire. A submit's reply names the new jobs by id, and a single submit's
// also carries the job without its payload: the submitter holds it, and
// echoing a batch of a thousand back cost the primary a fifth of its CPU
// in compressing it. A batch's jobs are alike but for id and payload, and
// building and encoding them whole took a third of the bytes a primary
// allocated while inserting (docs/performance.md): its reply has only the
// ids.
func JobReplyToProto(kind sm.JobKind, r sm.Reply) *schema.JobReply {
	out := &schema.JobReply{Ok: r.OK, Oks: r.OKs, Moved: uint32(r.Moved), Deleted: uint32(r.Deleted), Lsn: r.LSN, At: r.At, Primary: int32(r.Primary), More: r.More}
	submit := kind == sm.JobEnqueue || kind == sm.JobEnqueueBatch
	if submit {
		out.Ids = make([]uint64, len(r.Jobs))
		for i, j := range r.Jobs {
			out.Ids[i] = j.ID
		}
		if kind == sm.JobEnqueueBatch {
			return out
		}
	}
	if len(r.Jobs) > 0 {
		out.Jobs = make([]*schema.SnapshotJob, len(r.Jobs))
	}
	for i, j := range r.Jobs {
		out.Jobs[i] = JobToProto(j)
		if submit {
			out.Jobs[i].Payload = nil
		}
	}
	return out
}

// JobToProto is the wire view of a job (every field, dead ones included).
func JobToProto(j queue.Job) *schema.SnapshotJob {
	st := schema.JobState_JOB_STATE_PENDING
	switch j.State {
	case queue.Processing:
		st = schema.JobState_JOB_STATE_PROCESSING
	case queue.Dead:
		st = schema.JobState_JOB_STATE_DEAD
	}
	return &schema.SnapshotJob{Id: j.ID, Queue: j.Queue, Payload: j.Payload, Priority: j.Priority, State: st, RunAt: j.RunAt, Seq: j.Seq,
		EnqueuedAt: j.EnqueuedAt, ExpiresAt: j.ExpiresAt, Attempts: j.Attempts,
		Stamps: &schema.WalStamps{VisibilityTimeoutS: j.Stamps.VisibilityTimeoutS, MaxAttempts: j.Stamps.MaxAttempts, BackoffBaseS: j.Stamps.BackoffBaseS, DeadLetterRetentionS: j.Stamps.DeadLetterRetentionS},
		Host:   j.Host, Resource: j.Resource, ClaimedAt: j.ClaimedAt, ClaimExpiresAt: j.ClaimExpiresAt, LastError: j.LastError, DiedAt: j.DiedAt,
		Claims: j.Claims, Pin: j.Pin, ClaimTerm: j.Claim.Term, ClaimLsn: j.Claim.LSN}
}
