package daemon

import (
	"testing"

	"xce/sm"
	"xce/sm/queue"
)

// A submit's reply leaves the payloads out (the submitter has them); every
// other reply carries jobs whole.
func TestJobReplyPayloadOnlyWhereNeeded(t *testing.T) {
	r := sm.Reply{OK: true, Jobs: []queue.Job{{ID: 1, Queue: "q", Payload: []byte("p1")}, {ID: 2, Queue: "q", Payload: []byte("p2")}}}
	for _, tc := range []struct {
		kind sm.JobKind
		want bool
	}{
		{sm.JobEnqueue, false}, {sm.JobEnqueueBatch, false},
		{sm.JobClaim, true}, {sm.JobGet, true}, {sm.JobList, true}, {sm.JobTick, true},
	} {
		out := JobReplyToProto(tc.kind, r)
		if len(out.GetJobs()) != 2 {
			t.Fatalf("%v: %d jobs, want 2", tc.kind, len(out.GetJobs()))
		}
		for i, j := range out.GetJobs() {
			if j.GetId() != uint64(i+1) || j.GetQueue() != "q" {
				t.Errorf("%v: job %d = %v", tc.kind, i, j)
			}
			if got := len(j.GetPayload()) > 0; got != tc.want {
				t.Errorf("%v: job %d payload %q, want it there: %v", tc.kind, i, j.GetPayload(), tc.want)
			}
		}
	}
}
