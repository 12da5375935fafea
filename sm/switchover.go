package sm

import (
	"fmt"
	"time"
)

// Planned switchover (a leadership transfer: Raft's TimeoutNow, etcd's
// MoveLeader, Patroni's switchover). An admin asks the primary to hand
// its role to a synced standby. The primary stops taking writes (client
// calls are held, not refused), waits until every record it wrote is
// durable on the target and every waiting reply went out, then tells the
// target to stand at once (MsgTimeoutNow). The target takes the next term
// without a pre-vote and asks for votes marked as a transfer, which a
// node grants although it follows a live primary (the vote's log check
// stands: a target missing a committed record cannot win). The old
// primary sees the higher term, steps down, votes and follows the target;
// the held calls are then answered "not primary" naming the new primary
// (the API forwards them there). Nothing acknowledged can be lost: no
// write is acknowledged while held, and the target's log holds all the
// old primary's. A handover that has not completed in HandoverTimeout
// ends: a primary that still leads takes writes again (the held calls
// run then), and the admin hears why.

// Switchover asks the primary to hand its role to standby To (-1: the
// synced standby with the most of the log, the highest priority among
// equals). Peer is the caller's certificate CN, for the log.
type Switchover struct {
	ID   uint64
	To   int
	Peer string
}

func (Switchover) isInput() {}

// SwitchoverReply answers Switchover: with SwitchoverOK, Primary (the
// target) leads in Term; otherwise Error says why, and Primary is the
// primary if known, else -1.
type SwitchoverReply struct {
	ID      uint64
	Outcome SwitchoverOutcome
	Error   string
	Primary int
	Term    uint64
}

func (SwitchoverReply) isEffect() {}

// SwitchoverOutcome is how a switchover ended, as a code: the daemon
// picks the client's status from it, never from the text.
type SwitchoverOutcome uint8

const (
	SwitchoverOK         SwitchoverOutcome = iota // the target leads
	SwitchoverNotPrimary                          // ask the primary (Primary)
	SwitchoverDisabled                            // no admin is configured, or seed mode
	SwitchoverBusy                                // recovering, an upgrade, or another switchover
	SwitchoverInvalid                             // the target is no member, or this node
	SwitchoverNotInSync                           // the target (or every standby) is not in sync
	SwitchoverFailed                              // the handover did not complete in time
)

var switchoverOutcomeNames = [...]string{"ok", "not primary", "disabled", "busy", "invalid", "not in sync", "failed"}

func (o SwitchoverOutcome) String() string {
	if int(o) < len(switchoverOutcomeNames) {
		return switchoverOutcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// HandoverTimeout bounds a handover, from its acceptance to the target's
// lead: the catch-up of the target, its election and the old primary's
// step-down.
const HandoverTimeout = 2 * time.Second

// maxHeldOps bounds the client calls held during a handover; past it a
// call is refused at once (EAGAIN), as nothing was applied.
const maxHeldOps = 4096

// handover is one switchover under way. It outlives the primary role
// (the old primary steps down before the target leads), so it belongs to
// the switchover concern, not to the primary's leadership.
type handover struct {
	id      uint64
	peer    string
	to      int
	term    uint64        // the term the old primary led when it began
	started time.Duration // Mono at acceptance
	sent    bool          // MsgTimeoutNow went to the target
	held    []ClientOp    // client calls held until it ends
	// upgrade: started by a config upgrade (no admin waits for a reply);
	// the old primary restarts once it ends, to run the new config.
	upgrade bool
}

// switchover is the planned-switchover concern: the handover under way.
type switchover struct {
	cur *handover

	*env
	el      *election
	conf    *configState
	journal *journal
}

// frozen: the primary takes no writes, its own included, while it hands
// over.
func (sw *switchover) frozen() bool { return sw.cur != nil }

// onSwitchover is the primary's handler of an admin's Switchover.
func (sw *switchover) onSwitchover(s Switchover) {
	j := sw.journal.jobs
	switch {
	case sw.role != RolePrimary:
		sw.refuse(s, SwitchoverNotPrimary, "Not primary — redirect to primary")
		return
	case !sw.opt.EnableUpgrade:
		sw.refuse(s, SwitchoverDisabled, "switchover is disabled on this controller (no admin is configured: start it with --admin-cn)")
		return
	case !sw.quorumMode():
		sw.refuse(s, SwitchoverDisabled, "switchover needs quorum mode (this cluster runs the seed's replication)")
		return
	case j == nil || !j.recovered:
		sw.refuse(s, SwitchoverBusy, "the primary is recovering its job state; retry")
		return
	case sw.cur != nil:
		sw.refuse(s, SwitchoverBusy, fmt.Sprintf("a switchover to %s is already in progress", sw.peerName(sw.cur.to)))
		return
	case sw.conf.upgrade != nil:
		sw.refuse(s, SwitchoverBusy, "a config upgrade is in progress")
		return
	case s.To == sw.opt.Self:
		sw.refuse(s, SwitchoverInvalid, fmt.Sprintf("%s is already the primary", sw.peerName(s.To)))
		return
	case s.To >= len(sw.opt.Peers) || s.To < -1:
		sw.refuse(s, SwitchoverInvalid, fmt.Sprintf("no member with index %d (the cluster has %d)", s.To, len(sw.opt.Peers)))
		return
	}
	to, why := sw.target(s.To)
	if to < 0 {
		sw.refuse(s, SwitchoverNotInSync, why)
		return
	}
	sw.begin(&handover{id: s.ID, peer: s.Peer, to: to})
}

// target checks the requested standby (or picks one, want = -1): in a
// sync of our log that it acknowledged within the failure timeout,
// lagging or not (the handover waits for it), and running our config.
func (sw *switchover) target(want int) (int, string) {
	j := sw.journal.jobs
	if want >= 0 {
		if why := sw.unfit(want); why != "" {
			return -1, why
		}
		return want, ""
	}
	var fit []int
	for _, p := range j.prog.Peers() {
		if sw.unfit(p) == "" {
			fit = append(fit, p)
		}
	}
	best := sw.mostAcked(fit)
	if best < 0 {
		return -1, "no standby is in sync with our config"
	}
	return best, ""
}

// mostAcked is the standby among peers (in index order: the first of
// equals wins) that acknowledged the most of our log; -1 if none is in a
// sync.
func (sw *switchover) mostAcked(peers []int) int {
	prog := sw.journal.jobs.prog
	best := -1
	for _, p := range peers {
		if prog[p] != nil && (best < 0 || prog[p].Acked > prog[best].Acked) {
			best = p
		}
	}
	return best
}

// unfit says why standby p cannot take over now ("" if it can).
func (sw *switchover) unfit(p int) string {
	j := sw.journal.jobs
	now, timeout := int64(sw.now.Mono), int64(sw.opt.FailureTimeout)
	pr := j.prog[p]
	if pr == nil {
		return fmt.Sprintf("%s is not a joined standby", sw.peerName(p))
	}
	st, behind := pr.State(now, timeout, j.durableLSN)
	if !pr.Synced || !pr.Live(now, timeout) || now-pr.AckedAt > timeout {
		return fmt.Sprintf("%s is not in sync (%s, %d records behind, its sync last acknowledged %v ago)", sw.peerName(p), st, behind, time.Duration(now-pr.AckedAt))
	}
	if v := sw.el.views[p]; v.tag != sw.conf.cfg.tag {
		return fmt.Sprintf("%s runs another config (tag %016x, ours %016x)", sw.peerName(p), v.tag, sw.conf.cfg.tag)
	}
	return ""
}

func (sw *switchover) refuse(s Switchover, o SwitchoverOutcome, msg string) {
	sw.log(Warn, "switchover.refused", fmt.Sprintf("switchover from %s refused: %s", s.Peer, msg))
	sw.emit(SwitchoverReply{ID: s.ID, Outcome: o, Error: msg, Primary: sw.el.primary})
}

// begin freezes writes and hands over as soon as the target holds our
// whole log.
func (sw *switchover) begin(h *handover) {
	h.term, h.started = sw.el.ha.term, sw.now.Mono
	sw.cur = h
	who := "CN=" + h.peer
	if h.upgrade {
		who = "the config upgrade"
	}
	sw.log(Info, "switchover.start", fmt.Sprintf("switchover to %s asked by %s: writes held until it leads (term %d, durable lsn %d)", sw.peerName(h.to), who, h.term, sw.journal.jobs.durableLSN))
	sw.setTimer(TimerHandover, HandoverTimeout)
	sw.tryHandOver()
}

// handingTo: a handover to p is under way and p was told to stand.
func (sw *switchover) handingTo(p int) bool { return sw.cur != nil && sw.cur.sent && sw.cur.to == p }

// hold keeps a client call for the handover's end, and reports whether
// it did (false: no handover, the call runs now).
func (sw *switchover) hold(c ClientOp) bool {
	h := sw.cur
	if h == nil {
		return false
	}
	if len(h.held) >= maxHeldOps {
		sw.emit(Reply{ID: c.ID, Status: StatusEAGAIN, Error: "switchover in progress: too many calls held; retry", Primary: sw.el.primary})
		return true
	}
	h.held = append(h.held, c)
	return true
}

// drop forgets a held call whose caller went away.
func (sw *switchover) drop(id uint64) {
	if h := sw.cur; h != nil {
		for i, c := range h.held {
			if c.ID == id {
				h.held = append(h.held[:i], h.held[i+1:]...)
				return
			}
		}
	}
}

// tryHandOver sends MsgTimeoutNow once nothing is left to write or
// answer and the target acknowledged our whole durable log. The journal
// calls it whenever replies are released (a write durable, a standby's
// ack, a heartbeat).
func (sw *switchover) tryHandOver() {
	h := sw.cur
	j := sw.journal.jobs
	if h == nil || h.sent || sw.role != RolePrimary || j == nil {
		return
	}
	pr := j.prog[h.to]
	if len(j.batches) > 0 || j.writing || len(j.waiting) > 0 || j.nextLSN != j.durableLSN+1 || pr == nil || !pr.Synced || pr.Acked < j.durableLSN {
		return
	}
	h.sent = true
	sw.log(Info, "switchover.timeout-now", fmt.Sprintf("%s holds our whole log (lsn %d): asking it to stand now", sw.peerName(h.to), j.durableLSN))
	sw.el.send(h.to, Msg{Type: MsgTimeoutNow, ReqID: h.id})
}

// followed: the node now follows primary p in term; a handover ends with
// it (success when p is the target in a newer term).
func (sw *switchover) followed(p int, term uint64) {
	h := sw.cur
	if h == nil || term <= h.term {
		return
	}
	if p == h.to {
		sw.log(Info, "switchover.done", fmt.Sprintf("switchover done: %s leads in term %d (%v after it began)", sw.peerName(p), term, sw.now.Mono-h.started))
		sw.end(SwitchoverReply{ID: h.id, Outcome: SwitchoverOK, Primary: p, Term: term})
		return
	}
	msg := fmt.Sprintf("%s took the primary role in term %d instead of %s", sw.peerName(p), term, sw.peerName(h.to))
	sw.log(Warn, "switchover.failed", "switchover failed: "+msg)
	sw.end(SwitchoverReply{ID: h.id, Outcome: SwitchoverFailed, Error: msg, Primary: p})
}

// regained: the node became primary again (term) while a handover it
// began was open: the handover failed, and the held calls run now
// (answered "recovering" until the job state is back).
func (sw *switchover) regained(term uint64) {
	h := sw.cur
	if h == nil || term <= h.term {
		return
	}
	msg := fmt.Sprintf("this node was elected again in term %d instead of %s", term, sw.peerName(h.to))
	sw.log(Warn, "switchover.failed", "switchover failed: "+msg)
	sw.end(SwitchoverReply{ID: h.id, Outcome: SwitchoverFailed, Error: msg, Primary: sw.opt.Self})
}

// onTimer: the handover did not complete in HandoverTimeout.
func (sw *switchover) onTimer() {
	h := sw.cur
	if h == nil {
		return
	}
	var msg string
	switch {
	case !h.sent:
		behind := uint64(0)
		if j := sw.journal.jobs; j != nil {
			if pr := j.prog[h.to]; pr != nil && pr.Acked < j.durableLSN {
				behind = j.durableLSN - pr.Acked
			}
		}
		msg = fmt.Sprintf("%s did not catch up within %v (%d records behind)", sw.peerName(h.to), HandoverTimeout, behind)
	case sw.role == RolePrimary:
		msg = fmt.Sprintf("%s did not take over within %v", sw.peerName(h.to), HandoverTimeout)
	default:
		msg = fmt.Sprintf("%s did not take over within %v; this node is %s now", sw.peerName(h.to), HandoverTimeout, sw.role)
	}
	if sw.role == RolePrimary {
		msg += "; this primary takes writes again"
	}
	sw.log(Warn, "switchover.failed", "switchover failed: "+msg)
	sw.end(SwitchoverReply{ID: h.id, Outcome: SwitchoverFailed, Error: msg, Primary: sw.el.primary})
}

// end answers the admin, releases the held calls (run here if we still
// lead, else answered "not primary" naming who leads) and, for an
// upgrade's handover, restarts the node.
func (sw *switchover) end(rep SwitchoverReply) {
	h := sw.cur
	sw.cur = nil
	sw.cancelTimer(TimerHandover)
	if !h.upgrade {
		sw.emit(rep)
	}
	if sw.role == RolePrimary {
		sw.journal.maintain() // the sweeps and ticks skipped while frozen
	}
	for _, c := range h.held {
		sw.journal.onClientOp(c)
	}
	if h.upgrade {
		sw.conf.handedOver()
	}
}

// onTimeoutNow: our primary asks us to take over now. We stand only if
// we follow it in its term with a config and hold its whole log (the
// position its message carries); else the old primary's handover runs
// out and it keeps the role.
func (el *election) onTimeoutNow(from int, m Msg) {
	pos := logPos{term: m.LogTerm, lsn: m.WALPos}
	switch {
	case el.role != RoleStandby || from != el.primary || m.Term != el.pTerm:
		el.log(Warn, "switchover.ignored", fmt.Sprintf("%s asks us to take over, but we do not follow it in term %d", el.peerName(from), m.Term))
		return
	case el.conf.cfg == nil:
		el.log(Warn, "switchover.ignored", fmt.Sprintf("%s asks us to take over, but we have no config yet", el.peerName(from)))
		return
	case el.disk.logUnknown || pos.after(el.disk.logPos):
		el.log(Warn, "switchover.ignored", fmt.Sprintf("%s asks us to take over, but our log (term %d, lsn %d) lacks its (term %d, lsn %d)", el.peerName(from), el.disk.logPos.term, el.disk.logPos.lsn, pos.term, pos.lsn))
		return
	}
	el.log(Info, "election.transfer", fmt.Sprintf("HA: %s hands the primary role over — standing for term %d now", el.peerName(from), el.ha.term+1))
	el.failedP = from
	el.conf.stopFetch("switchover")
	el.startElection(true)
	if el.role == RoleCandidate {
		el.startVote(true)
	}
}
