package sm

import (
	"fmt"
	"time"
)

// Long-poll claims (issue 10 item 2). A claim may wait up to Wait (at
// most MaxClaimWait, as SQS allows) for a ready job instead of coming
// back empty, so thousands of idle workers do not busy-poll. A parked
// claim logs nothing while it waits. It is tried again, in arrival order,
// after each logged record while its queue has pending jobs (stopping at
// the first claim of the queue that finds nothing), and all of them at
// every maintenance tick (a delayed job becomes ready with time, a pin
// may suit a later claim). It is answered empty at its deadline, and
// "unavailable" (EAGAIN with the primary, if known) once the node stops
// being primary.

// MaxClaimWait bounds JobRequest.Wait.
const MaxClaimWait = 20 * time.Second

// parkedClaim is a claim waiting for a job.
type parkedClaim struct {
	id       uint64
	req      JobRequest
	deadline int64  // Mono
	acks     []bool // the results of the acks it carried, in its reply
	ackLSN   uint64 // their record (0: none logged): a release cannot say "nothing applied"
	ackAt    int64  // the wall time they were judged at: an empty answer's At
}

// park holds claim id until a job is ready for it or its wait ends; acks
// are the results of the acks it carried at ackAt, logged at ackLSN (0:
// none logged).
func (jl *journal) park(id uint64, req JobRequest, acks []bool, ackLSN uint64, ackAt int64) {
	j := jl.jobs
	j.polls = append(j.polls, parkedClaim{id: id, req: req, deadline: int64(jl.now.Mono) + int64(req.Wait), acks: acks, ackLSN: ackLSN, ackAt: ackAt})
	jl.armPolls()
}

// wakePolls tries the parked claims again after a logged record: per
// queue with pending jobs, in arrival order, until one finds nothing.
func (jl *journal) wakePolls() {
	j := jl.jobs
	if len(j.polls) == 0 || jl.waking {
		return
	}
	jl.waking = true // a claim logged here wakes nothing more
	dry := map[string]bool{}
	k := 0
	for _, p := range j.polls {
		q := p.req.Queue
		if !dry[q] {
			if pending, _, _ := j.q.Counts(q); pending == 0 || !jl.retryClaim(p) {
				dry[q] = true
				j.polls[k] = p
				k++
			}
			continue
		}
		j.polls[k] = p
		k++
	}
	j.polls = j.polls[:k]
	jl.waking = false
	jl.armPolls()
}

// sweepPolls, at a maintenance tick: every parked claim is tried again,
// and those past their deadline are answered empty.
func (jl *journal) sweepPolls() { jl.passPolls(true) }

// expirePolls answers empty the parked claims whose wait is over.
func (jl *journal) expirePolls() {
	if jl.role == RolePrimary && jl.jobs != nil {
		jl.passPolls(false)
	}
}

// passPolls goes over the parked claims once, in arrival order: each is
// tried again if retry, then answered empty if its deadline passed.
func (jl *journal) passPolls(retry bool) {
	j := jl.jobs
	if len(j.polls) == 0 {
		return
	}
	jl.waking = true // a claim logged here wakes nothing more
	polls, now := j.polls, int64(jl.now.Mono)
	j.polls = nil
	for _, p := range polls {
		switch {
		case retry && jl.retryClaim(p):
		case now >= p.deadline && p.ackLSN > 0:
			// Nothing claimed, but its acks were logged: answered as the
			// write they are (a step-down meanwhile: outcome unknown).
			jl.replyWhenDurable(p.ackLSN, Reply{ID: p.id, OK: true, OKs: p.acks, LSN: p.ackLSN, At: p.ackAt})
		case now >= p.deadline:
			jl.answerRead(Reply{ID: p.id, OK: true, OKs: p.acks, At: p.ackAt})
		default:
			j.polls = append(j.polls, p)
		}
	}
	jl.waking = false
	jl.armPolls()
}

// retryClaim applies a parked claim again; true if it was answered (it
// claimed jobs, or it is refused now).
func (jl *journal) retryClaim(p parkedClaim) bool {
	rep, changed, refused := jl.mutate(p.id, p.req, p.acks)
	if refused {
		jl.emit(rep)
	}
	return changed || refused
}

// armPolls sets the long-poll timer to the earliest deadline.
func (jl *journal) armPolls() {
	j := jl.jobs
	if len(j.polls) == 0 {
		jl.cancelTimer(TimerLongPoll)
		return
	}
	first := j.polls[0].deadline
	for _, p := range j.polls[1:] {
		first = min(first, p.deadline)
	}
	// At least a millisecond: a timer that fires a hair early (an
	// executor's clock granularity) must not re-arm at zero forever.
	jl.setTimer(TimerLongPoll, time.Duration(max(int64(time.Millisecond), first-int64(jl.now.Mono))))
}

// releasePolls answers every parked claim "unavailable" when the node
// loses the role: it changed nothing, so the client just asks the new
// primary. One whose acks were logged is answered "outcome unknown": they
// may or may not be durable.
func (jl *journal) releasePolls(why string) {
	for _, p := range jl.jobs.polls {
		if p.ackLSN > 0 {
			jl.emit(Reply{ID: p.id, Status: StatusOutcomeUnknown, Error: why + "; the acks this claim carried may have been applied", Primary: jl.el.primary})
			continue
		}
		jl.emit(Reply{ID: p.id, Status: StatusEAGAIN, Error: why, Primary: jl.el.primary, NotPrimary: true})
	}
	jl.jobs.polls = nil
	jl.cancelTimer(TimerLongPoll)
}

// checkWait validates a claim's wait.
func checkWait(req JobRequest) string {
	if req.Wait < 0 || req.Wait > MaxClaimWait || req.Wait > 0 && req.Kind != JobClaim {
		return fmt.Sprintf("wait %v outside 0..%v (claims only)", req.Wait, MaxClaimWait)
	}
	return ""
}

// dropPoll forgets the parked claim id (its client is gone), if any.
func (jl *journal) dropPoll(id uint64) {
	j := jl.jobs
	if j == nil {
		return
	}
	for k, p := range j.polls {
		if p.id == id {
			j.polls = append(j.polls[:k], j.polls[k+1:]...)
			jl.armPolls()
			return
		}
	}
}
