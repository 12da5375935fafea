package sm

import (
	"crypto/sha256"
	"fmt"
)

// storeQueue serialises config-store jobs (save + trim): a trim never runs
// while another save could rename a file it decided to delete. Temp names
// stay unique per operation as seed 002 §10.11 requires.
type storeQueue struct {
	busy bool
	jobs []storeJob
}

// storeJob is one job of the config store, waiting or running.
type storeJob struct {
	kind storeJobKind
	blob []byte  // jobSave: the config to save
	why  saveFor // jobSave: who asked, told the outcome
}

type storeJobKind uint8

const (
	jobSave      storeJobKind = iota // save a config (saveConfig)
	jobInstalled                     // an install's save and trim are done: exit
)

// saveFor is who asked for a save and is told whether it is durable
// (saved).
type saveFor struct {
	kind  saveForKind
	up    *upgradeState // savedUpgrade
	f     *fetchState   // savedFetch
	from  int           // savedPush: the primary that pushed
	reqID uint64        // savedPush: its request
	tag   uint64        // savedFetch: the tag received
}

type saveForKind uint8

const (
	savedInstall saveForKind = iota // xce-config install
	savedUpgrade                    // OP_upgradeConfig on the primary
	savedRepair                     // the primary rewrites its own copy
	savedFetch                      // a standby's fetch from its primary
	savedPush                       // a standby's copy of an upgrade push
)

var saveForNames = [...]string{"install", "upgrade", "repair", "fetch", "push"}

// saved tells the save's requester whether the config is durable.
func (cs *configState) saved(w saveFor, ok bool) {
	switch w.kind {
	case savedInstall:
		cs.installSaved(ok)
	case savedUpgrade:
		cs.upgradeSaved(w.up, ok)
	case savedRepair:
		cs.repairing = false
	case savedFetch:
		cs.fetchSaved(w.f, w.tag, ok)
	case savedPush:
		cs.pushSaved(w.from, w.reqID, ok)
	}
}

func (cs *configState) enqueueStore(job storeJob) {
	if cs.store.busy {
		cs.store.jobs = append(cs.store.jobs, job)
		return
	}
	cs.store.busy = true
	cs.runStoreJob(job)
}

func (cs *configState) storeDone() {
	if len(cs.store.jobs) == 0 {
		cs.store.busy = false
		return
	}
	job := cs.store.jobs[0]
	cs.store.jobs = cs.store.jobs[1:]
	cs.runStoreJob(job)
}

func (cs *configState) runStoreJob(job storeJob) {
	switch job.kind {
	case jobSave:
		cs.startSave(job.blob, job.why)
	case jobInstalled:
		cs.configInstalled()
	}
}

// storeStep is what resumes in the config store: a save's two durable
// replacements, the cleanup of a failed one, the trim's steps.
type storeStep struct {
	kind storeKind
	save *saving // storeVersioned, storePointer
	path string  // storeCleanup: the temporary file removed
	name string  // trimList: the pointer's target
}

type storeKind uint8

const (
	storeVersioned storeKind = iota // the versioned file is durable (or failed)
	storePointer                    // the pointer is durable (or failed)
	storeCleanup                    // a failed save's temporary file removed
	trimPointer                     // the trim read conf/current
	trimList                        // the trim listed conf/
	trimDone                        // the trim removed what it planned
)

var storeKindNames = [...]string{"versioned file durable", "pointer durable", "cleanup removed", "trim: pointer read", "trim: conf/ listed", "trim: done"}

// saving is one save in progress.
type saving struct {
	blob        []byte
	sum         [32]byte
	name        string
	tmp, ptrTmp string
	why         saveFor
}

func (s storeStep) String() string {
	out := "store: " + storeKindNames[s.kind]
	if s.save != nil {
		out += fmt.Sprintf(" %s for %s", s.save.name, saveForNames[s.save.why.kind])
	}
	for _, x := range []string{s.path, s.name} {
		if x != "" {
			out += " " + x
		}
	}
	return out
}

func (s storeStep) resume(n *Node, r result) {
	switch s.kind {
	case storeVersioned:
		if r.failed != "" {
			n.conf.saveFailed(s.save, s.save.tmp, r)
			return
		}
		n.replaceDurably(s.save.ptrTmp, PointerPath, ConfDir, PointerContents(s.save.name), storeStep{kind: storePointer, save: s.save})
	case storePointer:
		if r.failed != "" {
			n.conf.saveFailed(s.save, s.save.ptrTmp, r)
			return
		}
		n.conf.adopt(s.save.blob, s.save.sum)
		n.conf.saved(s.save.why, true)
		n.conf.trim()
	case storeCleanup:
		if r.Err != IOOK && r.Err != IONotExist {
			n.log(Warn, "conf.cleanup-failed", fmt.Sprintf("cannot remove %s: %s %s", s.path, r.Err, r.Detail))
		}
	case trimPointer:
		n.conf.onTrimPointer(r.IODone)
	case trimList:
		n.conf.onTrimList(s.name, r.IODone)
	case trimDone:
		n.log(Debug, "conf.trimmed", "trim pass done")
		n.conf.storeDone()
	}
}

// saveConfig runs the seed 002 §3.2 write procedure as separate effects,
// with a directory fsync after each rename: versioned tmp write, fsync,
// rename, fsync conf/; pointer tmp write, fsync, rename, fsync conf/. Only
// then is the config adopted and why told it is saved; the trim follows.
func (cs *configState) saveConfig(blob []byte, why saveFor) {
	cs.enqueueStore(storeJob{kind: jobSave, blob: blob, why: why})
}

func (cs *configState) startSave(blob []byte, why saveFor) {
	if cs.role == RoleStopped {
		return
	}
	op := cs.ops.id()
	sum := sha256.Sum256(blob)
	name := VersionName(sum)
	sv := &saving{blob: blob, sum: sum, name: name, tmp: ConfDir + "/" + versionTmpName(sum, op), ptrTmp: ConfDir + "/" + pointerTmpName(op), why: why}
	cs.replaceDurably(sv.tmp, ConfDir+"/"+name, ConfDir, blob, storeStep{kind: storeVersioned, save: sv})
}

// saveFailed: a write or rename of a save failed; the temporary file it
// left is removed (best effort; the trim cleans leftovers).
func (cs *configState) saveFailed(sv *saving, cleanup string, r result) {
	cs.log(Error, "conf.save-failed", fmt.Sprintf("%s failed: %s %s — config not saved", r.failed, r.Err, r.Detail))
	cs.io(FileOp{Op: OpRemove, Path: cleanup}, storeStep{kind: storeCleanup, path: cleanup})
	cs.storeDone()
	cs.saved(sv.why, false)
}

// adopt makes a durably saved config the running one.
func (cs *configState) adopt(blob []byte, sum [32]byte) {
	gen, _ := decodeGeneration(blob) // validated before saving
	cs.cfg = &loaded{bytes: blob, sum: sum, tag: Tag(sum), name: VersionName(sum), gen: gen, modTime: cs.now.Wall}
	cs.cfgProblem = ""
	cs.savedTags = append(cs.savedTags, cs.cfg.tag)
	cs.log(Info, "conf.saved", fmt.Sprintf("saved config %s (tag=%016x); conf/current updated", cs.cfg.name, cs.cfg.tag))
}

// trim is conf_trim_old_versions (seed 002 §3.3, §10.9): read the pointer
// first, never delete its target, keep keep_n versions, clean stale .tmp.
// It is best effort: failures are logged and left for the next trim.
func (cs *configState) trim() {
	cs.io(FileOp{Op: OpRead, Path: PointerPath, MaxSize: nameMaxBytes + 1}, storeStep{kind: trimPointer})
}

func (cs *configState) onTrimPointer(d IODone) {
	if d.Err != IOOK {
		cs.log(Warn, "conf.trim-skipped", fmt.Sprintf("trim skipped: cannot read conf/current: %s %s", d.Err, d.Detail))
		cs.storeDone()
		return
	}
	target, err := ParsePointer(d.Data)
	if err != nil {
		cs.log(Warn, "conf.trim-skipped", "trim skipped: "+err.Error())
		cs.storeDone()
		return
	}
	cs.io(FileOp{Op: OpList, Path: ConfDir}, storeStep{kind: trimList, name: target})
}

func (cs *configState) onTrimList(target string, d IODone) {
	if d.Err != IOOK {
		cs.log(Warn, "conf.trim-skipped", fmt.Sprintf("trim skipped: cannot list conf/: %s %s", d.Err, d.Detail))
		cs.storeDone()
		return
	}
	names := TrimPlan(d.Entries, target, cs.opt.KeepN, nil)
	paths := make([]string, len(names))
	for i, name := range names {
		paths[i] = ConfDir + "/" + name
	}
	cs.run(removeOps(paths, ConfDir, "conf.trim-remove", "trim: "), storeStep{kind: trimDone})
}
