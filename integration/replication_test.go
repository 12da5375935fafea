package integration

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"xce/adapters/transport"
	"xce/schema"
	"xce/sm"
)

// TestJobsSurviveFailover: jobs acknowledged by the primary are on the
// standby that takes over after a kill -9 (WAL replication, DESIGN §4.4).
func TestJobsSurviveFailover(t *testing.T) {
	c := newCluster(t, 3)
	blob := configBlob(t, "repl", 1, 0)
	install(t, c, 0, blob)
	start(t, c, 0, 1, 2)
	_, p := converge(t, c, -1, 20*time.Second)
	mat := admin(t, c)
	ctx := context.Background()
	call := func(node int, j *schema.JobRequest) *schema.ClientReply {
		t.Helper()
		var last error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			cl, err := transport.DialClient(ctx, fmt.Sprintf("127.0.0.1:%d", c.Port(node)), mat, 2*time.Second)
			if err != nil {
				last = err
				continue
			}
			rep, err := cl.Call(ctx, &schema.ClientRequest{Op: &schema.ClientRequest_Job{Job: j}})
			cl.Close()
			if err != nil {
				last = err
				continue
			}
			if rep.GetStatus() == sm.StatusEAGAIN { // recovering or not primary yet
				last = fmt.Errorf("%s", rep.GetError())
				continue
			}
			return rep
		}
		t.Fatalf("no answer from %s: %v", c.Names[node], last)
		return nil
	}
	const jobs = 50
	acked := map[uint64]bool{}
	for i := 0; i < jobs; i++ {
		rep := call(p, &schema.JobRequest{Kind: schema.JobRequest_ENQUEUE, Queue: "q000001-", Payload: []byte(fmt.Sprintf("job-%d", i))})
		if rep.GetStatus() != sm.StatusOK || len(rep.GetJobReply().GetJobs()) != 1 {
			t.Fatalf("enqueue %d: %v", i, rep)
		}
		acked[rep.GetJobReply().GetJobs()[0].GetId()] = true
	}
	stop(t, c, p, syscall.SIGKILL)
	others := []int{}
	for i := range c.Names {
		if i != p {
			others = append(others, i)
		}
	}
	np, _ := waitAnyPrimary(t, c, others, 10*time.Second)
	rep := call(np, &schema.JobRequest{Kind: schema.JobRequest_LIST, Queue: "q000001-"})
	got := map[uint64]bool{}
	for _, j := range rep.GetJobReply().GetJobs() {
		got[j.GetId()] = true
	}
	for id := range acked {
		if !got[id] {
			t.Fatalf("job %d acknowledged by %s is missing on the new primary %s (%d of %d present)", id, c.Names[p], c.Names[np], len(got), len(acked))
		}
	}
}
