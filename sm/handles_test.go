package sm_test

import (
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// Two histories share a prefix (term 1: no-op, enqueue); the first goes on
// in term 1 (a claim, an enqueue) and is lost; the second is the next
// primary's log in term 2 from the same LSN (no-op, the same claim, an
// enqueue). The lost claim's handle has the same id and attempt as the
// surviving claim's, and every handle op of the surviving history refuses
// it; neither history's new job ids collide.
func TestHandlesAndIDsAcrossHistories(t *testing.T) {
	cfg, err := schema.DecodeClusterConfig(testConfig(t, "c", 1))
	if err != nil {
		t.Fatal(err)
	}
	noop := func(term, lsn uint64) *schema.WalRecord {
		return &schema.WalRecord{Term: term, Lsn: lsn, Now: 100, Op: &schema.WalRecord_Noop{Noop: &schema.WalNoop{}}}
	}
	enq := func(term, lsn uint64, p string) *schema.WalRecord {
		return &schema.WalRecord{Term: term, Lsn: lsn, Now: 100, Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{
			Queue: "q0", QueueId: 1, Payload: []byte(p), Stamps: &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 5}}}}
	}
	claim := func(term, lsn uint64) *schema.WalRecord {
		return &schema.WalRecord{Term: term, Lsn: lsn, Now: 101, Op: &schema.WalRecord_ClaimBatch{ClaimBatch: &schema.WalClaimBatch{
			Queue: "q0", QueueId: 1, Host: "h0", Max: 1}}}
	}
	prefix := []*schema.WalRecord{noop(1, 1), enq(1, 2, "a")}
	lostLog := append(append([]*schema.WalRecord{}, prefix...), claim(1, 3), enq(1, 4, "lost"))
	liveLog := append(append([]*schema.WalRecord{}, prefix...), noop(2, 3), claim(2, 4), enq(2, 5, "live"))

	lost, _ := sm.ReplayRecords(cfg, lostLog)
	live, _ := sm.ReplayRecords(cfg, liveLog)
	byPayload := func(q *queue.Queues, p string) queue.Job {
		t.Helper()
		for _, j := range q.List("") {
			if string(j.Payload) == p {
				return j
			}
		}
		t.Fatalf("no job %q", p)
		return queue.Job{}
	}
	a := byPayload(live, "a")
	if a.ID != sm.TermIDFloor(1) || a.ID != 1<<40|1 {
		t.Fatalf("first job of term 1 has id %d, want %d", a.ID, uint64(1<<40|1))
	}
	lostH, liveH := byPayload(lost, "a").Handle(), a.Handle()
	if want := (queue.ClaimStamp{Term: 1, LSN: 3}); lostH.Claim != want {
		t.Fatalf("lost claim stamped %+v, want %+v", lostH.Claim, want)
	}
	if want := (queue.ClaimStamp{Term: 2, LSN: 4}); liveH.Claim != want {
		t.Fatalf("live claim stamped %+v, want %+v", liveH.Claim, want)
	}
	if lostH.ID != liveH.ID || lostH.Attempt != liveH.Attempt {
		t.Fatalf("handles %+v / %+v: the scenario wants the same id and attempt", lostH, liveH)
	}
	if l, v := byPayload(lost, "lost").ID, byPayload(live, "live").ID; l == v || v != 2<<40|1 || l != 1<<40|2 {
		t.Fatalf("new job ids: lost history %d, live history %d (want %d and %d)", l, v, uint64(1<<40|2), uint64(2<<40|1))
	}
	for _, kind := range []sm.JobKind{sm.JobAck, sm.JobAckBatch, sm.JobHeartbeat, sm.JobRetry, sm.JobFail} {
		q, _ := sm.ReplayRecords(cfg, liveLog)
		req := sm.JobRequest{Kind: kind, Handle: lostH, Error: "x"}
		if kind == sm.JobAckBatch {
			req.Handles = []queue.Handle{lostH}
		}
		rep := sm.ApplyJob(q, cfg, 2, 6, 102, req)
		if rep.Status != sm.StatusOK || rep.OK || len(rep.OKs) > 0 && rep.OKs[0] {
			t.Fatalf("%s with the lost history's handle: %+v, want refused as a value", kind, rep)
		}
		req.Handle, req.Handles = liveH, []queue.Handle{liveH}
		if kind != sm.JobAckBatch {
			req.Handles = nil
		}
		rep = sm.ApplyJob(q, cfg, 2, 7, 102, req)
		if rep.Status != sm.StatusOK || !rep.OK && (len(rep.OKs) == 0 || !rep.OKs[0]) {
			t.Fatalf("%s with the current handle: %+v, want OK", kind, rep)
		}
	}
	// The stamp and the id floor survive a snapshot round trip.
	snap := sm.SnapshotOf(live, 5, 2)
	if j := snap.GetJobs()[0]; j.GetClaimTerm() != 2 || j.GetClaimLsn() != 4 || snap.GetNextId() != 2<<40|2 {
		t.Fatalf("snapshot job %+v next id %d", j, snap.GetNextId())
	}
}
