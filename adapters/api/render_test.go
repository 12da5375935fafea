package api

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// TestJobReplyShapes: a submit names its new jobs by id in order; a
// single submit also carries its job without the payload, a batch no
// jobs (the node's reply to it has ids alone, sm.Reply.IDs); every other
// reply carries its jobs whole.
func TestJobReplyShapes(t *testing.T) {
	whole := sm.Reply{OK: true, Jobs: []queue.Job{{ID: 7, Queue: "q", Payload: []byte("p1")}, {ID: 9, Queue: "q", Payload: []byte("p2")}}}
	ids := sm.Reply{OK: true, IDs: []uint64{7, 9}}
	for _, tc := range []struct {
		kind               sm.JobKind
		jobs, payload, ids bool
	}{
		{sm.JobEnqueue, true, false, true}, {sm.JobEnqueueBatch, false, false, true},
		{sm.JobClaim, true, true, false}, {sm.JobGet, true, true, false}, {sm.JobList, true, true, false}, {sm.JobTick, true, true, false},
	} {
		r := whole
		if tc.kind == sm.JobEnqueueBatch {
			r = ids
		}
		out := jobResponse(tc.kind, &r)
		if got := out.GetIds(); tc.ids != (len(got) > 0) || tc.ids && (len(got) != 2 || got[0] != 7 || got[1] != 9) {
			t.Errorf("%v: ids %v, want them: %v", tc.kind, got, tc.ids)
		}
		if !tc.jobs {
			if len(out.GetJobs()) != 0 {
				t.Errorf("%v: %d jobs, want none", tc.kind, len(out.GetJobs()))
			}
			continue
		}
		if len(out.GetJobs()) != 2 {
			t.Fatalf("%v: %d jobs, want 2", tc.kind, len(out.GetJobs()))
		}
		for i, j := range out.GetJobs() {
			if j.GetId() != r.Jobs[i].ID || j.GetQueue() != "q" {
				t.Errorf("%v: job %d = %v", tc.kind, i, j)
			}
			if got := len(j.GetPayload()) > 0; got != tc.payload {
				t.Errorf("%v: job %d payload %q, want it there: %v", tc.kind, i, j.GetPayload(), tc.payload)
			}
		}
	}
}

// Every field of the node's reply and of its jobs reaches the response,
// under the API's name.
func TestJobResponseFields(t *testing.T) {
	j := queue.Job{ID: 3, Queue: "q", Payload: []byte("p"), Priority: -2, State: queue.Dead, RunAt: 4, Seq: 5, EnqueuedAt: 6, ExpiresAt: 7,
		Attempts: 8, Stamps: queue.Stamps{VisibilityTimeoutS: 9, MaxAttempts: 10, BackoffBaseS: 11, DeadLetterRetentionS: 12},
		Pin: "pin", Host: "h", Resource: 13, ClaimedAt: 14, ClaimExpiresAt: 15, LastError: "e", DiedAt: 16, Claims: 17,
		Claim: queue.ClaimStamp{Term: 18, LSN: 19}}
	r := &sm.Reply{OK: true, OKs: []bool{true, false}, Jobs: []queue.Job{j}, Moved: 20, Deleted: 21, LSN: 22, At: 23, More: true, Primary: 1}
	got := jobResponse(sm.JobGet, r)
	want := &schema.JobResponse{Oks: []bool{true, false}, Moved: 20, Deleted: 21, Lsn: 22, At: 23, More: true,
		Jobs: []*schema.SnapshotJob{{Id: 3, Queue: "q", Payload: []byte("p"), Priority: -2, State: schema.JobState_JOB_STATE_DEAD, RunAt: 4, Seq: 5,
			EnqueuedAt: 6, ExpiresAt: 7, Attempts: 8,
			Stamps: &schema.WalStamps{VisibilityTimeoutS: 9, MaxAttempts: 10, BackoffBaseS: 11, DeadLetterRetentionS: 12},
			Pin:    "pin", Host: "h", Resource: 13, ClaimedAt: 14, ClaimExpiresAt: 15, LastError: "e", DiedAt: 16, Claims: 17,
			ClaimTerm: 18, ClaimLsn: 19}}}
	if !proto.Equal(got, want) {
		t.Fatalf("rendered\n%v\nwant\n%v", got, want)
	}
	for st, want := range map[queue.State]schema.JobState{queue.Pending: schema.JobState_JOB_STATE_PENDING, queue.Processing: schema.JobState_JOB_STATE_PROCESSING, queue.Dead: schema.JobState_JOB_STATE_DEAD} {
		if got := jobToProto(queue.Job{State: st}).GetState(); got != want {
			t.Errorf("state %v rendered %v, want %v", st, got, want)
		}
	}
}
