package sm

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"sort"
	"time"

	"github.com/xce-hpc/xce/schema"
)

// UpgradeConfig is OP_upgradeConfig (seed 002 §6): an admin uploads a new
// ClusterConfig blob with its SHA-256. Peer is the caller's certificate
// CN, already sanitised, for the log. In quorum mode the primary then
// hands its role to a standby that saved the new config (switchover.go)
// before it restarts, unless Restart asks for the seed's way: restart at
// once, and let a failover elect the next primary.
type UpgradeConfig struct {
	ID      uint64
	Bytes   []byte
	SHA256  []byte
	Peer    string
	Restart bool
}

func (UpgradeConfig) isInput() {}

// UpgradeReply answers UpgradeConfig (seed 002 §6.3 UpgradeConfigReply):
// VersionTag is the new tag (0 on error), AckedCount the standbys that
// confirmed the push. After an accepted upgrade the node exits 0 so the
// service manager restarts it with the new config.
type UpgradeReply struct {
	ID         uint64
	VersionTag uint64
	Outcome    UpgradeOutcome // what the daemon answers with; Error is its text
	Error      string
	AckedCount int
	Primary    int // with UpgradeNotPrimary: the primary, if known, else -1
}

// UpgradeOutcome is how an upgrade ended, as a code: the daemon picks the
// client's status from it, never from the text (which is for people).
type UpgradeOutcome uint8

const (
	UpgradeOK         UpgradeOutcome = iota // saved and pushed; the node restarts
	UpgradeNotPrimary                       // §10.12: ask the primary (Primary)
	UpgradeDisabled                         // no admin is configured
	UpgradeBusy                             // another upgrade is in progress
	UpgradeInvalid                          // the blob or its config is refused
	UpgradeSaveFailed                       // the save failed: nothing changed
	UpgradeUnknown                          // stepped down midway: maybe saved
)

func (UpgradeReply) isEffect() {}

// ConfPushTimeout is CONF_PUSH_TIMEOUT_MS: one aggregate wait for every
// standby's push ACK (seed 002 §6.3).
const ConfPushTimeout = 500 * time.Millisecond

// ckptWaitMax bounds the wait for an in-flight checkpoint before the
// restart (seed 002 §6.7: 30 s).
const ckptWaitMax = 30 * time.Second

// upgradeState is an accepted upgrade waiting for push ACKs, then for a
// running checkpoint, before the restart.
type upgradeState struct {
	id       uint64
	tag      uint64
	pushID   uint64
	waiting  map[int]bool
	acked    int
	replied  bool
	waitFrom time.Duration // when the checkpoint wait began
	peer     string
	accepted []int // the standbys that saved the pushed config, in index order
	restart  bool  // UpgradeConfig.Restart: no handover
}

// onUpgrade is the primary's handler (seed 002 §6.4), in its order:
// size, fields, SHA-256 in transit, decode, minimum viability, reserved
// names; then generation = current + 1, re-encode, crash-safe save, push
// to the joined standbys, ACK the admin with the count, and restart.
func (cs *configState) onUpgrade(u UpgradeConfig) {
	switch {
	case cs.role != RolePrimary || cs.cfg == nil:
		cs.refuseUpgrade(u.ID, u.Peer, UpgradeNotPrimary, "Not primary — redirect to primary") // §10.12
		return
	case !cs.opt.EnableUpgrade:
		cs.refuseUpgrade(u.ID, u.Peer, UpgradeDisabled, "OP_upgradeConfig is disabled on this controller (no admin is configured: start it with --admin-cn)")
		return
	case cs.upgrade != nil:
		cs.refuseUpgrade(u.ID, u.Peer, UpgradeBusy, "an upgrade is already in progress; the primary restarts when it is done")
		return
	case len(u.Bytes) > MaxConfigSize:
		cs.refuseUpgrade(u.ID, u.Peer, UpgradeInvalid, "Config blob exceeds CONF_MAX_SIZE")
		return
	case len(u.Bytes) == 0 || len(u.SHA256) != 32:
		cs.refuseUpgrade(u.ID, u.Peer, UpgradeInvalid, "Invalid request: bytes or sha256 field missing")
		return
	}
	if sum := sha256.Sum256(u.Bytes); !bytes.Equal(sum[:], u.SHA256) {
		cs.refuseUpgrade(u.ID, u.Peer, UpgradeInvalid, "SHA-256 mismatch — blob corrupted in transit")
		return
	}
	c, err := schema.DecodeClusterConfig(u.Bytes)
	if err != nil {
		cs.refuseUpgrade(u.ID, u.Peer, UpgradeInvalid, "Failed to decode ClusterConfig blob")
		return
	}
	if err := schema.Validate(c); err != nil {
		cs.refuseUpgrade(u.ID, u.Peer, UpgradeInvalid, err.Error())
		return
	}
	c.ConfigGeneration = cs.cfg.gen + 1 // the primary is the sole authority (§4.4)
	blob, err := schema.Encode(c)
	if err != nil || len(blob) > MaxConfigSize {
		cs.refuseUpgrade(u.ID, u.Peer, UpgradeInvalid, "Failed to re-encode config")
		return
	}
	up := &upgradeState{id: u.ID, peer: u.Peer, restart: u.Restart}
	cs.upgrade = up
	cs.saveConfig(blob, saveFor{kind: savedUpgrade, up: up})
}

func (cs *configState) refuseUpgrade(id uint64, peer string, o UpgradeOutcome, msg string) {
	cs.log(Warn, "upgrade.refused", fmt.Sprintf("OP_upgradeConfig from %s refused: %s", peer, msg))
	cs.emit(UpgradeReply{ID: id, Outcome: o, Error: msg, Primary: cs.el.primary})
}

// upgradeSaved: the upgrade's new config is saved (then pushed), or not.
func (cs *configState) upgradeSaved(up *upgradeState, ok bool) {
	if !ok {
		cs.upgrade = nil
		cs.refuseUpgrade(up.id, up.peer, UpgradeSaveFailed, "Failed to save new config")
		return
	}
	up.tag = cs.cfg.tag
	cs.log(Info, "upgrade.saved", fmt.Sprintf("config generation %d saved as %s (tag=%016x)", cs.cfg.gen, cs.cfg.name, cs.cfg.tag))
	cs.pushConfig(up)
}

// pushConfig sends the new config to every joined standby in parallel and
// waits one CONF_PUSH_TIMEOUT for their ACKs (seed 002 §6.3).
func (cs *configState) pushConfig(up *upgradeState) {
	up.pushID = cs.ops.id()
	up.waiting = map[int]bool{}
	var peers []int
	for p := range cs.joined.standbys {
		peers = append(peers, p)
	}
	sort.Ints(peers)
	for _, p := range peers {
		up.waiting[p] = true
		cs.el.send(p, Msg{Type: MsgReplConfigPush, ReqID: up.pushID, ConfigTag: cs.cfg.tag, SHA256: cs.cfg.sum[:], Bytes: cs.cfg.bytes})
	}
	if len(peers) == 0 {
		cs.finishPush(up)
		return
	}
	cs.setTimer(TimerPush, ConfPushTimeout)
}

// onPushReply counts a standby's ACK of the upgrade push.
func (cs *configState) onPushReply(from int, m Msg) {
	if cs.role != RolePrimary {
		return
	}
	cs.log(Info, "conf.push-acked", fmt.Sprintf("standby %s accepted=%v tag=%016x", cs.peerName(from), m.Accepted, m.ConfigTag))
	up := cs.upgrade
	if up == nil || up.replied || m.ReqID != up.pushID || !up.waiting[from] {
		return
	}
	delete(up.waiting, from)
	if m.Accepted && m.ConfigTag == up.tag {
		up.acked++
		up.accepted = append(up.accepted, from)
		sort.Ints(up.accepted)
	}
	if len(up.waiting) == 0 {
		cs.cancelTimer(TimerPush)
		cs.finishPush(up)
	}
}

// finishPush ACKs the admin, then restarts once no checkpoint is running.
func (cs *configState) finishPush(up *upgradeState) {
	if up.replied {
		return
	}
	up.replied = true
	cs.emit(UpgradeReply{ID: up.id, VersionTag: up.tag, AckedCount: up.acked, Primary: cs.el.primary})
	if up.acked == 0 && len(cs.joined.standbys) > 0 {
		cs.log(Warn, "upgrade.unpushed", "no standby confirmed the new config: if this primary does not come back, a standby promotes with the old one")
	}
	up.waitFrom = cs.now.Mono
	if to := cs.handoverTarget(up); to >= 0 {
		cs.log(Info, "upgrade.switchover", fmt.Sprintf("Config upgraded to tag=%016x by CN=%s — handing over to %s, then restarting (pushed to %d standbys)", up.tag, up.peer, cs.peerName(to), up.acked))
		cs.sw.begin(&handover{id: up.id, peer: up.peer, to: to, upgrade: true})
		return
	}
	cs.log(Info, "upgrade.restart", fmt.Sprintf("Config upgraded to tag=%016x by CN=%s — requesting restart (pushed to %d standbys)", up.tag, up.peer, up.acked))
	cs.restartWhenIdle()
}

// handoverTarget is the standby an upgrade hands over to before the
// restart: in quorum mode, unless the admin asked for a plain restart,
// the live standby with the most of the log among those that saved the
// new config (-1: none, restart as the seed does). It need not be in
// sync now: a standby that sees the new tag in our heartbeats before the
// push fetches the config and resyncs, and the handover waits for its
// sync as it waits for any target to catch up (HandoverTimeout).
func (cs *configState) handoverTarget(up *upgradeState) int {
	j := cs.journal.jobs
	if up.restart || !cs.quorumMode() || cs.sw.cur != nil || j == nil || len(up.accepted) == 0 {
		return -1 // nobody saved it, or no job state yet (an upgrade during recovery): nobody to hand over to
	}
	prog := j.prog
	now, timeout := int64(cs.now.Mono), int64(cs.opt.FailureTimeout)
	var live []int
	for _, p := range up.accepted {
		if pr := prog[p]; pr != nil && pr.Live(now, timeout) {
			live = append(live, p)
		}
	}
	return cs.sw.mostAcked(live)
}

// handedOver: the handover an upgrade began ended. A primary that kept
// its role restarts as the seed does (after a running checkpoint); any
// other role restarts at once, as a standby's restart stops no writes.
func (cs *configState) handedOver() {
	if cs.role == RolePrimary && cs.upgrade != nil {
		cs.restartWhenIdle()
		return
	}
	cs.log(Info, "upgrade.exit", "restarting to apply the new config")
	cs.emit(Exit{Code: 0, Reason: "config upgraded; restart to apply it"})
	cs.el.setRole(RoleStopped)
}

// restartWhenIdle exits 0 unless a checkpoint is being written (§6.7):
// then it waits for it, at most ckptWaitMax.
func (cs *configState) restartWhenIdle() {
	up := cs.upgrade
	if cs.journal.jobs.checkpointing() && cs.now.Mono-up.waitFrom < ckptWaitMax {
		cs.setTimer(TimerPush, 10*time.Millisecond)
		return
	}
	if cs.journal.jobs.checkpointing() {
		cs.log(Error, "upgrade.checkpoint-timeout", "Checkpoint did not complete within 30s — restarting anyway")
	}
	cs.log(Info, "upgrade.exit", "restarting to apply the new config")
	cs.emit(Exit{Code: 0, Reason: "config upgraded; restart to apply it"})
	cs.el.setRole(RoleStopped)
}

// onPushTimer: the push window closed, or the checkpoint wait ticks.
func (cs *configState) onPushTimer() {
	up := cs.upgrade
	if up == nil {
		return
	}
	if !up.replied {
		cs.finishPush(up)
		return
	}
	cs.restartWhenIdle()
}

// abandonUpgrade: the primary lost its role before finishing the upgrade.
// The config may already be saved (and will be replaced by the new
// primary's on the next fetch): the admin hears "outcome unknown" and the
// node does not restart.
func (cs *configState) abandonUpgrade() {
	up := cs.upgrade
	if up == nil {
		return
	}
	cs.upgrade = nil
	cs.cancelTimer(TimerPush)
	if !up.replied {
		cs.emit(UpgradeReply{ID: up.id, Outcome: UpgradeUnknown, Error: "stepped down during the upgrade: outcome unknown — check the primary's config tag", Primary: cs.el.primary})
	}
}
