package sm

import (
	"bytes"
	"strings"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

func keysConfig() *schema.ClusterConfig {
	return &schema.ClusterConfig{
		Queues: []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 30, MaxAttempts: 3},
			{Id: 2, Name: "q1", VisibilityTimeoutS: 30, MaxAttempts: 3, IdempotencyWindowS: 600}},
		Hosts: []*schema.Host{{Name: "h0"}},
	}
}

// An idempotency key, end to end through the core's sequential
// specification: a repeat in the window answers the first job and
// enqueues nothing, through a checkpoint and its import and through a
// replay of the log; another payload under the key is refused (EEXIST);
// after the window (the queue's own, logged with the submit) the key
// makes a new job; keys are per queue; a batch judges every key first.
func TestIdempotencyKeys(t *testing.T) {
	cfg := keysConfig()
	q := queue.New()
	lsn := uint64(1)
	var log []*schema.WalRecord
	r := newRouter(cfg)
	submit := func(now int64, req JobRequest) Reply {
		t.Helper()
		if msg := validateJob(r, req); msg != "" {
			return Reply{Status: StatusEINVAL, Error: msg}
		}
		rec, err := buildRecord(r, now, req)
		if err != nil {
			t.Fatal(err)
		}
		rec.Term, rec.Lsn = 1, lsn
		rep, err := applyRecord(q, r, rec)
		if err != nil {
			return Reply{Status: refusedStatus(err), Error: err.Error()}
		}
		if !changedNothing(req.Kind, rep) {
			log = append(log, rec)
			lsn++
		}
		return rep
	}
	one := func(queue, key, payload string) JobRequest {
		return JobRequest{Kind: JobEnqueue, Queue: queue, Payload: []byte(payload), Key: key}
	}
	first := submit(1000, one("q0", "k", "a"))
	if first.Status != StatusOK || len(first.Jobs) != 1 || first.Deduplicated != nil {
		t.Fatalf("first submit: %+v", first)
	}
	id := first.Jobs[0].ID

	again := submit(1100, one("q0", "k", "a"))
	if again.Status != StatusOK || len(again.Jobs) != 1 || again.Jobs[0].ID != id || len(again.Deduplicated) != 1 || !again.Deduplicated[0] {
		t.Fatalf("repeat: %+v, want job %d deduplicated", again, id)
	}
	if !changedNothing(JobEnqueue, again) || len(q.List("")) != 1 {
		t.Fatalf("repeat enqueued or logged: %d jobs", len(q.List("")))
	}
	if rep := submit(1100, one("q0", "k", "b")); rep.Status != StatusEEXIST || !strings.Contains(rep.Error, `key "k" of queue "q0" names job`) {
		t.Fatalf("reused key, another payload: %+v, want EEXIST naming the key", rep)
	}
	if rep := submit(1100, JobRequest{Kind: JobEnqueue, Queue: "q0", Payload: []byte("a"), Key: "k", Priority: 2}); rep.Status != StatusEEXIST {
		t.Fatalf("reused key, other options: %+v, want EEXIST", rep)
	}
	other := submit(1100, one("q1", "k", "a"))
	if other.Status != StatusOK || other.Deduplicated != nil || other.Jobs[0].ID == id {
		t.Fatalf("the same key in another queue: %+v, want a new job", other)
	}

	// The job acked: a repeat still names it (gone, its id and payload).
	h := q.ClaimBatch(1200, "q0", "h0", 1, queue.ClaimStamp{Term: 1, LSN: lsn})[0].Handle()
	if !q.Ack(1201, h) {
		t.Fatal("ack refused")
	}
	if rep := submit(1250, one("q0", "k", "a")); rep.Jobs[0].ID != id || !bytes.Equal(rep.Jobs[0].Payload, []byte("a")) || !rep.Deduplicated[0] {
		t.Fatalf("repeat after the ack: %+v", rep)
	}

	// A checkpoint and its import hold the keys; so does a replay.
	data, err := encodeJobs(q.View(), lsn-1, 1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	back, _, _, err := importSnapshot(data, newRouter(cfg))
	if err != nil {
		t.Fatal(err)
	}
	replayed, _ := ReplayRecords(cfg, log)
	for name, s := range map[string]*queue.Queues{"imported": back, "replayed": replayed} {
		jid, held, err := s.KeyedJob(1299, "q0", []byte("a"), queue.EnqueueOpts{Key: "k", KeyWindow: 300})
		if err != nil || !held || jid != id {
			t.Fatalf("%s state: key names job %d, held %v, err %v; want %d", name, jid, held, err, id)
		}
		if _, held, _ := s.KeyedJob(1300, "q0", []byte("a"), queue.EnqueueOpts{Key: "k", KeyWindow: 300}); held {
			t.Fatalf("%s state: the key outlived its window (300 s from 1000)", name)
		}
	}

	// Past the window: a new job. q1's window is its own, 600 s.
	if rep := submit(1300, one("q0", "k", "a")); rep.Deduplicated != nil || rep.Jobs[0].ID == id {
		t.Fatalf("after the window: %+v, want a new job", rep)
	}
	if rep := submit(1650, one("q1", "k", "a")); !rep.Deduplicated[0] {
		t.Fatalf("q1 at 550 s of its 600 s window: %+v, want deduplicated", rep)
	}

	// A batch: every key judged before any job is made.
	batch := func(keys ...string) JobRequest {
		req := JobRequest{Kind: JobEnqueueBatch, Queue: "q0", Keys: keys}
		for _, k := range keys {
			req.Payloads = append(req.Payloads, []byte("p-"+k))
		}
		return req
	}
	b1 := submit(1400, batch("x", "y"))
	if b1.Status != StatusOK || len(b1.Jobs) != 2 || b1.Deduplicated != nil {
		t.Fatalf("batch: %+v", b1)
	}
	n := len(q.List(""))
	b2 := submit(1401, batch("z", "x"))
	if b2.Status != StatusOK || len(b2.Jobs) != 2 || b2.Jobs[1].ID != b1.Jobs[0].ID || b2.Deduplicated[0] || !b2.Deduplicated[1] || len(q.List("")) != n+1 {
		t.Fatalf("batch with one repeat: %+v, %d jobs (want %d)", b2, len(q.List("")), n+1)
	}
	bad := batch("w", "y")
	bad.Payloads[1] = []byte("changed")
	if rep := submit(1402, bad); rep.Status != StatusEEXIST || len(q.List("")) != n+1 {
		t.Fatalf("batch reusing a key: %+v, %d jobs; want EEXIST and nothing enqueued", rep, len(q.List("")))
	}
	for _, c := range []struct {
		req  JobRequest
		want string
	}{
		{one("q0", strings.Repeat("k", 129), "a"), "longer than 128 bytes"},
		{batch("a", "a"), `the same idempotency key "a"`},
		{JobRequest{Kind: JobEnqueueBatch, Queue: "q0", Payloads: [][]byte{[]byte("a")}, Keys: []string{"a", "b"}}, "2 idempotency keys for 1 payloads"},
		{JobRequest{Kind: JobCancel, ID: 1, Key: "a"}, "only a submit takes one"},
	} {
		if rep := submit(1500, c.req); rep.Status != StatusEINVAL || !strings.Contains(rep.Error, c.want) {
			t.Errorf("%s: %+v, want EINVAL ~%q", c.req.Kind, rep, c.want)
		}
	}
	if _, err := wal.EncodeSnapshot(SnapshotOf(q, lsn, 1)); err != nil {
		t.Fatalf("the state's snapshot message: %v", err)
	}
}
