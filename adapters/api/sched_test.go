package api_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// A retry's delay reaches the node as the request's RetryDelay (the
// client's RetryAfter rounds up to whole seconds); ListSchedules is a
// worker's read, forwarded by a standby, rendered in name order with a
// schedule that never fires again at 0.
func TestRetryDelayAndListSchedules(t *testing.T) {
	c := startCluster(t, true, true)
	c.nodes[0].set(notPrimary(1))
	var mu sync.Mutex
	var got []sm.JobRequest
	c.nodes[1].set(func(r *wire.Request) *wire.Reply {
		if r.Job == nil { // the client's check of a new connection
			return submitted(r)
		}
		mu.Lock()
		got = append(got, *r.Job)
		mu.Unlock()
		if r.Job.Kind == sm.JobListSchedules {
			return &wire.Reply{Job: &sm.Reply{OK: true, Schedules: []queue.Schedule{
				{Name: "a", Spec: "CRON_TZ=Europe/Berlin 0 3 * * *", Queue: "q", Next: 1_800_000_000, Fire: queue.FireOpts{Priority: 2}, Zone: []byte("TZif")},
				{Name: "b", Spec: "0 0 29 2 *", Queue: "q", Next: math.MaxInt64},
			}}}
		}
		return &wire.Reply{Job: &sm.Reply{OK: true}}
	})
	cl, err := client.New(c.peers, c.mats["other"], client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	h := &schema.WalHandle{Id: 9, Attempt: 1, ClaimTerm: 2, ClaimLsn: 3}
	var lastErr error
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, lastErr = cl.RetryAfter(ctx, h, "later", 1500*time.Millisecond); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatal(lastErr)
	}
	if _, err := cl.Retry(ctx, &schema.RetryRequest{Handle: h, Error: "backoff"}); err != nil {
		t.Fatal(err)
	}
	rep, err := cl.ListSchedules(ctx, &schema.ListSchedulesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[0].Kind != sm.JobRetry || got[0].RetryDelay != 2 || got[0].Error != "later" ||
		got[1].RetryDelay != 0 || got[2].Kind != sm.JobListSchedules {
		t.Fatalf("the primary got %+v", got)
	}
	s := rep.GetSchedules()
	if len(s) != 2 || s[0].GetName() != "a" || s[0].GetNextFire() != 1_800_000_000 || s[0].GetFire().GetPriority() != 2 ||
		s[0].GetSpec() != "CRON_TZ=Europe/Berlin 0 3 * * *" || s[1].GetName() != "b" || s[1].GetNextFire() != 0 {
		t.Fatalf("listed %v", s)
	}
}
