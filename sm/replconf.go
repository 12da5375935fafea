package sm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// Status codes carried in replies (errno-style, negative as in the seed).
const (
	StatusOK       int32 = 0
	StatusEIO      int32 = -5
	StatusEAGAIN   int32 = -11
	StatusEEXIST   int32 = -17 // an idempotency key reused for a different submit
	StatusEINVAL   int32 = -22
	StatusNoConfig int32 = -61 // ENODATA
	// StatusOutcomeUnknown: the request may or may not have been applied
	// (the node lost its role, or the executor gave up waiting): check
	// before retrying. EAGAIN, by contrast, means nothing was applied.
	StatusOutcomeUnknown int32 = -125 // ECANCELED
)

// fetchState is the standby's config pull (seed 002 §5.5): Join, then
// OP_replConfig, each attempt bounded by the backoff delay.
type fetchState struct {
	attempt int
	reqID   uint64
	saving  bool
	sentAt  int64 // Mono when the current attempt was sent
}

func (cs *configState) startFetch() {
	cs.fetch = &fetchState{}
	cs.log(Info, "conf.fetch-request", fmt.Sprintf("HA: requesting cluster config from primary %s (my_tag=%016x)", cs.peerName(cs.el.primary), cs.runningTag()))
	cs.tryFetch()
}

func (cs *configState) stopFetch(why string) {
	if cs.fetch == nil {
		return
	}
	if why != "" {
		cs.log(Info, "conf.fetch-stopped", "config fetch stopped: "+why)
	}
	cs.fetch = nil
	cs.cancelTimer(TimerFetch)
}

func (cs *configState) tryFetch() {
	f := cs.fetch
	f.reqID = cs.ops.id()
	// A join also starts a log sync, which supersedes the one we follow:
	// kept, it would wait forever for records the primary now sends in
	// the new sync if that sync's first message were lost (L5, seed 933).
	cs.sb.setSync(nil)
	cs.sb.syncAsked = int64(cs.now.Mono)
	cs.el.send(cs.el.primary, cs.sb.joinMsg(f.reqID))
	f.sentAt = int64(cs.now.Mono)
	cs.setTimer(TimerFetch, cs.opt.FetchDelay(f.attempt))
}

// onFetchTimeout: the attempt got no usable answer in time.
func (cs *configState) onFetchTimeout() {
	f := cs.fetch
	if f == nil || cs.role != RoleStandby || f.saving {
		return
	}
	f.attempt++
	if f.attempt < cs.opt.FetchMaxAttempts {
		cs.tryFetch()
		return
	}
	cs.fetch = nil
	if cs.cfg != nil {
		cs.log(Warn, "conf.fetch-gave-up-saved", fmt.Sprintf("Standby (priority %d) could not reach primary for config fetch — using saved config (tag=%016x). Config may be stale.", cs.opt.Self, cs.cfg.tag))
		cs.serving = true
		return
	}
	cs.node.die("fatal.standby-no-config", fmt.Sprintf("Standby (priority %d) could not fetch config from primary and has no saved config — start the primary controller first, or provision the config file manually at '%s'", cs.opt.Self, cs.path(PointerPath)))
}

// checkPrimaryTag re-pulls when the primary's heartbeat shows a different
// config tag (seed §10.8 "tag check on every reconnect", made continuous).
func (cs *configState) checkPrimaryTag(tag uint64) {
	if cs.fetch != nil || tag == 0 || tag == cs.runningTag() {
		return
	}
	cs.startFetch()
}

func (jp *joinedPeers) onJoin(from int, m Msg) {
	if jp.role != RolePrimary {
		jp.el.send(from, Msg{Type: MsgJoinReply, ReqID: m.ReqID, Status: StatusEAGAIN, Error: "Not primary — redirect to primary"})
		return
	}
	if !jp.standbys[from] {
		jp.standbys[from] = true
		jp.log(Info, "ha.standby-joined", fmt.Sprintf("controller %s joined as standby", jp.peerName(from)))
	}
	jp.el.send(from, Msg{Type: MsgJoinReply, ReqID: m.ReqID})
	jp.noteJoin(from, m)
	jp.startSync(from)
}

func (cs *configState) onJoinReply(from int, m Msg) {
	f := cs.fetch
	if f == nil || cs.role != RoleStandby || from != cs.el.primary || m.ReqID != f.reqID || f.saving {
		return
	}
	if m.Status != StatusOK {
		cs.log(Warn, "conf.join-refused", fmt.Sprintf("join refused by %s: %s (status %d)", cs.peerName(from), m.Error, m.Status))
		return // the attempt times out and retries
	}
	cs.el.send(from, Msg{Type: MsgReplConfig, ReqID: f.reqID, ConfigTag: cs.runningTag()})
}

// onReplConfig is the primary handler (seed 002 §5.4): up-to-date if the
// tags match, else re-read the file and double-check its hash.
func (cs *configState) onReplConfig(from int, m Msg) {
	if cs.role != RolePrimary || cs.cfg == nil {
		cs.el.send(from, Msg{Type: MsgReplConfigReply, ReqID: m.ReqID, Status: StatusEAGAIN, Error: "Not primary — redirect to primary"})
		return
	}
	if m.ConfigTag == cs.cfg.tag {
		cs.el.send(from, Msg{Type: MsgReplConfigReply, ReqID: m.ReqID, UpToDate: true})
		return
	}
	cs.io(FileOp{Op: OpRead, Path: ConfDir + "/" + cs.cfg.name, MaxSize: MaxConfigSize}, serveConfig{cfg: cs.cfg, to: from, reqID: m.ReqID})
}

// serveConfig resumes when the primary has read its config file again to
// serve a standby's fetch: it sends the bytes only if they still hash to
// what it runs with.
type serveConfig struct {
	cfg   *loaded
	to    int
	reqID uint64
}

func (s serveConfig) String() string {
	return fmt.Sprintf("config: serve %s to peer %d (request %d)", s.cfg.name, s.to, s.reqID)
}

func (s serveConfig) resume(n *Node, r result) {
	cfg, from, d := s.cfg, s.to, r.IODone
	// A failed read is said whatever happened meanwhile (an error is
	// never swallowed, S7: seed 5083, where the primary stepped down
	// while the read was in flight); only a primary still running cfg
	// answers and repairs its copy, and otherwise the standby retries.
	serving := n.role == RolePrimary && n.conf.cfg == cfg
	refusal := ""
	switch {
	case d.Err != IOOK:
		n.log(Error, "conf.serve-read", fmt.Sprintf("cannot re-read '%s' for %s: %s %s", ConfDir+"/"+cfg.name, n.peerName(from), d.Err, d.Detail))
		refusal = "cannot read config"
	case serving && sha256.Sum256(d.Data) != cfg.sum:
		n.log(Error, "conf.serve-mismatch", "Config file changed since startup — refusing to send stale hash")
		refusal = "config file changed since startup"
	}
	if !serving {
		return
	}
	if refusal != "" {
		n.el.send(from, Msg{Type: MsgReplConfigReply, ReqID: s.reqID, Status: StatusEIO, Error: refusal})
		n.conf.repair()
		return
	}
	n.el.send(from, Msg{Type: MsgReplConfigReply, ReqID: s.reqID, ConfigTag: cfg.tag, SHA256: cfg.sum[:], Bytes: d.Data})
}

// repair rewrites the verified in-memory config over a file that no longer
// matches it, so standbys can be served again (our choice: the seed only
// refuses; an operator expects the primary to heal its own copy).
func (cs *configState) repair() {
	if cs.repairing || cs.cfg == nil {
		return
	}
	cs.repairing = true
	cfg := cs.cfg
	cs.log(Warn, "conf.repair", fmt.Sprintf("rewriting %s from the verified in-memory copy", cfg.name))
	cs.saveConfig(cfg.bytes, saveFor{kind: savedRepair})
}

// checkReceived validates a config carried by a reply or push: zero tag
// is §10.5 (FATAL, reported by the caller), hash and tag must match.
func checkReceived(m Msg) (sum [32]byte, problem string) {
	sum = sha256.Sum256(m.Bytes)
	if len(m.SHA256) != 32 || !bytes.Equal(sum[:], m.SHA256) {
		return sum, fmt.Sprintf("expected %s, got %s", hex.EncodeToString(m.SHA256), hex.EncodeToString(sum[:]))
	}
	if Tag(sum) != m.ConfigTag {
		return sum, fmt.Sprintf("tag %016x does not match SHA-256 %s", m.ConfigTag, hex.EncodeToString(sum[:8]))
	}
	return sum, ""
}

func (cs *configState) onReplConfigReply(from int, m Msg) {
	f := cs.fetch
	if f == nil || cs.role != RoleStandby || from != cs.el.primary || m.ReqID != f.reqID || f.saving {
		return
	}
	if m.Status != StatusOK {
		cs.log(Error, "conf.fetch-error", fmt.Sprintf("config fetch from %s failed: %s (status %d). Retrying (%d/%d)", cs.peerName(from), m.Error, m.Status, f.attempt+1, cs.opt.FetchMaxAttempts))
		return
	}
	if m.UpToDate {
		if cs.cfg == nil {
			// The primary thinks we match but we hold nothing: only possible
			// if it has no config. Count it as a failed attempt.
			cs.log(Error, "conf.fetch-error", "primary answered up_to_date to tag 0")
			return
		}
		cs.fetch = nil
		cs.cancelTimer(TimerFetch)
		cs.stale = false
		if !cs.serving {
			cs.serving = true
			cs.log(Info, "conf.up-to-date", fmt.Sprintf("HA: saved config tag=%016x matches primary — proceeding with full init", cs.cfg.tag))
		}
		return
	}
	if m.ConfigTag == 0 {
		cs.node.die("fatal.zero-tag", fmt.Sprintf("BUG: primary sent zero version_tag for config. Primary conffile may be empty or corrupted: '%s'", cs.peerName(from)))
		return
	}
	sum, problem := checkReceived(m)
	if problem != "" {
		cs.log(Error, "conf.fetch-mismatch", fmt.Sprintf("Config fetch SHA-256 mismatch from primary — %s. Retrying (%d/%d)", problem, f.attempt+1, cs.opt.FetchMaxAttempts))
		return
	}
	if _, bad := verifyBlob(VersionName(sum), m.Bytes, 0); bad != "" {
		cs.log(Error, "conf.fetch-invalid", fmt.Sprintf("config from primary is invalid: %s. Retrying (%d/%d)", bad, f.attempt+1, cs.opt.FetchMaxAttempts))
		return
	}
	if cs.cfg != nil {
		cs.log(Warn, "conf.saved-differs", fmt.Sprintf("Standby saved config tag=%016x differs from primary tag=%016x — saved config may be stale, updating from primary", cs.cfg.tag, m.ConfigTag))
	}
	f.saving = true
	cs.cancelTimer(TimerFetch)
	cs.saveConfig(m.Bytes, saveFor{kind: savedFetch, f: f, tag: m.ConfigTag})
}

// fetchSaved: the config fetched from the primary (tag) is saved, or not.
func (cs *configState) fetchSaved(f *fetchState, tag uint64, ok bool) {
	if cs.fetch != f {
		return // superseded (new primary) while saving
	}
	f.saving = false
	if !ok {
		// The attempt failed, but the next one waits for its own time, as
		// after a timeout: a quick failure must not shorten the window
		// in which the primary may come back (L3, seed 6460).
		if left := cs.opt.FetchDelay(f.attempt) - time.Duration(int64(cs.now.Mono)-f.sentAt); left > 0 {
			cs.setTimer(TimerFetch, left)
			return
		}
		cs.onFetchTimeout() // count the attempt and retry
		return
	}
	cs.fetch = nil
	cs.stale = false
	cs.serving = true
	cs.log(Info, "conf.received", fmt.Sprintf("HA: config received and saved (tag=%016x) — proceeding with full init", tag))
}

// onPush is the standby side of OP_replConfigPush (seed 002 §5.2).
func (cs *configState) onPush(from int, m Msg) {
	reply := Msg{Type: MsgReplConfigPushReply, ReqID: m.ReqID, ConfigTag: cs.runningTag()}
	if cs.role != RoleStandby || from != cs.el.primary {
		cs.el.send(from, reply)
		return
	}
	sum, problem := checkReceived(m)
	if problem == "" && m.ConfigTag == 0 {
		problem = "zero version_tag"
	}
	if problem == "" {
		_, problem = verifyBlob(VersionName(sum), m.Bytes, 0)
	}
	if problem != "" {
		cs.log(Error, "conf.push-invalid", "rejecting config push: "+problem)
		cs.el.send(from, reply)
		return
	}
	cs.saveConfig(m.Bytes, saveFor{kind: savedPush, from: from, reqID: m.ReqID})
}

// pushSaved answers the primary's push once its config is saved (or not).
func (cs *configState) pushSaved(from int, reqID uint64, ok bool) {
	r := Msg{Type: MsgReplConfigPushReply, ReqID: reqID, Accepted: ok, ConfigTag: cs.runningTag()}
	if cs.role == RoleStandby && cs.el.primary == from {
		cs.el.send(from, r)
	}
}
