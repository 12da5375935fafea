package api

import (
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// jobResponse is the API's answer to a job operation of kind, rendered
// from the node's reply r: the one place a reply takes the API's form. A
// submit's reply names the new jobs by id, and a single submit's also
// carries the job without its payload: the submitter holds it, and
// echoing a batch of a thousand back cost the primary a fifth of its CPU
// in compressing it. A batch's jobs are alike but for id and payload, and
// building and encoding them whole took a third of the bytes a primary
// allocated while inserting (docs/performance.md): its reply has only the
// ids.
func jobResponse(kind sm.JobKind, r *sm.Reply) *schema.JobResponse {
	out := &schema.JobResponse{Oks: r.OKs, Moved: uint32(r.Moved), Deleted: uint32(r.Deleted), Lsn: r.LSN, At: r.At, More: r.More}
	submit := kind == sm.JobEnqueue || kind == sm.JobEnqueueBatch
	if submit {
		out.Ids = r.IDs // an enqueue batch's; an enqueue's is its job's
		if kind == sm.JobEnqueue {
			out.Ids = make([]uint64, len(r.Jobs))
			for i, j := range r.Jobs {
				out.Ids[i] = j.ID
			}
		}
		// An earlier submit's job (its idempotency key's) is named by
		// id alone, as a batch's are: Get shows it as it is now.
		out.Deduplicated = r.Deduplicated
		if kind == sm.JobEnqueueBatch || len(r.Deduplicated) > 0 {
			return out
		}
	}
	if len(r.Jobs) > 0 {
		out.Jobs = make([]*schema.SnapshotJob, len(r.Jobs))
	}
	for i, j := range r.Jobs {
		out.Jobs[i] = jobToProto(j)
		if submit {
			out.Jobs[i].Payload = nil
		}
	}
	return out
}

// jobToProto is the API's view of a job (every field, dead ones included).
func jobToProto(j queue.Job) *schema.SnapshotJob {
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

// schedulesResponse is the API's list of schedules: a next fire time of
// queue.Never (no slot within the cron horizon) is 0, "never again".
func schedulesResponse(r *sm.Reply) *schema.ListSchedulesResponse {
	out := &schema.ListSchedulesResponse{Schedules: make([]*schema.ScheduleInfo, len(r.Schedules))}
	for i, sc := range r.Schedules {
		next := sc.Next
		if next == queue.Never {
			next = 0
		}
		out.Schedules[i] = &schema.ScheduleInfo{Name: sc.Name, Spec: sc.Spec, Queue: sc.Queue, Payload: sc.Payload,
			Fire: &schema.WalFireOpts{Priority: sc.Fire.Priority, ExpiresS: sc.Fire.ExpiresS}, NextFire: next}
	}
	return out
}
