package sm

import (
	"time"

	"github.com/xce-hpc/xce/sm/queue"
)

// JobKind names a client operation on the job state (seed 000).
type JobKind uint8

const (
	JobEnqueue JobKind = iota + 1
	JobClaim
	JobAck
	JobAckBatch
	JobHeartbeat
	JobRetry
	JobFail
	JobCancel
	JobRedrive
	JobSweep
	JobRegister
	JobUnregister
	JobTick
	JobGet          // read
	JobList         // read
	JobEnqueueBatch // Payloads: one job each, same options
	// JobDrainLostAndFound: every job sidelined in lost_and_found (its
	// queue or its pin) moved to Queue and Host, or deleted with Cancel
	// (seed 002 §6.5); resets lost_and_found_job_count.
	JobDrainLostAndFound
	JobListSchedules // read: every schedule (Reply.Schedules)
	jobKindEnd
)

var jobKindNames = [...]string{"", "enqueue", "claim", "ack", "ack-batch", "heartbeat", "retry", "fail", "cancel", "redrive", "sweep", "register", "unregister", "tick", "get", "list", "enqueue-batch", "lost-and-found-drain", "list-schedules"}

func (k JobKind) String() string {
	if k == 0 || k >= jobKindEnd {
		return "job-op?"
	}
	return jobKindNames[k]
}

// Valid reports whether k is a known operation.
func (k JobKind) Valid() bool { return k >= JobEnqueue && k < jobKindEnd }

// ReadOnly operations are answered without a WAL record.
func (k JobKind) ReadOnly() bool { return k == JobGet || k == JobList || k == JobListSchedules }

// JobRequest is one client operation with the client's inputs; the
// primary resolves the rest (time, stamps from the queue's config).
type JobRequest struct {
	Kind     JobKind
	Queue    string
	Payload  []byte
	Payloads [][]byte // JobEnqueueBatch
	Priority int32
	Delay    int64 // seconds
	RunAt    int64 // Unix seconds
	Expires  int64 // lifetime in seconds
	Resource uint32
	Host     string // claimant (claim) or pin (enqueue)
	// Key is an enqueue's idempotency key ("" = none), Keys an enqueue
	// batch's, one per payload ("" = none) or none at all: within the
	// queue's window a second submit with the key answers the first
	// one's job (queue/keys.go).
	Key     string
	Keys    []string
	Max     int // claim batch size
	Handle  queue.Handle
	Handles []queue.Handle
	ID      uint64 // job id (cancel, redrive, get)
	Error   string // retry/fail message
	// RetryDelay: a retry's delay in seconds chosen by the worker instead
	// of the queue's backoff (0: the backoff), at most
	// queue.MaxRetryDelayS.
	RetryDelay int64
	Name       string // schedule name
	Spec       string // schedule spec, "@every 5m", "CRON_TZ=Europe/Berlin 0 3 * * *"
	Fire       queue.FireOpts
	AfterID    uint64 // list: only jobs with a larger ID (the next page)
	Cancel     bool   // lost-and-found drain: delete instead of move
	// Wait: a claim that finds no ready job waits up to this long for one
	// (at most MaxClaimWait; longpoll.go) instead of answering empty.
	Wait time.Duration
	// JSON: the caller reads the reply in JSON (protojson), larger than
	// binary; a claim's jobs and a list's page are sized for it
	// (ClaimReplyBudgetJSON), and a claim logs it for its replay.
	JSON bool
	// WithJobs: an enqueue batch's reply carries each job as enqueued
	// (Reply.Jobs) besides its id (Reply.IDs). Without it, the ids alone:
	// 8 bytes a job where a job's copy is over 200, and all the API's
	// answer shows.
	WithJobs bool
}

// ClientOp is a client request arriving at the node.
type ClientOp struct {
	ID  uint64 // the executor's request id, echoed in the Reply
	Req JobRequest
}

func (ClientOp) isInput() {}

// ClientGone says the client of request ID went away (its connection
// closed, its deadline passed) before its reply: a long-poll claim it left
// waiting is dropped, so no job is claimed for nobody. No reply follows.
type ClientGone struct{ ID uint64 }

func (ClientGone) isInput() {}

// Reply answers a ClientOp, only once everything it depends on is durable.
type Reply struct {
	ID      uint64
	Status  int32 // StatusOK or an errno-style failure (not primary, bad input)
	Error   string
	Primary int // when Status is StatusEAGAIN: the primary, if known, else -1
	OK      bool
	OKs     []bool
	Jobs    []queue.Job // an enqueue batch's only with JobRequest.WithJobs
	// IDs: an enqueue batch's jobs, in the order of its payloads (a
	// deduplicated one's, its key's earlier job).
	IDs     []uint64
	Moved   int // sweep: jobs moved to dead; lost-and-found drain: jobs moved or deleted
	Deleted int // sweep: dead jobs deleted by retention
	LSN     uint64
	At      int64 // the time (Unix seconds) the operation was applied at
	More    bool  // list: the page is full (ClaimReplyBudget); ask after the last ID
	// Deduplicated (an enqueue, an enqueue batch): per job of Jobs (IDs), true
	// when its idempotency key named an earlier submit's job, whose id
	// alone Jobs carries; nil when none did.
	Deduplicated []bool
	// Schedules: list-schedules, every schedule sorted by name.
	Schedules []queue.Schedule

	// NotPrimary marks a StatusEAGAIN refusal as §10.12's redirect: this
	// node is not the primary, ask Primary. The flag, not the text, says so.
	NotPrimary bool
}

func (Reply) isEffect() {}
