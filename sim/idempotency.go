package sim

import (
	"fmt"
	"time"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// The idempotency checker (S11) keeps its own reference, from what the
// clients sent and were told and the jobs the nodes hold, never the key
// table: a keyed submit's key is derived from its payload (idemKeyOf), unique
// per submit, so a key's jobs are the jobs holding its payload. Within a
// key's window (the workload queues', a week: longer than a schedule's
// run with every forward step of a node's clock, and a repeat follows its
// first send by seconds) it holds:
//
//   - a key names at most one job: no two job ids with its payload in any
//     acknowledged reply, nor in the state a primary serves;
//   - a keyed submit sent after a reply showed its key's job (any
//     acknowledged reply: a submit's, a claim's, a get's, a list's) is
//     answered as deduplicated, with that job's id.

// keyWindow is the workload queues' window (sampleQueue).
const keyWindow = schema.MaxIdempotencyWindowS

// idemKeyOf is the idempotency key of payload p's submit.
func idemKeyOf(p []byte) string {
	n := len(p)
	for i, c := range p {
		if c == '.' { // a padded payload: its name before the pad
			n = i
			break
		}
	}
	return "k-" + string(p[:n])
}

// keyedJobs is what the replies said of each keyed payload: its job
// and the time (Unix seconds) its first acknowledged submit was applied.
type keyedJob struct {
	id       uint64
	enqueued int64         // the job's EnqueuedAt, 0 when no reply showed it
	seen     time.Duration // when the first reply showing it reached its client
}

// noteKeyedJob checks job j of an acknowledged reply to c against the
// key of its payload, if the payload was submitted with one. Only in
// strict mode: where an acknowledged write may be lost (seed mode, a
// wiped disk), the key goes with its job, and a repeat makes a new one;
// the durability checker counts that loss.
func (w *World) noteKeyedJob(c *call, j queue.Job, dedup bool) {
	key := string(j.Payload)
	if !w.strict() || !w.wl.keyedPayload(key) {
		return
	}
	k := w.wl.keyed[key]
	submit := c.req.Kind == sm.JobEnqueue || c.req.Kind == sm.JobEnqueueBatch
	switch {
	case k == nil:
		w.wl.keyed[key] = &keyedJob{id: j.ID, enqueued: j.EnqueuedAt, seen: c.done}
		if dedup && !submit {
			w.violate("S11", "a %s reply (#%d from n%d) marked job %d deduplicated", c.req.Kind, c.id, c.node, j.ID)
		}
		return
	case k.id != j.ID && (k.enqueued == 0 || j.EnqueuedAt == 0 || j.EnqueuedAt-k.enqueued < keyWindow):
		w.violate("S11", "key %s names two jobs: %d, then %d (reply to #%d from n%d, %s)", idemKeyOf(j.Payload), k.id, j.ID, c.id, c.node, c.req.Kind)
		return
	case submit && c.sent > k.seen && !dedup:
		w.violate("S11", "key %s: a reply showed job %d at %v, yet the repeat #%d sent at %v (n%d) was answered as a new job %d", idemKeyOf(j.Payload), k.id, k.seen, c.id, c.sent, c.node, j.ID)
		return
	}
	if k.enqueued == 0 {
		k.enqueued = j.EnqueuedAt
	}
}

// keyedPayload reports whether payload p was submitted with a key.
func (wl *workload) keyedPayload(p string) bool { return wl.keyedSent[p] }

// noteKeyedSend records the payloads of a keyed submit when it is sent.
func (wl *workload) noteKeyedSend(req sm.JobRequest) {
	switch {
	case req.Kind == sm.JobEnqueue && req.Key != "":
		wl.keyedSent[string(req.Payload)] = true
	case req.Kind == sm.JobEnqueueBatch && len(req.Keys) > 0:
		for i, p := range req.Payloads {
			if req.Keys[i] != "" {
				wl.keyedSent[string(p)] = true
			}
		}
	}
}

// checkKeyedState holds the jobs a primary serves to S11: one job per key.
func (w *World) checkKeyedState(jobs []queue.Job, where string) {
	if !w.strict() {
		return
	}
	seen := map[string]queue.Job{}
	for _, j := range jobs {
		key := string(j.Payload)
		if !w.wl.keyedPayload(key) {
			continue
		}
		if o, dup := seen[key]; dup && j.EnqueuedAt-o.EnqueuedAt < keyWindow && o.EnqueuedAt-j.EnqueuedAt < keyWindow {
			w.violate("S11", "key %s names two jobs in %s: %d and %d", idemKeyOf(j.Payload), where, o.ID, j.ID)
			return
		}
		seen[key] = j
	}
	w.tr.line(w.now, -1, fmt.Sprintf("S11 idempotency check of %s: %d keyed jobs", where, len(seen)))
}
