package sim

import (
	"testing"

	"github.com/anishathalye/porcupine"

	"xce/sm"
	"xce/sm/queue"
)

// TestLinearizeCatchesLostRead: a read that observed a job whose enqueue
// was then lost (the id handed out again) cannot be linearized; the same
// history without the read can.
func TestLinearizeCatchesLostRead(t *testing.T) {
	model := jobModel(jobConfig(false))
	cfg := jobConfig(false)
	enq := sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte{1}}
	// What the node answers for the first enqueue at t=100 and a get of job 1.
	q := queue.New()
	first := sm.ApplyJob(q, cfg, 1, 2, 100, enq)
	got := sm.ApplyJob(q, cfg, 1, 3, 100, sm.JobRequest{Kind: sm.JobGet, ID: first.Jobs[0].ID})
	// After the crash the enqueue is lost and the next enqueue, logged in
	// the same term (the residual of two primaries in one term), gets its
	// id again.
	q2 := queue.New()
	again := sm.ApplyJob(q2, cfg, 1, 2, 101, sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte{2}})
	if again.Jobs[0].ID != first.Jobs[0].ID {
		t.Fatalf("setup: ids %d vs %d", again.Jobs[0].ID, first.Jobs[0].ID)
	}
	hist := []porcupine.Operation{
		{ClientId: 0, Input: jobInput{req: enq, now: 100, term: 1, lsn: 2}, Call: 0, Output: jobOutput{}, Return: 1000},
		{ClientId: 1, Input: jobInput{req: sm.JobRequest{Kind: sm.JobGet, ID: first.Jobs[0].ID}, now: 100, term: 1, lsn: 3}, Call: 1, Output: jobOutput{known: true, rep: got}, Return: 2},
		{ClientId: 2, Input: jobInput{req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte{2}}, now: 101, term: 1, lsn: 2}, Call: 10, Output: jobOutput{known: true, rep: again}, Return: 11},
	}
	if porcupine.CheckOperations(model, hist) {
		t.Fatal("porcupine accepted a read of a lost write")
	}
	if !porcupine.CheckOperations(model, []porcupine.Operation{hist[0], hist[2]}) {
		t.Fatal("porcupine rejected a history where the unknown enqueue simply never happened")
	}
}
