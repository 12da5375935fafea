package sim

import (
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// TestClusterLinCatchesLoss: the partitioned porcupine check of the
// cluster world passes a clean demo run, and fails the same history once
// the final state loses an acknowledged job or brings back an acked one.
func TestClusterLinCatchesLoss(t *testing.T) {
	w := NewWorld(Demo(1), nil)
	if _, f := w.Run(); f != nil {
		t.Fatal(f.Error())
	}
	end := w.now
	if res := porcupine.CheckOperations(linModel(), w.linHistory(w.final, end)); !res {
		t.Fatal("the clean demo history does not linearize")
	}
	// Drop a job whose enqueue was acknowledged and that nothing removed.
	x := w.excuses()
	lost := -1
	for i, j := range w.final {
		if !x.excused(j) && !x.removable[j.ID] {
			lost = i
			break
		}
	}
	if lost < 0 {
		t.Fatal("no job in the final state to lose")
	}
	dropped := append(append([]queue.Job(nil), w.final[:lost]...), w.final[lost+1:]...)
	if porcupine.CheckOperations(linModel(), w.linHistory(dropped, end)) {
		t.Fatalf("losing job %d (%s) from the final state went unnoticed", w.final[lost].ID, w.final[lost].Payload)
	}
	// Bring back a job whose ack was acknowledged, as pending.
	var back *queue.Job
	for _, c := range w.wl.calls {
		if c.out == outOK && c.req.Kind == sm.JobAck && c.rep.OK {
			if key, ok := w.wl.led.idKey[c.req.Handle.ID]; ok {
				back = &queue.Job{ID: c.req.Handle.ID, Payload: []byte(key), State: queue.Pending, Claims: c.req.Handle.Attempt, Attempts: c.req.Handle.Attempt}
				break
			}
		}
	}
	if back == nil {
		t.Fatal("no acknowledged ack in the demo history")
	}
	if porcupine.CheckOperations(linModel(), w.linHistory(append(append([]queue.Job(nil), w.final...), *back), end)) {
		t.Fatalf("job %d (%s) alive again after its acknowledged ack went unnoticed", back.ID, back.Payload)
	}
}
