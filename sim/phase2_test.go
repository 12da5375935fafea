package sim

import (
	"strings"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// oldWAL writes a WAL segment produced under a config that had queue
// "old" (id 9), resource 77 and host "gone": the config of the node that
// replays it has none of them (seed 002 §6.5, §14.1 Phase 2).
func oldWAL(t *testing.T, d *simdisk.Disk) {
	t.Helper()
	st := &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 3}
	recs := []*schema.WalRecord{
		{Lsn: 1, Now: 1000, Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "old", QueueId: 9, Payload: []byte("a"), Stamps: st}}},
		{Lsn: 2, Now: 1001, Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "q0", QueueId: 1, Payload: []byte("b"), Stamps: st, Resource: 77}}},
		{Lsn: 3, Now: 1002, Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "q0", QueueId: 1, Payload: []byte("c"), Stamps: st, Host: "gone"}}},
		{Lsn: 4, Now: 1003, Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "old", QueueId: 9, Payload: []byte("d"), Stamps: st}}},
	}
	var data []byte
	for _, r := range recs {
		var err error
		if data, err = wal.AppendFrame(data, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range []sm.FileOp{
		{Op: sm.OpMkdir, Path: sm.DataDir}, {Op: sm.OpMkdir, Path: wal.WALDir},
		{Op: sm.OpWrite, Path: wal.SegmentPath(1), Data: data}, {Op: sm.OpFsync, Path: wal.SegmentPath(1)},
		{Op: sm.OpFsyncDir, Path: wal.WALDir}, {Op: sm.OpFsyncDir, Path: sm.DataDir}, {Op: sm.OpFsyncDir, Path: ""},
	} {
		if r := d.Exec(op, epoch); r.Err != sm.IOOK {
			t.Fatalf("%s %s: %v", op.Op, op.Path, r.Err)
		}
	}
}

// bootPrimaryWithOldWAL boots a single-node primary (config: queue q0,
// host h0, resource 1) over oldWAL and returns the driver.
func bootPrimaryWithOldWAL(t *testing.T) *ioDriver {
	t.Helper()
	d := simdisk.New()
	cfg := &schema.ClusterConfig{ConfigGeneration: 1, Port: 7000,
		Queues:    []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 30, MaxAttempts: 3}},
		Hosts:     []*schema.Host{{Name: "h0"}},
		Resources: []*schema.Resource{{Id: 1, Name: "gpu", Count: 1}}}
	blob, err := schema.Encode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustProvision(t, d, blob, epoch)
	oldWAL(t, d)
	n, err := sm.NewNode(sm.DefaultOptions(0, []string{"n0"}))
	if err != nil {
		t.Fatal(err)
	}
	drv := &ioDriver{t: t, node: n, disk: d}
	drv.feed(sm.Boot{Seed: 1})
	if q, _, ok := n.JobState(); !ok || q == nil {
		t.Fatalf("no recovered job state; role %s; logs %v", n.Role(), drv.logs)
	}
	return drv
}

func logsWithKey(d *ioDriver, key string) []sm.Log {
	var out []sm.Log
	for _, l := range d.logs {
		if l.Key == key {
			out = append(out, l)
		}
	}
	return out
}

// TestUpgradeConfigWalUnknownID (seed §14.1 test_upgrade_config_wal_unknown_id):
// unknown queue -> lost_and_found queue; unknown resource -> cleared, PEND;
// unknown host -> lost_and_found host; each with its WARN naming the
// record's offset and the WAL file.
func TestUpgradeConfigWalUnknownID(t *testing.T) {
	d := bootPrimaryWithOldWAL(t)
	q, _, _ := d.node.JobState()
	jobs := q.List("")
	if len(jobs) != 4 {
		t.Fatalf("recovered %d jobs, want 4", len(jobs))
	}
	byPayload := map[string]queue.Job{}
	for _, j := range jobs {
		byPayload[string(j.Payload)] = j
	}
	if j := byPayload["a"]; j.Queue != sm.LostAndFound {
		t.Errorf("job of removed queue: queue %q, want lost_and_found", j.Queue)
	}
	if j := byPayload["b"]; j.Resource != 0 || j.State != queue.Pending || j.Queue != "q0" {
		t.Errorf("job with removed resource: %+v, want resource cleared and pending in q0", j)
	}
	if j := byPayload["c"]; j.Pin != sm.LostAndFound {
		t.Errorf("job pinned to removed host: pin %q, want lost_and_found", j.Pin)
	}
	path := wal.SegmentPath(1)
	for key, want := range map[string]string{"wal.unknown-queue": "unknown queue 'old' at offset 0 in " + path,
		"wal.unknown-resource": "unknown resource id=77", "wal.unknown-host": "unknown host 'gone'"} {
		ls := logsWithKey(d, key)
		if len(ls) == 0 || ls[0].Level != sm.Warn || !strings.Contains(ls[0].Text, want) {
			t.Errorf("%s: logs %v, want a WARN containing %q", key, ls, want)
		}
	}
}

// TestLostAndFoundQueue (test_lost_and_found_queue): both jobs of the
// removed queue sit in lost_and_found, which is listed and claimable by
// operators but refuses submissions with the seed's message.
func TestLostAndFoundQueue(t *testing.T) {
	d := bootPrimaryWithOldWAL(t)
	q, _, _ := d.node.JobState()
	if got := len(q.List(sm.LostAndFound)); got != 2 {
		t.Fatalf("lost_and_found holds %d jobs, want 2", got)
	}
	d.feed(sm.ClientOp{ID: 7, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: sm.LostAndFound, Payload: []byte("x")}})
	d.feed(sm.ClientOp{ID: 8, Req: sm.JobRequest{Kind: sm.JobList, Queue: sm.LostAndFound}})
	var refused, listed *sm.Reply
	for _, r := range d.replies {
		switch r.ID {
		case 7:
			refused = &r
		case 8:
			listed = &r
		}
	}
	want := "Cannot submit jobs to 'lost_and_found' — this is an internal recovery queue."
	if refused == nil || refused.Status == sm.StatusOK || refused.Error != want {
		t.Fatalf("submit to lost_and_found: %+v, want refusal %q", refused, want)
	}
	if listed == nil || listed.Status != sm.StatusOK || len(listed.Jobs) != 2 {
		t.Fatalf("list lost_and_found: %+v, want its 2 jobs", listed)
	}
}

// TestLostAndFoundCounter (test_lost_and_found_counter): the counter counts
// the routed jobs and the startup WARN summary reports it.
func TestLostAndFoundCounter(t *testing.T) {
	d := bootPrimaryWithOldWAL(t)
	if got := d.node.LostAndFoundCount(); got != 2 {
		t.Fatalf("lost_and_found_job_count = %d, want 2", got)
	}
	ls := logsWithKey(d, "wal.lost-and-found")
	if len(ls) != 1 || ls[0].Level != sm.Warn || !strings.Contains(ls[0].Text, "lost_and_found_job_count=2") {
		t.Fatalf("startup summary %v, want one WARN with lost_and_found_job_count=2", ls)
	}
}

// TestPrimaryMaintenance: the primary sweeps expired jobs and fires due
// schedules on its own maintenance timer, as logged records.
func TestPrimaryMaintenance(t *testing.T) {
	d := bootPrimaryWithOldWAL(t)
	d.feed(sm.ClientOp{ID: 1, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("short"), Expires: 5}})
	d.feed(sm.ClientOp{ID: 2, Req: sm.JobRequest{Kind: sm.JobRegister, Name: "every10", Spec: "@every 10s", Queue: "q0"}})
	if len(d.replies) != 2 || d.replies[0].Status != sm.StatusOK || d.replies[1].Status != sm.StatusOK {
		t.Fatalf("setup replies %+v", d.replies)
	}
	id := d.replies[0].Jobs[0].ID
	q, before, _ := d.node.JobState()
	d.now += 20 * 1e9 // past the expiry and past a schedule boundary
	if !d.fire(sm.TimerMaintenance) {
		t.Fatal("maintenance timer not armed on the primary")
	}
	j, ok := q.Get(id)
	if !ok || j.State != queue.Dead || j.LastError != "expired" {
		t.Fatalf("expired job after maintenance: %+v", j)
	}
	fired := 0
	for _, jb := range q.List("q0") {
		if jb.Payload == nil && jb.State == queue.Pending {
			fired++
		}
	}
	if fired == 0 {
		t.Fatal("the due schedule did not fire")
	}
	if _, after, _ := d.node.JobState(); after != before+2 {
		t.Fatalf("durable lsn %d -> %d, want two maintenance records (sweep, tick)", before, after)
	}
	if _, ok := d.timers[sm.TimerMaintenance]; !ok {
		t.Fatal("maintenance timer not re-armed")
	}
}
