package sim

import (
	"testing"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// reply is the driver's reply with id (nil if none).
func replyOf(d *ioDriver, id uint64) *sm.Reply {
	for i := range d.replies {
		if d.replies[i].ID == id {
			return &d.replies[i]
		}
	}
	return nil
}

// TestLostAndFoundDrain (seed §14.4 test_lost_and_found_drain): a drain
// moves every sidelined job (both of the removed queue, and the one
// pinned to the removed host) as one logged record and resets
// lost_and_found_job_count to 0; a node booted again over the same disk
// replays the drain to the same state and count. Bad targets are refused
// with nothing logged.
func TestLostAndFoundDrain(t *testing.T) {
	d := bootPrimaryWithOldWAL(t)
	for id, req := range map[uint64]sm.JobRequest{
		1: {Kind: sm.JobDrainLostAndFound},
		2: {Kind: sm.JobDrainLostAndFound, Queue: sm.LostAndFound},
		3: {Kind: sm.JobDrainLostAndFound, Queue: "nope"},
		4: {Kind: sm.JobDrainLostAndFound, Queue: "q0", Host: "nope"},
		5: {Kind: sm.JobDrainLostAndFound, Queue: "q0", Cancel: true},
	} {
		d.feed(sm.ClientOp{ID: id, Req: req})
		if r := replyOf(d, id); r == nil || r.Status != sm.StatusEINVAL {
			t.Fatalf("drain %+v: %+v, want a refusal", req, r)
		}
	}
	if got := d.node.LostAndFoundCount(); got != 2 {
		t.Fatalf("lost_and_found_job_count = %d before the drain, want 2", got)
	}
	d.feed(sm.ClientOp{ID: 10, Req: sm.JobRequest{Kind: sm.JobDrainLostAndFound, Queue: "q0", Host: "h0"}})
	r := replyOf(d, 10)
	if r == nil || r.Status != sm.StatusOK || !r.OK || r.Moved != 3 || r.LSN == 0 {
		t.Fatalf("drain: %+v, want 3 jobs moved by a logged record", r)
	}
	check := func(n *sm.Node, when string) {
		t.Helper()
		if got := n.LostAndFoundCount(); got != 0 {
			t.Fatalf("%s: lost_and_found_job_count = %d, want 0", when, got)
		}
		q, _, _ := n.JobState()
		for _, j := range q.List("") {
			if j.Queue != "q0" || j.Pin == sm.LostAndFound || j.State != queue.Pending {
				t.Fatalf("%s: job %+v still sidelined", when, j)
			}
			if string(j.Payload) == "c" && j.Pin != "h0" {
				t.Fatalf("%s: the job pinned to the removed host is pinned to %q, want h0", when, j.Pin)
			}
		}
		if got := len(q.List("q0")); got != 4 {
			t.Fatalf("%s: q0 holds %d jobs, want 4", when, got)
		}
	}
	check(d.node, "live")

	// The same WAL replayed by a fresh node: the drain record is applied
	// after the routing of the old records.
	n, err := sm.NewNode(sm.DefaultOptions(0, []string{"n0"}))
	if err != nil {
		t.Fatal(err)
	}
	again := &ioDriver{t: t, node: n, disk: d.disk}
	again.feed(sm.Boot{Seed: 2})
	if _, _, ok := n.JobState(); !ok {
		t.Fatalf("no recovered job state; logs %v", again.logs)
	}
	check(n, "replayed")

	// A second drain finds nothing to do.
	again.feed(sm.ClientOp{ID: 12, Req: sm.JobRequest{Kind: sm.JobDrainLostAndFound, Queue: "q0"}})
	if r := replyOf(again, 12); r == nil || r.Status != sm.StatusOK || r.Moved != 0 {
		t.Fatalf("drain with nothing sidelined: %+v", r)
	}
}

// A drain with cancel deletes the sidelined jobs and keeps the others.
func TestLostAndFoundDrainCancel(t *testing.T) {
	d := bootPrimaryWithOldWAL(t)
	d.feed(sm.ClientOp{ID: 1, Req: sm.JobRequest{Kind: sm.JobDrainLostAndFound, Cancel: true}})
	if r := replyOf(d, 1); r == nil || r.Status != sm.StatusOK || r.Moved != 3 {
		t.Fatalf("cancel: %+v, want 3 jobs deleted", r)
	}
	q, _, _ := d.node.JobState()
	if jobs := q.List(""); len(jobs) != 1 || string(jobs[0].Payload) != "b" || d.node.LostAndFoundCount() != 0 {
		t.Fatalf("after cancel: %+v, count %d", jobs, d.node.LostAndFoundCount())
	}
}
