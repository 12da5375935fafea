package sm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// The metrics views (metricsview.go) on the step harness.

// A primary lists every configured queue, empty ones too, with its jobs by
// state, and counts the records of its active WAL segment; a standby lists
// no queues.
func TestQueueDepthsAndWALRecords(t *testing.T) {
	h, p := threeNodes(t)
	pn := h.node(p).n
	want := []sm.QueueDepth{{Queue: "q0"}, {Queue: "q1"}}
	if got := pn.QueueDepths(); !equalDepths(got, want) {
		t.Fatalf("fresh primary: queue depths %+v, want %+v", got, want)
	}
	before := pn.WALRecordsSinceCheckpoint()
	enqueueN(t, h, p, 3, 100)
	h.enqueue(p, sm.ClientOp{ID: 200, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 1}})
	h.run()
	at := pn.QueueDepths()[0].OldestPendingAt // the enqueues' second
	want = []sm.QueueDepth{{Queue: "q0", Pending: 2, Processing: 1, OldestPendingAt: at,
		Throughput: queue.Throughput{Enqueued: 3, Claimed: 1}}, {Queue: "q1"}}
	if got := pn.QueueDepths(); !equalDepths(got, want) || at <= epoch/int64(time.Second) {
		t.Errorf("after 3 enqueues and a claim: %+v, want %+v", got, want)
	}
	if got := pn.WALRecordsSinceCheckpoint(); got != before+4 {
		t.Errorf("WAL records since checkpoint %d, want %d (+3 enqueues, +1 claim)", got, before+4)
	}
	s := h.node((p + 1) % 3).n
	if got := s.QueueDepths(); got != nil {
		t.Errorf("standby lists queues: %+v", got)
	}
	if got := s.WALRecordsSinceCheckpoint(); got == 0 {
		t.Errorf("standby counts no replicated records in its active segment")
	}
}

// The queue metrics across a failover: the oldest pending job's ready
// time moves with the claims and is the same on the next primary, which
// rebuilds it from the replicated snapshot and log; the counters are the
// process's own, zero on the next primary until it applies something
// (its replay of the log is not counted).
func TestQueueMetricsAcrossFailover(t *testing.T) {
	h, p := threeNodes(t)
	pn := h.node(p).n
	enqueueN(t, h, p, 2, 100) // at second s
	first := pn.QueueDepths()[0].OldestPendingAt
	h.advance(5 * time.Second)
	enqueueN(t, h, p, 2, 200) // at about s+6
	if got := pn.QueueDepths()[0].OldestPendingAt; got != first {
		t.Fatalf("oldest pending at %d after later enqueues, want the first ones' %d", got, first)
	}
	h.enqueue(p, sm.ClientOp{ID: 300, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 2}})
	h.run()
	before := pn.QueueDepths()[0]
	if before.OldestPendingAt <= first+5 || before.Pending != 2 {
		t.Fatalf("after claiming the two oldest: %+v, want the later jobs' time (> %d) and 2 pending", before, first+5)
	}
	if want := (queue.Throughput{Enqueued: 4, Claimed: 2}); before.Throughput != want {
		t.Errorf("primary's counters %+v, want %+v", before.Throughput, want)
	}
	h.advance(time.Second) // the claim replicated
	h.kill(p)
	np := -1
	h.advanceUntil(30*time.Second, func() bool {
		for _, i := range primaries(h) {
			if i != p && h.node(i).n.QueueDepths() != nil {
				np = i
				return true
			}
		}
		return false
	})
	if np < 0 {
		t.Fatal("no new primary recovered its job state")
	}
	after := h.node(np).n.QueueDepths()[0]
	want := before
	want.Throughput = queue.Throughput{}
	if after != want {
		t.Errorf("new primary: %+v, want %+v (the same jobs and oldest pending, zero counters)", after, want)
	}
	enqueueN(t, h, np, 1, 400)
	if got, want := h.node(np).n.QueueDepths()[0].Throughput, (queue.Throughput{Enqueued: 1}); got != want {
		t.Errorf("new primary's counters after one enqueue %+v, want %+v", got, want)
	}
}

// Readiness: the primary and its synced standbys are ready; a standby
// whose primary restarted is not, nor is a candidate, each with a
// one-line reason; after the failover every node is ready again.
func TestReadiness(t *testing.T) {
	h, p := threeNodes(t)
	for i := range 3 {
		ready, why := h.node(i).n.Readiness()
		if !ready {
			t.Fatalf("n%d not ready in a healthy cluster: %s", i, why)
		}
		role := h.node(i).n.Role().String()
		if !strings.HasPrefix(why, role+":") {
			t.Errorf("n%d reason %q does not start with its role %s", i, why, role)
		}
	}
	h.kill(p)
	h.newProcess(h.node(p))
	h.boot(p)
	seen := map[string]bool{}
	h.advanceUntil(30*time.Second, func() bool {
		for i := range 3 {
			if ready, why := h.node(i).n.Readiness(); !ready {
				seen[why] = true
			}
		}
		if len(seen) == 0 || len(primaries(h)) != 1 {
			return false
		}
		for i := range 3 {
			if ready, _ := h.node(i).n.Readiness(); !ready {
				return false
			}
		}
		return true
	})
	lost, syncing := false, false
	for why := range seen {
		if strings.Contains(why, "\n") {
			t.Errorf("not-ready reason %q is not one line", why)
		}
		lost = lost || strings.HasPrefix(why, "standby: lost its primary "+h.node(p).opts.Peers[p])
		syncing = syncing || strings.HasPrefix(why, "standby: syncing its log")
	}
	if !lost || !syncing {
		t.Errorf("no standby reported losing its restarted primary (%v) or syncing from the new one (%v); reasons: %v", lost, syncing, seen)
	}
	for i := range 3 {
		if ready, why := h.node(i).n.Readiness(); !ready {
			t.Errorf("n%d not ready after the failover: %s", i, why)
		}
	}
}

// A node that has no config is not ready.
func TestReadinessWithoutConfig(t *testing.T) {
	h := newHarness(t, 3)
	h.add(0, nil, nil)
	h.boot(0)
	h.advance(time.Second)
	ready, why := h.node(0).n.Readiness()
	if ready || !strings.Contains(why, "no config") {
		t.Errorf("config-less node: ready=%v %q, want not ready for want of a config", ready, why)
	}
}

func equalDepths(a, b []sm.QueueDepth) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
