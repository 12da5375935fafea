package sm

import (
	"fmt"

	"github.com/xce-hpc/xce/sm/quorum"
)

// Quorum-mode elections (DESIGN §4.4; Raft §5.2, §5.4.1 with etcd-raft's
// PreVote and CheckQuorum). The seed's timing decides who stands first:
// probes and priority deadlines with jitter (election.go). At its deadline
// a candidate asks for pre-votes (no term changes); with a majority of
// them it takes the next term, votes for itself, makes that durable, and
// asks for votes; with a majority of votes it is primary. A node grants
// (pre-)votes only to a candidate whose log is at least as fresh as its
// own, and never while it follows a live primary (no pre-emption). Each
// node votes at most once per term, durably before the reply leaves.

type voteStage uint8

const (
	voteNone voteStage = iota
	votePre            // pre-votes requested for term+1
	voteReal           // term taken, votes requested
)

// ballot is a candidate's current round.
type ballot struct {
	stage  voteStage
	req    uint64       // ReqID of the requests: replies to older rounds are ignored
	grants map[int]bool // peers that granted (self included)
	tries  int          // pre-vote rounds of this election
}

// maxPreVoteRounds bounds the quick pre-vote retries of one election
// before it starts again with probes and a fresh deadline.
const maxPreVoteRounds = 6

func (en *env) quorumMode() bool { return !en.opt.SeedMode }

// startPreVote asks every peer whether it would vote for us.
func (el *election) startPreVote() {
	el.cand.ballot = ballot{stage: votePre, req: el.ops.id(), grants: map[int]bool{el.opt.Self: true}, tries: el.cand.ballot.tries + 1}
	el.log(Debug, "election.pre-vote", fmt.Sprintf("HA election: asking for pre-votes for term %d (round %d)", el.ha.term+1, el.cand.ballot.tries))
	el.broadcast(Msg{Type: MsgPreVote, ReqID: el.cand.ballot.req})
	el.setTimer(TimerElection, el.opt.ProbeInterval/2)
	el.tryAdvance()
}

// startVote takes the next term, votes for itself and asks for votes; the
// requests leave once that is durable. transfer marks them as a
// switchover's (onTimeoutNow), which a node grants although it follows
// a live primary.
func (el *election) startVote(transfer bool) {
	el.ha.term, el.ha.vote = el.ha.term+1, el.opt.Self
	el.cand.ballot = ballot{stage: voteReal, req: el.ops.id(), grants: map[int]bool{el.opt.Self: true}, tries: el.cand.ballot.tries}
	el.log(Info, "election.vote", fmt.Sprintf("HA election: standing for term %d (log term %d, lsn %d)", el.ha.term, el.disk.logPos.term, el.disk.logPos.lsn))
	el.syncHA()
	el.broadcast(Msg{Type: MsgVote, ReqID: el.cand.ballot.req, Transfer: transfer})
	el.setTimer(TimerElection, el.opt.FailureTimeout)
	el.tryAdvance()
}

// tryAdvance moves the ballot on once it has a majority: pre-votes lead
// to the vote, votes (with our own durable) to promotion.
func (el *election) tryAdvance() {
	if el.role != RoleCandidate || !quorum.Won(len(el.cand.ballot.grants), len(el.opt.Peers)) {
		return
	}
	switch el.cand.ballot.stage {
	case votePre:
		el.startVote(false)
	case voteReal:
		if el.ha.dirty() {
			return // our own vote counts once it is durable (onHADurable)
		}
		el.cancelTimer(TimerProbe)
		el.cancelTimer(TimerElection)
		el.cand.ballot = ballot{}
		el.log(Info, "election.primary", fmt.Sprintf("HA election: won term %d with a majority of votes — starting as primary (my_priority=%d)", el.ha.term, el.opt.Self))
		el.node.becomePrimary(el.ha.term)
	}
}

// onBallotTimeout: the round found no majority in time.
func (el *election) onBallotTimeout() {
	if el.cand.ballot.stage == votePre && el.cand.ballot.tries < maxPreVoteRounds {
		el.startPreVote()
		return
	}
	stage := "votes"
	if el.cand.ballot.stage == votePre {
		stage = "pre-votes"
	}
	el.log(Info, "election.no-majority", fmt.Sprintf("HA election: no majority of %s (term %d) — starting over", stage, el.ha.term))
	el.cand.ballot = ballot{}
	el.startElection(el.failover)
}

// followsLivePrimary: we heard from our primary within the failure timeout,
// so we refuse to help depose it (CheckQuorum's vote rejection).
func (el *election) followsLivePrimary() bool {
	return el.role == RolePrimary || el.role == RoleStandby && !el.fol.lost && int64(el.now.Mono)-el.fol.heardAt < int64(el.opt.FailureTimeout)
}

// grantable: a candidate at log position pos may have our (pre-)vote;
// a transfer's candidate even while we follow a live primary.
func (el *election) grantable(pos logPos, transfer bool) bool {
	return el.role != RoleBooting && el.role != RolePrimary && !el.disk.logUnknown && (transfer || !el.followsLivePrimary()) && !el.disk.logPos.after(pos)
}

func (el *election) onPreVote(from int, m Msg) {
	pos := logPos{term: m.LogTerm, lsn: m.WALPos}
	ok := m.Term >= el.ha.term && el.grantable(pos, false)
	el.send(from, Msg{Type: MsgPreVoteReply, ReqID: m.ReqID, Accepted: ok})
}

// onVote runs before the term gate: a node that follows a live primary
// ignores the candidate's term (it must not be deposed by it), unless the
// vote is a switchover's transfer: then a primary steps down for it, as
// for any higher term.
func (el *election) onVote(from int, m Msg) {
	pos := logPos{term: m.LogTerm, lsn: m.WALPos}
	if m.Term < el.ha.term || el.followsLivePrimary() && !m.Transfer {
		el.send(from, Msg{Type: MsgVoteReply, ReqID: m.ReqID})
		return
	}
	// A primary handing over to this candidate has nothing in flight: its
	// durable log's position is known now, though the step-down below
	// makes it rescan the log before it trusts it again, so its vote is
	// decided on that position (without it a larger cluster with a
	// partitioned member could miss the majority the handover needs).
	handing := el.role == RolePrimary && el.sw.handingTo(from) && !el.disk.logUnknown && !el.disk.logPos.after(pos)
	if m.Term > el.ha.term {
		wasPrimary := el.role == RolePrimary
		el.observeTerm(m.Term)
		if el.role == RoleCandidate {
			el.cand.ballot = ballot{} // our round is void in the new term
		}
		if wasPrimary {
			el.log(Warn, "ha.stepdown", fmt.Sprintf("HA: %s stands in term %d for a switchover — stepping down", el.peerName(from), m.Term))
			el.stepDown("stepped down: outcome unknown, check before retrying against the primary")
			if el.role == RoleCandidate && m.Transfer {
				// Not a failure: give the transfer's candidate a boot's
				// deadline to win before we stand ourselves (a failover's,
				// near zero for the highest priority, would depose it).
				el.failover = false
				el.cand.deadline = el.electionDeadline()
				el.setTimer(TimerElection, el.cand.deadline)
			}
		}
	}
	ok := (el.ha.vote < 0 || el.ha.vote == from) && (el.grantable(pos, m.Transfer) || handing && m.Transfer && el.role == RoleCandidate)
	if ok {
		el.ha.vote = from
		el.syncHA()
		if el.role == RoleCandidate {
			el.setTimer(TimerElection, el.cand.deadline) // give the candidate time to win
		}
		el.log(Info, "election.voted", fmt.Sprintf("HA election: voted for %s in term %d (its log term %d, lsn %d; ours term %d, lsn %d)", el.peerName(from), el.ha.term, pos.term, pos.lsn, el.disk.logPos.term, el.disk.logPos.lsn))
	}
	el.send(from, Msg{Type: MsgVoteReply, ReqID: m.ReqID, Accepted: ok})
}

func (el *election) onVoteReply(from int, m Msg, pre bool) {
	if el.role != RoleCandidate || m.ReqID != el.cand.ballot.req || !m.Accepted {
		return
	}
	if pre != (el.cand.ballot.stage == votePre) || !pre && m.Term != el.ha.term {
		return
	}
	el.cand.ballot.grants[from] = true
	el.tryAdvance()
}

// onHADurable: data/term caught up with memory.
func (el *election) onHADurable() {
	switch {
	case el.role == RoleCandidate && el.cand.ballot.stage == voteReal:
		el.tryAdvance()
	case el.role == RoleCandidate && el.cand.promoting && !el.quorumMode():
		el.node.becomePrimary(el.ha.term)
	}
}

// checkQuorum: a quorum-mode primary that has not heard from a majority
// within the failure timeout (on messages received from its standbys)
// steps down: it can no longer commit, and a new primary may exist.
func (el *election) checkQuorum() bool {
	if !el.quorumMode() || el.role != RolePrimary {
		return true
	}
	if int64(el.now.Mono)-el.steps.resumed < int64(el.opt.FailureTimeout) {
		return true // we were not listening: what the peers sent meanwhile is still queued
	}
	heard := 1
	for p, at := range el.lead.peerHeard { // unordered: a count
		if p != el.opt.Self && int64(el.now.Mono)-at < int64(el.opt.FailureTimeout) {
			heard++
		}
	}
	if quorum.Won(heard, len(el.opt.Peers)) {
		return true
	}
	el.log(Warn, "ha.quorum-lost", fmt.Sprintf("HA: primary heard from %d of %d nodes within %v — no majority, stepping down (term %d)", heard, len(el.opt.Peers), el.opt.FailureTimeout, el.ha.term))
	el.stepDown("lost the majority: outcome unknown, check before retrying against the new primary")
	return false
}

// stepDown leaves the primary role for a new election.
func (el *election) stepDown(why string) {
	el.primary = -1
	el.cancelTimer(TimerHeartbeat)
	el.cancelTimer(TimerMaintenance)
	el.journal.failWaiting(why)
	el.conf.abandonUpgrade()
	el.startElection(true)
}
