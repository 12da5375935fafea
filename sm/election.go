package sm

import (
	"fmt"
	"time"
)

// xorshift64 is the seed's jitter PRNG (seed 002 §9.0).
func (en *env) xorshift64() uint64 {
	x := en.rng
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	en.rng = x
	return x
}

// ElectionDeadline is when a candidate self-declares, from election start:
// at boot election_timeout + priority*step + jitter (seed 002 §9.0); after a
// primary failure rank*step + jitter, where rank counts the live-presumed
// higher-priority peers, so failover fits DESIGN §6's 2 s target.
func (el *election) electionDeadline() time.Duration {
	jitter := time.Duration(el.xorshift64() % uint64(el.opt.JitterMax))
	if !el.failover {
		return el.opt.ElectionTimeout + time.Duration(el.opt.Self)*el.opt.PriorityStep + jitter
	}
	rank := 0
	for i := 0; i < el.opt.Self; i++ {
		if i != el.failedP {
			rank++
		}
	}
	return time.Duration(rank)*el.opt.PriorityStep + jitter
}

// setRole enters role r with that role's own state fresh and every other
// role's state gone: nothing of a candidacy survives it, and no
// primary's rounds or standby's view outlive the role.
func (el *election) setRole(r Role) {
	el.role = r
	el.cand, el.lead, el.fol = nil, nil, nil
	switch r {
	case RoleCandidate:
		el.cand = &candidacy{}
	case RolePrimary:
		el.lead = &leadership{peerHeard: map[int]int64{}, peerRound: map[int]uint64{}}
	case RoleStandby:
		el.fol = &following{}
	}
}

// startElection probes every peer and arms the deadline (DESIGN §4.1).
func (el *election) startElection(failover bool) {
	if el.role == RoleStopped {
		return
	}
	el.setRole(RoleCandidate)
	el.primary = -1
	el.failover = failover
	el.joined.standbys = nil
	el.sb.setSync(nil)
	el.cand.start = int64(el.now.Mono)
	if el.opt.SeedLiteralP0 && el.opt.Self == 0 {
		// Seed §9.1 literally: priority 0 never probes.
		el.declare()
		return
	}
	if len(el.opt.Peers) == 1 {
		el.declare() // nobody to probe (seed §14.1 test_am_i_primary_no_peers)
		return
	}
	el.broadcast(Msg{Type: MsgProbe, ReqID: el.ops.id()})
	el.cand.deadline = el.electionDeadline()
	el.setTimer(TimerElection, el.cand.deadline)
	el.setTimer(TimerProbe, el.opt.ProbeInterval)
}

// declare: no live primary answered before the deadline. Without a config
// this is seed §10.1; with one, the new term is made durable first.
func (el *election) declare() {
	if el.conf.cfg == nil && el.quorumMode() && len(el.opt.Peers) > 1 && el.waitWithoutConfig() {
		return
	}
	if el.conf.cfg == nil {
		install := fmt.Sprintf("xce-config install --workdir %s --name %s --config cluster.yaml", orDefault(el.opt.Workdir, "<workdir>"), el.peerName(el.opt.Self))
		if el.conf.cfgMissing {
			el.node.die("fatal.primary-no-config", fmt.Sprintf(
				"Primary candidate (priority %d) has no config file '%s' — provision the config before starting the primary controller. Run: %s (%s)",
				el.opt.Self, el.path(PointerPath), install, el.conf.cfgProblem))
			return
		}
		// The file is there but unusable: say what is wrong with it.
		el.node.die("fatal.primary-no-config", fmt.Sprintf(
			"Primary candidate (priority %d) cannot use its config: %s — fix it or install a valid config before starting the primary controller. Run: %s",
			el.opt.Self, el.conf.cfgProblem, install))
		return
	}
	if p, why := el.fresherPeer(); p >= 0 && el.cand.deferrals < maxDeferrals && !(el.opt.SeedLiteralP0 && el.opt.Self == 0) {
		el.cand.deferrals++
		wait := el.opt.ProbeInterval / 5
		el.log(Info, "election.defer", fmt.Sprintf("HA election: %s %s — waiting %v", el.peerName(p), why, wait))
		el.broadcast(Msg{Type: MsgProbe, ReqID: el.ops.id()})
		el.setTimer(TimerElection, wait)
		return
	}
	el.cancelTimer(TimerProbe)
	el.cancelTimer(TimerElection)
	if el.opt.SeedLiteralP0 && el.opt.Self == 0 {
		el.log(Info, "election.primary", fmt.Sprintf("HA election: priority 0 is unconditionally primary (seed-literal rule, my_priority=%d)", el.opt.Self))
		el.node.becomePrimary(el.ha.term)
		return
	}
	if el.quorumMode() {
		el.setTimer(TimerProbe, el.opt.ProbeInterval) // keep looking for a live primary
		el.startPreVote()
		return
	}
	el.log(Info, "election.primary", fmt.Sprintf("HA election: no higher-priority candidate responded within %dms — starting as primary (my_priority=%d)",
		el.cand.deadline.Milliseconds(), el.opt.Self))
	// Seed mode: the new term is ours once durable (onHADurable promotes).
	el.ha.term, el.ha.vote = max(el.ha.term, el.maxTerm)+1, -1
	el.cand.promoting = true
	el.syncHA()
}

func (n *Node) becomePrimary(term uint64) {
	if n.conf.fetch != nil {
		n.log(Info, "conf.fetch-aborted", "Promoted to primary during config fetch — aborting fetch")
		n.conf.stopFetch("")
	}
	n.el.setRole(RolePrimary)
	kept := n.sb.keptState()         // before endLog drops it: recovery may start from it
	building := n.sb.buildInFlight() // or from the state a checkpoint is building
	n.sb.endLog()                    // the log's files are recovery's: no standby work goes on
	n.disk.logClean = false          // recovery may rewrite them
	n.el.ha.term = term
	n.el.primary = n.opt.Self
	n.el.pTerm = term
	n.conf.serving = true
	n.joined.standbys = map[int]bool{}
	for p := range n.opt.Peers {
		n.el.lead.peerHeard[p] = int64(n.now.Mono) // they voted for us just now
	}
	n.cancelTimer(TimerFailure)
	staleNote := ""
	if n.conf.stale {
		staleNote = ", config_stale"
	}
	n.log(Info, "ha.promoted", fmt.Sprintf("Promoted to primary (term=%d, config tag=%016x%s)", term, n.conf.cfg.tag, staleNote))
	n.el.startRound()
	n.setTimer(TimerHeartbeat, n.opt.HeartbeatInterval)
	n.journal.startRecovery(kept, building)
	n.sw.regained(term) // last: an upgrade's handover ends in a restart
}

// Deferral bounds: how often a candidate waits for a fresher peer, and
// for a peer that has not answered (at ProbeInterval each).
const (
	maxDeferrals        = 20 // 2 s at ProbeInterval/5
	maxUnheardDeferrals = 2
)

// outranks reports whether primary (term a, priority pa) beats (b, pb):
// higher term, then higher priority (lower index) (DESIGN §4.2).
func outranks(a uint64, pa int, b uint64, pb int) bool {
	return a > b || a == b && pa < pb
}

// seenPrimary handles any message whose sender says it is primary.
func (el *election) seenPrimary(from int, term, round uint64) {
	switch el.role {
	case RoleCandidate:
		if el.quorumMode() && term < el.ha.term {
			el.send(from, Msg{Type: MsgProbeReply})
			return
		}
		if l := el.cand.lost; from == el.failedP && term == l.term && round <= l.round {
			// Sent before the last heartbeat we had from the primary we
			// lost, and delivered late (a clogged link, a reconnect): the
			// silence since is what we acted on. Taken for a sign of life,
			// a dead primary's backlog made us follow it again for another
			// failure timeout (seed 1097166).
			return
		}
		el.node.becomeStandby(from, term, "HA election: candidate %s responded — starting as standby (my_priority=%d)")
	case RoleStandby:
		if el.quorumMode() && term < el.ha.term {
			el.send(from, Msg{Type: MsgProbeReply}) // a deposed primary: show it our term
			return
		}
		if from == el.primary {
			el.pTerm = max(el.pTerm, term)
			el.heard()
			return
		}
		if el.fol.lost || outranks(term, from, el.pTerm, el.primary) {
			el.node.becomeStandby(from, term, "HA: %s outranks the primary we followed — following it (my_priority=%d)")
		}
	case RolePrimary:
		if el.opt.SeedLiteralP0 && el.opt.Self == 0 {
			return // the seed-literal hole: priority 0 never yields
		}
		if outranks(term, from, el.ha.term, el.opt.Self) {
			el.log(Warn, "ha.stepdown", fmt.Sprintf("HA: primary %s (term %d, priority %d) outranks us (term %d, priority %d) — stepping down", el.peerName(from), term, from, el.ha.term, el.opt.Self))
			el.cancelTimer(TimerHeartbeat)
			el.node.becomeStandby(from, term, "HA: stepped down — following %s as standby (my_priority=%d)")
			return
		}
		el.send(from, Msg{Type: MsgHeartbeat}) // make the loser hear us now
	}
}

func (n *Node) becomeStandby(p int, term uint64, format string) {
	if n.role == RolePrimary {
		// Stepping down discards the unreplicated state (DESIGN §4.2): a
		// later promotion recovers from disk. Waiting clients learn the new
		// primary with an "outcome unknown".
		n.el.primary = p
		n.journal.failWaiting("stepped down: outcome unknown, check before retrying against the primary")
		n.conf.abandonUpgrade()
	}
	n.cancelTimer(TimerElection)
	n.cancelTimer(TimerProbe)
	n.el.setRole(RoleStandby)
	n.disk.scanned = nil // a standby recovers nothing: let the boot scan's reads go
	n.sb.setSync(nil)
	n.sb.epochSeen, n.sb.missedSync = 0, 0 // each primary numbers its own syncs
	n.el.primary = p
	n.el.pTerm = term
	n.joined.standbys = nil
	n.el.failover = false
	n.el.failedP = -1
	n.log(Info, "election.standby", fmt.Sprintf(format, n.peerName(p), n.opt.Self))
	n.el.heard()
	n.conf.startFetch()
	n.sw.followed(p, term)
}

// heard records life from the primary and re-arms failure detection.
func (el *election) heard() {
	el.fol.heardAt = int64(el.now.Mono)
	el.setTimer(TimerFailure, el.opt.FailureTimeout)
}

// path names a node-relative path for messages: absolute when BaseDir is
// known.
func (en *env) path(rel string) string {
	if en.opt.BaseDir == "" {
		return rel
	}
	return en.opt.BaseDir + "/" + rel
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// waitWithoutConfig: in quorum mode a node without config cannot stand,
// but while peers answer, its vote may be the one a config holder needs,
// so it stays up and keeps looking for a primary to fetch the config
// from — for the §5.5 fetch window (~88 s), then the §10.1 FATAL.
func (el *election) waitWithoutConfig() bool {
	heard := false
	for p, v := range el.views { // unordered: an "any" over the views is the same in every order
		heard = heard || p != el.opt.Self && v.at >= el.cand.start
	}
	if !heard {
		return false // nobody to vote for: the seed's §10.1 FATAL at once
	}
	if el.noCfgSince == 0 {
		el.noCfgSince = int64(el.now.Mono) + 1
		el.log(Warn, "election.no-config", fmt.Sprintf("HA election: no config — cannot stand for primary; voting and looking for a primary to fetch it from (%s)", el.conf.cfgProblem))
	}
	if time.Duration(int64(el.now.Mono)-el.noCfgSince) >= el.opt.FetchWindow() {
		return false
	}
	// Read conf/ again (an unreadable file may read now, an operator may
	// have installed one), then stand again.
	el.setRole(RoleBooting)
	el.conf.loadSaved(bootElect)
	return true
}

// peersDiffer: from runs with another --peers list (seed §11.2): an ERROR
// naming both nodes, once per hash it sends; its messages are dropped.
// peersMatch reports whether a message's sender runs with our --peers
// (a difference is logged once per hash, a match again once).
func (cs *configState) peersMatch(from int, m Msg) bool {
	if cs.opt.PeersHash != 0 && m.PeersHash != cs.opt.PeersHash {
		cs.peersDiffer(from, m.PeersHash)
		return false
	}
	if cs.peersBad[from] != 0 {
		cs.log(Info, "peers.match", fmt.Sprintf("%s's --peers matches ours again", cs.peerName(from)))
		delete(cs.peersBad, from)
	}
	return true
}

func (cs *configState) peersDiffer(from int, hash uint64) {
	if cs.peersBad == nil {
		cs.peersBad = map[int]uint64{}
	}
	if cs.peersBad[from] == hash {
		return
	}
	cs.peersBad[from] = hash
	cs.log(Error, "peers.mismatch", fmt.Sprintf("%s (priority %d) runs with another --peers list than %s (hash %016x, ours %016x): ignoring it — give every controller the same --peers", cs.peerName(from), from, cs.peerName(cs.opt.Self), hash, cs.opt.PeersHash))
}

// PeersMismatch lists the peers whose --peers list differs from ours.
func (n *Node) PeersMismatch() []int {
	if len(n.conf.peersBad) == 0 {
		return nil
	}
	return sortedKeys(n.conf.peersBad)
}

// observe is what every message after boot tells the election, before
// the message's own handler runs: a higher term (made ours, and a
// primary steps down), an early end of a failover when every live peer
// has answered, a standby's echo counted for CheckQuorum and reads, a
// primary that is gone or one that leads. It reports false once the node
// stopped.
func (el *election) observe(from int, m Msg) bool {
	literalP0 := el.opt.SeedLiteralP0 && el.opt.Self == 0 && el.role == RolePrimary
	if m.Term > el.ha.term && !literalP0 { // the seed-literal P0 never yields (the hole it shows)
		// A higher term: make it ours (durable before we say anything),
		// and give up any claim to the lower one.
		wasPrimary := el.role == RolePrimary
		el.observeTerm(m.Term)
		if el.cand != nil {
			el.cand.promoting = false
			el.cand.ballot = ballot{}
		}
		if wasPrimary {
			el.log(Warn, "ha.stepdown", fmt.Sprintf("HA: %s is in term %d, above ours — stepping down", el.peerName(from), m.Term))
			el.stepDown("stepped down: outcome unknown, check before retrying against the primary")
		}
	}
	if el.role == RoleCandidate && el.failover && !el.cand.promoting && el.cand.ballot.stage == voteNone && m.Role != RolePrimary && el.bestCandidate() {
		// Every live peer answered and none is fresher (or as fresh with a
		// higher priority): no reason to wait for the deadline.
		el.declare()
		if el.role == RoleStopped {
			return false
		}
	}
	if el.role == RolePrimary && m.Role == RoleStandby && m.Term == el.ha.term && el.quorumMode() {
		// Only our standbys are standbys in our term: CheckQuorum and the
		// read index count it.
		el.lead.peerHeard[from] = int64(el.now.Mono)
		el.onRoundEcho(from, m.Round)
	}
	if el.role == RoleStandby && from == el.primary && m.Role != RolePrimary {
		el.fol.lost = true // our primary restarted or stepped down: follow whoever leads now
	}
	if m.Role == RolePrimary {
		el.seenPrimary(from, m.Term, m.Round)
		if el.role == RoleStopped {
			return false
		}
	}
	return true
}

// heartbeatFromPrimary notes the round of a heartbeat from the primary a
// standby follows, and reports whether it was one.
func (el *election) heartbeatFromPrimary(from int, m Msg) bool {
	if el.role != RoleStandby || from != el.primary {
		return false
	}
	if m.Term != el.fol.lastRoundTerm {
		// Rounds count from 1 in each term of a primary: an echo of an
		// earlier term's round would confirm this term's reads unasked.
		el.fol.lastRound, el.fol.lastRoundTerm = 0, m.Term
	}
	el.fol.lastRound = max(el.fol.lastRound, m.Round)
	return true
}

// onElectionTimer: a candidate's deadline (or its ballot's) passed.
func (el *election) onElectionTimer() {
	switch {
	case el.role != RoleCandidate || el.cand.promoting:
	case el.cand.ballot.stage != voteNone:
		el.onBallotTimeout()
	default:
		el.declare()
	}
}

// onProbeTimer: a candidate probes its peers again.
func (el *election) onProbeTimer() {
	if el.role == RoleCandidate {
		el.broadcast(Msg{Type: MsgProbe, ReqID: el.ops.id()})
		el.setTimer(TimerProbe, el.opt.ProbeInterval)
	}
}

// onHeartbeatTimer: a primary that still has its quorum sends the next
// round.
func (el *election) onHeartbeatTimer() {
	if el.role == RolePrimary && el.checkQuorum() {
		el.startRound()
		el.setTimer(TimerHeartbeat, el.opt.HeartbeatInterval)
		if el.journal.jobs != nil && el.journal.jobs.recovered {
			el.journal.releaseWaiting() // a standby that went silent no longer holds writes
			el.journal.resumeWAL()      // nor the next write (groupcommit.go)
		}
	}
}

// onFailureTimer: a standby's primary went silent.
func (el *election) onFailureTimer() {
	if el.role == RoleStandby && el.conf.cfg == nil && el.conf.fetch != nil {
		// Without a config we cannot serve as primary: keep the §5.5
		// fetch running (it ends in §10.2 after its window) and look
		// for a new primary instead of standing for election.
		el.log(Warn, "ha.primary-lost", fmt.Sprintf("HA: primary %s silent for %v — no config, not standing for election; still fetching", el.peerName(el.primary), el.opt.FailureTimeout))
		el.fol.lost = true
		el.broadcast(Msg{Type: MsgProbe, ReqID: el.ops.id()})
		el.setTimer(TimerFailure, el.opt.FailureTimeout)
		return
	}
	if el.role == RoleStandby {
		el.log(Warn, "ha.primary-lost", fmt.Sprintf("HA: primary %s silent for %v — starting election", el.peerName(el.primary), el.opt.FailureTimeout))
		el.failedP = el.primary
		last := roundMark{el.fol.lastRound, el.fol.lastRoundTerm}
		el.conf.stopFetch("primary lost")
		el.startElection(true)
		if el.cand != nil {
			el.cand.lost = last
		}
	}
}
