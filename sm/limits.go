package sm

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// One set of size limits, end to end (issue 8): a payload the door
// accepts fits its WAL record; a record fits a replication message alone;
// every message fits a frame; a claim reply fits a client frame.
const (
	// MaxJobPayload bounds one job's payload and the sum of an enqueue
	// batch's payloads (a batch is one record).
	MaxJobPayload = 1<<20 - 16<<10
	// MaxRecordSize bounds an encoded WAL record (wal.MaxRecordSize); the
	// door refuses a request whose record would be larger.
	MaxRecordSize = wal.MaxRecordSize
	// MaxFrameSize bounds every peer and client frame: the largest record
	// (or config blob, or reply within ClaimReplyBudget) plus its envelope.
	MaxFrameSize = MaxRecordSize + 64<<10
	// ClaimReplyBudget bounds the jobs one claim hands out, by their
	// queue.Job.SizeBound: a claim whose jobs would not fit claims fewer
	// (at least one), and the rest stay ready.
	ClaimReplyBudget = MaxRecordSize
	// ClaimReplyBudgetJSON is ClaimReplyBudget for a caller that speaks
	// JSON, by queue.Job.SizeIn(queue.JSON): the largest job a node
	// stores (a MaxJobPayload payload, MaxJobStrings of names and error)
	// fits it alone.
	ClaimReplyBudgetJSON = 3 << 19 // 1.5 MiB
	// MaxJSONFrameSize bounds a client message in JSON: a reply within
	// ClaimReplyBudgetJSON plus its envelope (up to 1,000 ack results
	// and the counters), and the JSON of the largest request (a
	// MaxJobPayload payload in base64 with its names and options).
	MaxJSONFrameSize = ClaimReplyBudgetJSON + 64<<10
	// MaxJobStrings bounds the strings one job carries: its queue, pin
	// and claimant host (names of at most 255 bytes each) and its last
	// error (at most 4,096 bytes); the door refuses longer ones.
	MaxJobStrings = 3*255 + 4096
)

// budgetFor is the reply budget of a claim or list page answered in the
// caller's encoding (JobRequest.JSON).
func budgetFor(json bool) queue.Budget {
	if json {
		return queue.Budget{Bytes: ClaimReplyBudgetJSON, Enc: queue.JSON}
	}
	return queue.Budget{Bytes: ClaimReplyBudget, Enc: queue.Binary}
}

// listPage is the page of jobs (sorted by ID) after afterID that fits a
// reply in the caller's encoding: at least one job, then as many as its
// budget (budgetFor) holds; more says jobs were left out.
func listPage(jobs []queue.Job, afterID uint64, json bool) (page []queue.Job, more bool) {
	i := sort.Search(len(jobs), func(i int) bool { return jobs[i].ID > afterID })
	b := budgetFor(json)
	used := 0
	for k, j := range jobs[i:] {
		size := j.SizeIn(b.Enc)
		if k > 0 && used+size > b.Bytes {
			return jobs[i : i+k], true
		}
		used += size
	}
	return jobs[i:], false
}

// recordTooLarge reports why rec cannot be logged, or "".
func recordTooLarge(rec *schema.WalRecord) string {
	if n := proto.Size(rec); n > MaxRecordSize {
		return fmt.Sprintf("the operation's log record would be %d bytes, above the %d-byte limit (payloads, names and errors together)", n, MaxRecordSize)
	}
	return ""
}

// payloadTooLarge checks an enqueue's payload sizes.
func payloadTooLarge(req JobRequest) string {
	total := len(req.Payload)
	for _, p := range req.Payloads {
		total += len(p)
	}
	if total > MaxJobPayload {
		what := "job payload"
		if req.Kind == JobEnqueueBatch {
			what = "enqueue batch's payloads together"
		}
		return fmt.Sprintf("%s of %d bytes exceed the %d-byte limit", what, total, MaxJobPayload)
	}
	return ""
}
