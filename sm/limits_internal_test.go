package sm

import (
	"testing"

	"github.com/xce-hpc/xce/sm/queue"
)

// listPage pages through jobs by ID within the reply budget.
func TestListPage(t *testing.T) {
	var jobs []queue.Job
	for id := uint64(1); id <= 5; id++ {
		jobs = append(jobs, queue.Job{ID: id, Queue: "q", Payload: make([]byte, ClaimReplyBudget/3)})
	}
	var seen []uint64
	after, pages := uint64(0), 0
	for {
		page, more := listPage(jobs, after, false)
		pages++
		if len(page) == 0 {
			t.Fatalf("empty page after %d", after)
		}
		for _, j := range page {
			seen = append(seen, j.ID)
		}
		if !more {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(seen) != 5 || pages < 2 {
		t.Fatalf("pages %d saw %v", pages, seen)
	}
	for i, id := range seen {
		if id != uint64(i+1) {
			t.Fatalf("order %v", seen)
		}
	}
	if page, more := listPage(jobs, 5, false); len(page) != 0 || more {
		t.Fatalf("after the last id: %v %v", page, more)
	}
}

// A request whose record would exceed MaxRecordSize is refused at the
// door, and the largest payload fits.
func TestPayloadLimits(t *testing.T) {
	if why := payloadTooLarge(JobRequest{Kind: JobEnqueue, Payload: make([]byte, MaxJobPayload)}); why != "" {
		t.Fatalf("a payload at the limit refused: %s", why)
	}
	if why := payloadTooLarge(JobRequest{Kind: JobEnqueueBatch, Payloads: [][]byte{make([]byte, MaxJobPayload/2+1), make([]byte, MaxJobPayload/2)}}); why == "" {
		t.Fatal("a batch above the limit in total was accepted")
	}
	if MaxRecordSize+64<<10 != MaxFrameSize || MaxJobPayload+16<<10 >= MaxRecordSize {
		t.Fatal("limits out of order: payload < record < frame")
	}
	if largest := queue.JSONSizeBound(MaxJobPayload, MaxJobStrings); largest > ClaimReplyBudgetJSON || ClaimReplyBudgetJSON >= MaxJSONFrameSize {
		t.Fatalf("the JSON of the largest job (%d bytes) must fit ClaimReplyBudgetJSON (%d), and that a JSON frame (%d)", largest, ClaimReplyBudgetJSON, MaxJSONFrameSize)
	}
}

// A list page for a JSON caller is sized by the JSON bound: jobs whose
// strings escape to six times their size come in smaller pages than
// binary's, each within ClaimReplyBudgetJSON, and every job is listed.
func TestListPageJSON(t *testing.T) {
	var jobs []queue.Job
	for id := uint64(1); id <= 100; id++ {
		jobs = append(jobs, queue.Job{ID: id, Queue: "q", LastError: string(make([]byte, 20000))})
	}
	binary, _ := listPage(jobs, 0, false)
	seen := 0
	for after := uint64(0); ; {
		page, more := listPage(jobs, after, true)
		used := 0
		for _, j := range page {
			used += j.SizeIn(queue.JSON)
		}
		if len(page) == 0 || used > ClaimReplyBudgetJSON || len(page) >= len(binary) {
			t.Fatalf("a JSON page after %d: %d jobs, %d bytes of JSON bound (budget %d); a binary page has %d", after, len(page), used, ClaimReplyBudgetJSON, len(binary))
		}
		seen += len(page)
		if !more {
			break
		}
		after = page[len(page)-1].ID
	}
	if seen != len(jobs) {
		t.Fatalf("the JSON pages listed %d of %d jobs", seen, len(jobs))
	}
}
