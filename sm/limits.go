package sm

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	"xce/schema"
	"xce/sm/queue"
	"xce/sm/wal"
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
)

// listPage is the page of jobs (sorted by ID) after afterID that fits a
// reply: at least one job, then as many as ClaimReplyBudget holds; more
// says jobs were left out.
func listPage(jobs []queue.Job, afterID uint64) (page []queue.Job, more bool) {
	i := sort.Search(len(jobs), func(i int) bool { return jobs[i].ID > afterID })
	used := 0
	for k, j := range jobs[i:] {
		size := j.SizeBound()
		if k > 0 && used+size > ClaimReplyBudget {
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
