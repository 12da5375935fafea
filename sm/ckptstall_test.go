package sm_test

import (
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// A checkpoint delays neither a heartbeat nor a request (issue 9 item 2):
// its snapshot goes to the executor as a view to encode (no bytes built
// in Step), and while its write is held for five seconds the primary
// goes on heartbeating, its standbys stay with it, and writes are
// acknowledged.
func TestCheckpointDelaysNoHeartbeatNorRequest(t *testing.T) {
	h, p := threeNodesWith(t, func(o *sm.Options) { o.MaxWALRecords = 100 })
	pn := h.node(p)
	var held *sm.Computed
	var ckpt uint64
	h.onStep = func(i int, _ sm.Input, effs []sm.Effect) {
		if i != p || held != nil {
			return
		}
		for _, e := range effs {
			if c, ok := e.(sm.Compute); ok && c.Kind == sm.ComputeEncodeTo {
				if c.Snapshot == nil || c.Data != nil {
					t.Errorf("the checkpoint %s was encoded inside Step (%d bytes, a view to encode: %v)", c.Path, len(c.Data), c.Snapshot != nil)
				}
				ckpt = c.ID
			}
		}
		for k, q := range h.queue {
			if d, ok := q.in.(sm.Computed); ok && q.node == p && ckpt != 0 && d.ID == ckpt {
				held = &d
				h.queue = append(h.queue[:k:k], h.queue[k+1:]...)
				return
			}
		}
	}
	enqueueN(t, h, p, 120, 100)
	if held == nil {
		t.Fatalf("no checkpoint after 120 records:\n%s", pn.logDump())
	}
	if !pn.n.CheckpointInProgress() {
		t.Fatal("the checkpoint is not in progress while its write is held")
	}
	beats := len(pn.sentOf(sm.MsgHeartbeat))
	start := h.now
	for k := 0; k < 10; k++ { // writes during the checkpoint, half a second apart
		enqueueAt := len(pn.replies)
		h.enqueue(p, sm.ClientOp{ID: 1000 + uint64(k), Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("during")}})
		h.run()
		h.advance(500 * time.Millisecond)
		if len(pn.replies) == enqueueAt || pn.replies[len(pn.replies)-1].Status != sm.StatusOK {
			t.Fatalf("write %d during the checkpoint not acknowledged within 500 ms", k)
		}
	}
	if got, want := len(pn.sentOf(sm.MsgHeartbeat))-beats, 2*int((h.now-start)/(500*time.Millisecond))-2; got < want {
		t.Errorf("%d heartbeats in %v of checkpoint, want at least %d (one per interval to each standby)", got, h.now-start, want)
	}
	for i := range 3 {
		if i != p && (h.node(i).n.Role() != sm.RoleStandby || h.node(i).n.Primary() != p) {
			t.Errorf("n%d is %s following n%d during the checkpoint", i, h.node(i).n.Role(), h.node(i).n.Primary())
		}
	}
	if pn.n.Role() != sm.RolePrimary || !pn.n.CheckpointInProgress() {
		t.Fatalf("n%d %s, checkpoint in progress %v", p, pn.n.Role(), pn.n.CheckpointInProgress())
	}
	h.onStep = nil
	h.enqueue(p, *held)
	h.run()
	if pn.n.CheckpointInProgress() {
		t.Error("the checkpoint did not finish once its write completed")
	}
}
