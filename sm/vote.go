package sm

import (
	"fmt"

	"xce/sm/quorum"
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

func (n *Node) quorumMode() bool { return !n.opt.SeedMode }

// startPreVote asks every peer whether it would vote for us.
func (n *Node) startPreVote() {
	n.el.ballot = ballot{stage: votePre, req: n.ops.id(), grants: map[int]bool{n.opt.Self: true}, tries: n.el.ballot.tries + 1}
	n.log(Debug, "election.pre-vote", fmt.Sprintf("HA election: asking for pre-votes for term %d (round %d)", n.ha.term+1, n.el.ballot.tries))
	n.broadcast(Msg{Type: MsgPreVote, ReqID: n.el.ballot.req})
	n.setTimer(TimerElection, n.opt.ProbeInterval/2)
	n.tryAdvance()
}

// startVote takes the next term, votes for itself and asks for votes; the
// requests leave once that is durable.
func (n *Node) startVote() {
	n.ha.term, n.ha.vote = n.ha.term+1, n.opt.Self
	n.el.ballot = ballot{stage: voteReal, req: n.ops.id(), grants: map[int]bool{n.opt.Self: true}, tries: n.el.ballot.tries}
	n.log(Info, "election.vote", fmt.Sprintf("HA election: standing for term %d (log term %d, lsn %d)", n.ha.term, n.disk.logPos.term, n.disk.logPos.lsn))
	n.syncHA()
	n.broadcast(Msg{Type: MsgVote, ReqID: n.el.ballot.req})
	n.setTimer(TimerElection, n.opt.FailureTimeout)
	n.tryAdvance()
}

// tryAdvance moves the ballot on once it has a majority: pre-votes lead
// to the vote, votes (with our own durable) to promotion.
func (n *Node) tryAdvance() {
	if n.role != RoleCandidate || !quorum.Won(len(n.el.ballot.grants), len(n.opt.Peers)) {
		return
	}
	switch n.el.ballot.stage {
	case votePre:
		n.startVote()
	case voteReal:
		if n.ha.dirty() {
			return // our own vote counts once it is durable (onHADurable)
		}
		n.cancelTimer(TimerProbe)
		n.cancelTimer(TimerElection)
		n.el.ballot = ballot{}
		n.log(Info, "election.primary", fmt.Sprintf("HA election: won term %d with a majority of votes — starting as primary (my_priority=%d)", n.ha.term, n.opt.Self))
		n.becomePrimary(n.ha.term)
	}
}

// onBallotTimeout: the round found no majority in time.
func (n *Node) onBallotTimeout() {
	if n.el.ballot.stage == votePre && n.el.ballot.tries < maxPreVoteRounds {
		n.startPreVote()
		return
	}
	stage := "votes"
	if n.el.ballot.stage == votePre {
		stage = "pre-votes"
	}
	n.log(Info, "election.no-majority", fmt.Sprintf("HA election: no majority of %s (term %d) — starting over", stage, n.ha.term))
	n.el.ballot = ballot{}
	n.startElection(n.el.failover)
}

// followsLivePrimary: we heard from our primary within the failure timeout,
// so we refuse to help depose it (CheckQuorum's vote rejection).
func (n *Node) followsLivePrimary() bool {
	return n.role == RolePrimary || n.role == RoleStandby && !n.el.lost && int64(n.now.Mono)-n.hb.heardAt < int64(n.opt.FailureTimeout)
}

// grantable: a candidate at log position pos may have our (pre-)vote.
func (n *Node) grantable(pos logPos) bool {
	return n.role != RoleBooting && !n.disk.logUnknown && !n.followsLivePrimary() && !n.disk.logPos.after(pos)
}

func (n *Node) onPreVote(from int, m Msg) {
	pos := logPos{term: m.LogTerm, lsn: m.WALPos}
	ok := m.Term >= n.ha.term && n.grantable(pos)
	n.send(from, Msg{Type: MsgPreVoteReply, ReqID: m.ReqID, Accepted: ok})
}

// onVote runs before the term gate: a node that follows a live primary
// ignores the candidate's term (it must not be deposed by it).
func (n *Node) onVote(from int, m Msg) {
	pos := logPos{term: m.LogTerm, lsn: m.WALPos}
	if m.Term < n.ha.term || n.followsLivePrimary() {
		n.send(from, Msg{Type: MsgVoteReply, ReqID: m.ReqID})
		return
	}
	if m.Term > n.ha.term {
		n.observeTerm(m.Term)
		if n.role == RoleCandidate {
			n.el.ballot = ballot{} // our round is void in the new term
		}
	}
	ok := (n.ha.vote < 0 || n.ha.vote == from) && n.grantable(pos)
	if ok {
		n.ha.vote = from
		n.syncHA()
		if n.role == RoleCandidate {
			n.setTimer(TimerElection, n.el.deadline) // give the candidate time to win
		}
		n.log(Info, "election.voted", fmt.Sprintf("HA election: voted for %s in term %d (its log term %d, lsn %d; ours term %d, lsn %d)", n.peerName(from), n.ha.term, pos.term, pos.lsn, n.disk.logPos.term, n.disk.logPos.lsn))
	}
	n.send(from, Msg{Type: MsgVoteReply, ReqID: m.ReqID, Accepted: ok})
}

func (n *Node) onVoteReply(from int, m Msg, pre bool) {
	if n.role != RoleCandidate || m.ReqID != n.el.ballot.req || !m.Accepted {
		return
	}
	if pre != (n.el.ballot.stage == votePre) || !pre && m.Term != n.ha.term {
		return
	}
	n.el.ballot.grants[from] = true
	n.tryAdvance()
}

// onHADurable: data/term caught up with memory.
func (n *Node) onHADurable() {
	switch {
	case n.role == RoleCandidate && n.el.ballot.stage == voteReal:
		n.tryAdvance()
	case n.role == RoleCandidate && n.el.promoting && !n.quorumMode():
		n.becomePrimary(n.ha.term)
	}
}

// checkQuorum: a quorum-mode primary that has not heard from a majority
// within the failure timeout (on messages received from its standbys)
// steps down: it can no longer commit, and a new primary may exist.
func (n *Node) checkQuorum() bool {
	if !n.quorumMode() || n.role != RolePrimary {
		return true
	}
	if int64(n.now.Mono)-n.hb.resumed < int64(n.opt.FailureTimeout) {
		return true // we were not listening: what the peers sent meanwhile is still queued
	}
	heard := 1
	for p, at := range n.hb.peerHeard { // unordered: a count
		if p != n.opt.Self && int64(n.now.Mono)-at < int64(n.opt.FailureTimeout) {
			heard++
		}
	}
	if quorum.Won(heard, len(n.opt.Peers)) {
		return true
	}
	n.log(Warn, "ha.quorum-lost", fmt.Sprintf("HA: primary heard from %d of %d nodes within %v — no majority, stepping down (term %d)", heard, len(n.opt.Peers), n.opt.FailureTimeout, n.ha.term))
	n.stepDown("lost the majority: outcome unknown, check before retrying against the new primary")
	return false
}

// stepDown leaves the primary role for a new election.
func (n *Node) stepDown(why string) {
	n.el.primary = -1
	n.cancelTimer(TimerHeartbeat)
	n.cancelTimer(TimerMaintenance)
	n.failWaiting(why)
	n.abandonUpgrade()
	n.startElection(true)
}
