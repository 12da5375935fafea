package daemon

import (
	"testing"

	"xce/sm"
	"xce/sm/queue"
)

// A submit's reply leaves the payloads out (the submitter has them); every
// other reply carries jobs whole.
// TestJobReplyShapes: a submit names its new jobs by id in order; a
// single submit also carries its job without the payload, a batch no
// jobs; every other reply carries its jobs whole.
func TestJobReplyShapes(t *testing.T) {
	r := sm.Reply{OK: true, Jobs: []queue.Job{{ID: 7, Queue: "q", Payload: []byte("p1")}, {ID: 9, Queue: "q", Payload: []byte("p2")}}}
	for _, tc := range []struct {
		kind               sm.JobKind
		jobs, payload, ids bool
	}{
		{sm.JobEnqueue, true, false, true}, {sm.JobEnqueueBatch, false, false, true},
		{sm.JobClaim, true, true, false}, {sm.JobGet, true, true, false}, {sm.JobList, true, true, false}, {sm.JobTick, true, true, false},
	} {
		out := JobReplyToProto(tc.kind, r)
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
