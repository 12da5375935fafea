package sm

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// A claim answered in JSON takes only the jobs whose JSON fits
// ClaimReplyBudgetJSON (jobs with long last errors of control bytes
// escape to six times their size: far fewer than binary takes), logs
// that it is JSON, and its replay from the log claims the same jobs.
func TestJSONClaimSizedForJSONAndReplayed(t *testing.T) {
	cfg := &schema.ClusterConfig{Queues: []*schema.Queue{{Id: 1, Name: "q", VisibilityTimeoutS: 300, MaxAttempts: 5}},
		Hosts: []*schema.Host{{Name: "h"}}}
	live, r := queue.New(), newRouter(cfg)
	var log []*schema.WalRecord
	now := int64(1000)
	do := func(req JobRequest) Reply {
		t.Helper()
		rec, err := buildRecord(r, now, req)
		if err != nil {
			t.Fatal(err)
		}
		rec.Lsn, rec.Term = uint64(len(log)+1), 1
		b, err := proto.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if rec, err = wal.DecodeRecord(b); err != nil { // as replay reads it
			t.Fatal(err)
		}
		log = append(log, rec)
		rep, err := applyRecord(live, r, rec)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	const n = 300
	do(JobRequest{Kind: JobEnqueueBatch, Queue: "q", Payloads: make([][]byte, n)})
	errText := strings.Repeat("\x01", MaxJobStrings-3*255)
	for _, j := range do(JobRequest{Kind: JobClaim, Queue: "q", Host: "h", Max: n}).Jobs {
		do(JobRequest{Kind: JobRetry, Handle: j.Handle(), Error: errText})
	}
	now++
	twin, err := queue.Import(live.Export())
	if err != nil {
		t.Fatal(err)
	}
	binary := twin.ClaimBatchWithin(now, "q", "h", n, budgetFor(false), queue.ClaimStamp{Term: 1, LSN: uint64(len(log) + 1)})

	got := do(JobRequest{Kind: JobClaim, Queue: "q", Host: "h", Max: n, JSON: true}).Jobs
	if !log[len(log)-1].GetClaimBatch().GetJson() {
		t.Fatal("the JSON claim's record does not say JSON")
	}
	used := 0
	for _, j := range got {
		used += j.SizeIn(queue.JSON)
	}
	next := got[0].SizeIn(queue.JSON)
	if used > ClaimReplyBudgetJSON || used+next <= ClaimReplyBudgetJSON || len(got) >= len(binary) {
		t.Fatalf("a JSON claim took %d jobs (%d bytes of JSON bound, budget %d), binary %d: want the most that fit, fewer than binary", len(got), used, ClaimReplyBudgetJSON, len(binary))
	}
	if p, c, _ := live.Counts("q"); p != n-len(got) || c != len(got) {
		t.Fatalf("after the JSON claim: %d pending, %d processing; want %d and %d", p, c, n-len(got), len(got))
	}

	replayed, rr := queue.New(), newRouter(cfg)
	for _, rec := range log {
		if err := replayApply(replayed, rr, rec); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := live.Export(), replayed.Export(); !reflect.DeepEqual(a, b) {
		t.Fatal("the replayed log's state differs from the live one")
	}
}
