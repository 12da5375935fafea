package sm

import (
	"fmt"
	"time"
)

// xorshift64 is the seed's jitter PRNG (seed 002 §9.0).
func (n *Node) xorshift64() uint64 {
	x := n.rng
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	n.rng = x
	return x
}

// ElectionDeadline is when a candidate self-declares, from election start:
// at boot election_timeout + priority*step + jitter (seed 002 §9.0); after a
// primary failure rank*step + jitter, where rank counts the live-presumed
// higher-priority peers, so failover fits DESIGN §6's 2 s target.
func (n *Node) electionDeadline() time.Duration {
	jitter := time.Duration(n.xorshift64() % uint64(n.opt.JitterMax))
	if !n.el.failover {
		return n.opt.ElectionTimeout + time.Duration(n.opt.Self)*n.opt.PriorityStep + jitter
	}
	rank := 0
	for i := 0; i < n.opt.Self; i++ {
		if i != n.el.failedP {
			rank++
		}
	}
	return time.Duration(rank)*n.opt.PriorityStep + jitter
}

// startElection probes every peer and arms the deadline (DESIGN §4.1).
func (n *Node) startElection(failover bool) {
	if n.role == RoleStopped {
		return
	}
	n.role = RoleCandidate
	n.el.primary = -1
	n.el.promoting = false
	n.el.ballot = ballot{}
	n.el.failover = failover
	n.joined.standbys = nil
	n.setSync(nil)
	n.el.deferrals = 0
	n.el.electionStart = int64(n.now.Mono)
	if n.opt.SeedLiteralP0 && n.opt.Self == 0 {
		// Seed §9.1 literally: priority 0 never probes.
		n.declare()
		return
	}
	if len(n.opt.Peers) == 1 {
		n.declare() // nobody to probe (seed §14.1 test_am_i_primary_no_peers)
		return
	}
	n.broadcast(Msg{Type: MsgProbe, ReqID: n.ops.id()})
	n.el.deadline = n.electionDeadline()
	n.setTimer(TimerElection, n.el.deadline)
	n.setTimer(TimerProbe, n.opt.ProbeInterval)
}

func (n *Node) onTimer(k TimerKind) {
	n.syncHA() // retry a data/term write that failed: messages wait for it
	switch k {
	case TimerElection:
		switch {
		case n.role != RoleCandidate || n.el.promoting:
		case n.el.ballot.stage != voteNone:
			n.onBallotTimeout()
		default:
			n.declare()
		}
	case TimerProbe:
		if n.role == RoleCandidate {
			n.broadcast(Msg{Type: MsgProbe, ReqID: n.ops.id()})
			n.setTimer(TimerProbe, n.opt.ProbeInterval)
		}
	case TimerHeartbeat:
		if n.role == RolePrimary && n.checkQuorum() {
			n.startRound()
			n.setTimer(TimerHeartbeat, n.opt.HeartbeatInterval)
			if n.jobs != nil && n.jobs.recovered {
				n.releaseWaiting() // a standby that went silent no longer holds writes
			}
		}
	case TimerFailure:
		if n.role == RoleStandby && n.conf.cfg == nil && n.conf.fetch != nil {
			// Without a config we cannot serve as primary: keep the §5.5
			// fetch running (it ends in §10.2 after its window) and look
			// for a new primary instead of standing for election.
			n.log(Warn, "ha.primary-lost", fmt.Sprintf("HA: primary %s silent for %v — no config, not standing for election; still fetching", n.peerName(n.el.primary), n.opt.FailureTimeout))
			n.el.lost = true
			n.broadcast(Msg{Type: MsgProbe, ReqID: n.ops.id()})
			n.setTimer(TimerFailure, n.opt.FailureTimeout)
			return
		}
		if n.role == RoleStandby {
			n.log(Warn, "ha.primary-lost", fmt.Sprintf("HA: primary %s silent for %v — starting election", n.peerName(n.el.primary), n.opt.FailureTimeout))
			n.el.failedP = n.el.primary
			n.stopFetch("primary lost")
			n.startElection(true)
		}
	case TimerFetch:
		n.onFetchTimeout()
	case TimerMaintenance:
		n.maintain()
	case TimerPush:
		n.onPushTimer()
	case TimerLongPoll:
		n.expirePolls()
	}
}

// declare: no live primary answered before the deadline. Without a config
// this is seed §10.1; with one, the new term is made durable first.
func (n *Node) declare() {
	if n.conf.cfg == nil && n.quorumMode() && len(n.opt.Peers) > 1 && n.waitWithoutConfig() {
		return
	}
	if n.conf.cfg == nil {
		install := fmt.Sprintf("xce-config install --workdir %s --name %s --config cluster.yaml", orDefault(n.opt.Workdir, "<workdir>"), n.peerName(n.opt.Self))
		if n.conf.cfgMissing {
			n.die("fatal.primary-no-config", fmt.Sprintf(
				"Primary candidate (priority %d) has no config file '%s' — provision the config before starting the primary controller. Run: %s (%s)",
				n.opt.Self, n.path(PointerPath), install, n.conf.cfgProblem))
			return
		}
		// The file is there but unusable: say what is wrong with it.
		n.die("fatal.primary-no-config", fmt.Sprintf(
			"Primary candidate (priority %d) cannot use its config: %s — fix it or install a valid config before starting the primary controller. Run: %s",
			n.opt.Self, n.conf.cfgProblem, install))
		return
	}
	if p, why := n.fresherPeer(); p >= 0 && n.el.deferrals < maxDeferrals && !(n.opt.SeedLiteralP0 && n.opt.Self == 0) {
		n.el.deferrals++
		wait := n.opt.ProbeInterval / 5
		n.log(Info, "election.defer", fmt.Sprintf("HA election: %s %s — waiting %v", n.peerName(p), why, wait))
		n.broadcast(Msg{Type: MsgProbe, ReqID: n.ops.id()})
		n.setTimer(TimerElection, wait)
		return
	}
	n.cancelTimer(TimerProbe)
	n.cancelTimer(TimerElection)
	if n.opt.SeedLiteralP0 && n.opt.Self == 0 {
		n.log(Info, "election.primary", fmt.Sprintf("HA election: priority 0 is unconditionally primary (seed-literal rule, my_priority=%d)", n.opt.Self))
		n.becomePrimary(n.ha.term)
		return
	}
	if n.quorumMode() {
		n.setTimer(TimerProbe, n.opt.ProbeInterval) // keep looking for a live primary
		n.startPreVote()
		return
	}
	n.log(Info, "election.primary", fmt.Sprintf("HA election: no higher-priority candidate responded within %dms — starting as primary (my_priority=%d)",
		n.el.deadline.Milliseconds(), n.opt.Self))
	// Seed mode: the new term is ours once durable (onHADurable promotes).
	n.ha.term, n.ha.vote = max(n.ha.term, n.el.maxTerm)+1, -1
	n.el.promoting = true
	n.syncHA()
}

func (n *Node) becomePrimary(term uint64) {
	if n.conf.fetch != nil {
		n.log(Info, "conf.fetch-aborted", "Promoted to primary during config fetch — aborting fetch")
		n.stopFetch("")
	}
	n.role = RolePrimary
	n.el.promoting = false
	n.endLog()              // the log's files are recovery's: no standby work goes on
	n.disk.logClean = false // recovery may rewrite them
	n.ha.term = term
	n.el.primary = n.opt.Self
	n.el.pTerm = term
	n.conf.serving = true
	n.joined.standbys = map[int]bool{}
	n.hb.peerHeard, n.hb.peerRound = map[int]int64{}, map[int]uint64{}
	for p := range n.opt.Peers {
		n.hb.peerHeard[p] = int64(n.now.Mono) // they voted for us just now
	}
	n.hb.round, n.hb.roundPending, n.hb.roundWanted = 0, false, false
	n.cancelTimer(TimerFailure)
	staleNote := ""
	if n.conf.stale {
		staleNote = ", config_stale"
	}
	n.log(Info, "ha.promoted", fmt.Sprintf("Promoted to primary (term=%d, config tag=%016x%s)", term, n.conf.cfg.tag, staleNote))
	n.startRound()
	n.setTimer(TimerHeartbeat, n.opt.HeartbeatInterval)
	n.startRecovery()
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
func (n *Node) seenPrimary(from int, term uint64) {
	switch n.role {
	case RoleCandidate:
		if n.quorumMode() && term < n.ha.term {
			n.send(from, Msg{Type: MsgProbeReply})
			return
		}
		n.becomeStandby(from, term, "HA election: candidate %s responded — starting as standby (my_priority=%d)")
	case RoleStandby:
		if n.quorumMode() && term < n.ha.term {
			n.send(from, Msg{Type: MsgProbeReply}) // a deposed primary: show it our term
			return
		}
		if from == n.el.primary {
			n.el.pTerm = max(n.el.pTerm, term)
			n.heard()
			return
		}
		if n.el.lost || outranks(term, from, n.el.pTerm, n.el.primary) {
			n.becomeStandby(from, term, "HA: %s outranks the primary we followed — following it (my_priority=%d)")
		}
	case RolePrimary:
		if n.opt.SeedLiteralP0 && n.opt.Self == 0 {
			return // the seed-literal hole: priority 0 never yields
		}
		if outranks(term, from, n.ha.term, n.opt.Self) {
			n.log(Warn, "ha.stepdown", fmt.Sprintf("HA: primary %s (term %d, priority %d) outranks us (term %d, priority %d) — stepping down", n.peerName(from), term, from, n.ha.term, n.opt.Self))
			n.cancelTimer(TimerHeartbeat)
			n.becomeStandby(from, term, "HA: stepped down — following %s as standby (my_priority=%d)")
			return
		}
		n.send(from, Msg{Type: MsgHeartbeat}) // make the loser hear us now
	}
}

func (n *Node) becomeStandby(p int, term uint64, format string) {
	if n.role == RolePrimary {
		// Stepping down discards the unreplicated state (DESIGN §4.2): a
		// later promotion recovers from disk. Waiting clients learn the new
		// primary with an "outcome unknown".
		n.el.primary = p
		n.failWaiting("stepped down: outcome unknown, check before retrying against the primary")
		n.abandonUpgrade()
	}
	n.cancelTimer(TimerElection)
	n.cancelTimer(TimerProbe)
	n.role = RoleStandby
	n.disk.scanned = nil // a standby recovers nothing: let the boot scan's reads go
	n.el.promoting = false
	n.el.ballot = ballot{}
	n.hb.lastRound, n.hb.lastRoundTerm = 0, 0
	n.setSync(nil)
	n.sb.epochSeen = 0 // sync epochs count per primary
	n.el.primary = p
	n.el.pTerm = term
	n.joined.standbys = nil
	n.el.failover = false
	n.el.failedP = -1
	n.el.lost = false
	n.log(Info, "election.standby", fmt.Sprintf(format, n.peerName(p), n.opt.Self))
	n.heard()
	n.startFetch()
}

// heard records life from the primary and re-arms failure detection.
func (n *Node) heard() {
	n.hb.heardAt = int64(n.now.Mono)
	n.setTimer(TimerFailure, n.opt.FailureTimeout)
}

// onMsg: every message carries the sender's view; a primary's view drives
// the role decisions, then the type-specific handler runs.
func (n *Node) onMsg(from int, m Msg) {
	if n.opt.PeersHash != 0 && m.PeersHash != n.opt.PeersHash {
		n.peersDiffer(from, m.PeersHash)
		return // never vote for, follow or count a node with another cluster list
	}
	if n.conf.peersBad[from] != 0 {
		n.log(Info, "peers.match", fmt.Sprintf("%s's --peers matches ours again", n.peerName(from)))
		delete(n.conf.peersBad, from)
	}
	if n.role == RoleBooting {
		if m.Type == MsgProbe {
			n.send(from, Msg{Type: MsgProbeReply, ReqID: m.ReqID})
		}
		return
	}
	n.el.maxTerm = max(n.el.maxTerm, m.Term)
	n.noteView(from, m)
	switch m.Type {
	case MsgPreVote: // never changes a term
		n.onPreVote(from, m)
		return
	case MsgVote: // must not depose a live primary: its own term rules
		n.onVote(from, m)
		return
	}
	literalP0 := n.opt.SeedLiteralP0 && n.opt.Self == 0 && n.role == RolePrimary
	if m.Term > n.ha.term && !literalP0 { // the seed-literal P0 never yields (the hole it shows)
		// A higher term: make it ours (durable before we say anything),
		// and give up any claim to the lower one.
		wasPrimary := n.role == RolePrimary
		n.observeTerm(m.Term)
		n.el.promoting = false
		n.el.ballot = ballot{}
		if wasPrimary {
			n.log(Warn, "ha.stepdown", fmt.Sprintf("HA: %s is in term %d, above ours — stepping down", n.peerName(from), m.Term))
			n.stepDown("stepped down: outcome unknown, check before retrying against the primary")
		}
	}
	if n.role == RoleCandidate && n.el.failover && !n.el.promoting && n.el.ballot.stage == voteNone && m.Role != RolePrimary && n.bestCandidate() {
		// Every live peer answered and none is fresher (or as fresh with a
		// higher priority): no reason to wait for the deadline.
		n.declare()
		if n.role == RoleStopped {
			return
		}
	}
	if n.role == RolePrimary && m.Role == RoleStandby && m.Term == n.ha.term && n.quorumMode() {
		// Only our standbys are standbys in our term: CheckQuorum and the
		// read index count it.
		n.hb.peerHeard[from] = int64(n.now.Mono)
		n.onRoundEcho(from, m.Round)
	}
	if n.role == RoleStandby && from == n.el.primary && m.Role != RolePrimary {
		n.el.lost = true // our primary restarted or stepped down: follow whoever leads now
	}
	if m.Role == RolePrimary {
		n.seenPrimary(from, m.Term)
		if n.role == RoleStopped {
			return
		}
	}
	switch m.Type {
	case MsgProbe:
		n.send(from, Msg{Type: MsgProbeReply, ReqID: m.ReqID})
	case MsgPreVoteReply:
		n.onVoteReply(from, m, true)
	case MsgVoteReply:
		n.onVoteReply(from, m, false)
	case MsgProbeReply, MsgHeartbeat:
		if m.Type == MsgHeartbeat && n.role == RoleStandby && from == n.el.primary {
			if m.Term != n.hb.lastRoundTerm {
				// Rounds count from 1 in each term of a primary: an echo
				// of an earlier term's round would confirm this term's
				// reads unasked.
				n.hb.lastRound, n.hb.lastRoundTerm = 0, m.Term
			}
			n.hb.lastRound = max(n.hb.lastRound, m.Round)
			n.checkPrimaryTag(m.ConfigTag)
			n.ackRepl() // liveness and position, every heartbeat
			n.checkBehind(m)
		}
	case MsgJoin:
		n.onJoin(from, m)
	case MsgJoinReply:
		n.onJoinReply(from, m)
	case MsgReplConfig:
		n.onReplConfig(from, m)
	case MsgReplConfigReply:
		n.onReplConfigReply(from, m)
	case MsgReplConfigPush:
		n.onPush(from, m)
	case MsgReplSnapshot, MsgReplRecords:
		if n.quorumMode() && m.Term < n.ha.term {
			return // a deposed primary's (or a late) sync: not ours to write
		}
		if m.Type == MsgReplSnapshot {
			n.onReplSnapshot(from, m)
		} else {
			n.onReplRecords(from, m)
		}
	case MsgReplAck:
		n.onReplAck(from, m)
	case MsgReplConfigPushReply:
		if n.role == RolePrimary {
			n.log(Info, "conf.push-acked", fmt.Sprintf("standby %s accepted=%v tag=%016x", n.peerName(from), m.Accepted, m.ConfigTag))
			n.onPushReply(from, m)
		}
	default:
		n.log(Warn, "msg.unknown", fmt.Sprintf("unknown message type %d from %s", m.Type, n.peerName(from)))
	}
}

// path names a node-relative path for messages: absolute when BaseDir is
// known.
func (n *Node) path(rel string) string {
	if n.opt.BaseDir == "" {
		return rel
	}
	return n.opt.BaseDir + "/" + rel
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
func (n *Node) waitWithoutConfig() bool {
	heard := false
	for p, v := range n.el.views { // unordered: an "any" over the views is the same in every order
		heard = heard || p != n.opt.Self && v.at >= n.el.electionStart
	}
	if !heard {
		return false // nobody to vote for: the seed's §10.1 FATAL at once
	}
	if n.el.noCfgSince == 0 {
		n.el.noCfgSince = int64(n.now.Mono) + 1
		n.log(Warn, "election.no-config", fmt.Sprintf("HA election: no config — cannot stand for primary; voting and looking for a primary to fetch it from (%s)", n.conf.cfgProblem))
	}
	if time.Duration(int64(n.now.Mono)-n.el.noCfgSince) >= n.opt.FetchWindow() {
		return false
	}
	// Read conf/ again (an unreadable file may read now, an operator may
	// have installed one), then stand again.
	n.role = RoleBooting
	n.loadSaved(bootElect)
	return true
}

// peersDiffer: from runs with another --peers list (seed §11.2): an ERROR
// naming both nodes, once per hash it sends; its messages are dropped.
func (n *Node) peersDiffer(from int, hash uint64) {
	if n.conf.peersBad == nil {
		n.conf.peersBad = map[int]uint64{}
	}
	if n.conf.peersBad[from] == hash {
		return
	}
	n.conf.peersBad[from] = hash
	n.log(Error, "peers.mismatch", fmt.Sprintf("%s (priority %d) runs with another --peers list than %s (hash %016x, ours %016x): ignoring it — give every controller the same --peers", n.peerName(from), from, n.peerName(n.opt.Self), hash, n.opt.PeersHash))
}

// PeersMismatch lists the peers whose --peers list differs from ours.
func (n *Node) PeersMismatch() []int {
	if len(n.conf.peersBad) == 0 {
		return nil
	}
	return sortedKeys(n.conf.peersBad)
}
