package sim

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/transport"
	"github.com/xce-hpc/xce/sm"
)

var faultSeedsFlag = flag.Int("fault-seeds", 300, "schedules TestNewFaultsFire runs")

// TestSendQueueLenMatchesTransport: the simulated send queue has the
// daemon's bound.
func TestSendQueueLenMatchesTransport(t *testing.T) {
	if sendQueueLen != transport.DefaultQueueLen || dialTimeout != transport.DefaultDialTimeout {
		t.Fatalf("sim send queue %d, dial timeout %v; transport %d, %v", sendQueueLen, dialTimeout, transport.DefaultQueueLen, transport.DefaultDialTimeout)
	}
}

// TestLinkQueue: on a rated link one message is on the wire at a time, in
// order, each taking its size over the rate; a full queue drops its
// oldest; a reset loses what is on the wire and keeps the queue.
func TestLinkQueue(t *testing.T) {
	sc := Demo(1)
	sc.LinkRate = make([]float64, 9)
	for i := range sc.LinkRate {
		sc.LinkRate[i] = 1 << 20 // 1 MiB/s
	}
	sc.MinDelay, sc.MaxDelay = time.Millisecond, time.Millisecond
	w := NewWorld(sc, nil)
	w.net.resets = true
	w.nodes[1].up = true // a refused dial would lose every message
	for i := range 100 {
		w.sendMsg(0, 1, sm.Msg{Type: sm.MsgHeartbeat, ReqID: uint64(i), Bytes: make([]byte, 10<<10-msgOverhead)})
	}
	q := &w.net.l(0, 1).tx
	if len(q.waiting) != sendQueueLen || q.dropped != 100-1-sendQueueLen || q.waiting[0].ReqID != 100-sendQueueLen {
		t.Fatalf("queue %d (first %d), dropped %d", len(q.waiting), q.waiting[0].ReqID, q.dropped)
	}
	var got []uint64
	var at []time.Duration
	reset := false
	for w.q.len() > 0 {
		e := w.q.pop()
		w.now = e.at
		switch e.kind {
		case evLinkFree:
			w.linkFree(e.node, int(e.call))
		case evInput:
			if r, ok := e.in.(sm.Recv); ok && !w.stale(e) {
				got, at = append(got, r.Msg.ReqID), append(at, e.at)
			}
			if len(got) == 10 && !reset {
				reset = true
				w.resetLink(LinkReset{From: 0, To: 1})
			}
		}
	}
	// Message 0 went at once; 35..99 waited (1..34 dropped). The reset
	// after the tenth delivery lost the one then on the wire.
	if len(got) != 1+sendQueueLen-1 || got[0] != 0 || got[1] != 100-sendQueueLen {
		t.Fatalf("delivered %d: %v", len(got), got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("out of order: %v", got)
		}
	}
	if d := at[2] - at[1]; d < 9*time.Millisecond || d > 11*time.Millisecond {
		t.Fatalf("10 KiB at 1 MiB/s took %v between deliveries", d)
	}
}

// TestNewFaultsFire: over the first schedules of the default run, each
// fault of issue 7 B3 actually happens (and shows in the trace), and
// every schedule still passes.
func TestNewFaultsFire(t *testing.T) {
	marks := map[string]string{
		"fsyncgate":         "unsynced data was dropped",
		"short write":       "after a short write of",
		"garbage tail":      "garbage=",
		"hole":              "hole=",
		"data/ rot":         "bit rot in data/",
		"rot-lost node":     "lost: FATAL",
		"queue drop-oldest": "dropped",
		"connection reset":  "connection reset n",
		"torn tail cut":     "wal.torn-tail",
		"torn":              "torn=",
		"zeroed":            "zeroed=",
		"disk stall":        "disk stall of",
		"corrupted message": "corrupted in flight",
		"corrupted push":    "repl-config-push, bit",
		"conf/ rot live":    "while it runs",
		"upgrade":           "upgrade.saved",
		"push refused":      "conf.push-invalid",
		"serve mismatch":    "conf.serve-mismatch",
	}
	seen := map[string]int{}
	for seed := uint64(1); seed <= uint64(*faultSeedsFlag); seed++ {
		sc := Generate(seed)
		found := map[string]bool{}
		_, f := NewWorld(sc, func(line string) {
			for k, m := range marks {
				if !found[k] && strings.Contains(line, m) && (k != "queue drop-oldest" || strings.Contains(line, "send queue to")) {
					found[k] = true
				}
			}
		}).Run()
		if f != nil {
			t.Fatal(f)
		}
		for k := range found {
			seen[k]++
		}
	}
	for k := range marks {
		if seen[k] == 0 {
			t.Errorf("no schedule of %d shows %s (%q)", *faultSeedsFlag, k, marks[k])
		}
	}
	t.Logf("schedules showing each fault: %v", seen)
}
