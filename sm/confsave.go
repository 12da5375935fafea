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
	jobs []func()
}

func (n *Node) enqueueStore(job func()) {
	if n.store.busy {
		n.store.jobs = append(n.store.jobs, job)
		return
	}
	n.store.busy = true
	job()
}

func (n *Node) storeDone() {
	if len(n.store.jobs) == 0 {
		n.store.busy = false
		return
	}
	job := n.store.jobs[0]
	n.store.jobs = n.store.jobs[1:]
	job()
}

// saveConfig runs the seed 002 §3.2 write procedure as separate effects,
// with a directory fsync after each rename: versioned tmp write, fsync,
// rename, fsync conf/; pointer tmp write, fsync, rename, fsync conf/. Only
// then is the config adopted and done(true) called; the trim follows.
func (n *Node) saveConfig(blob []byte, done func(ok bool)) {
	n.enqueueStore(func() {
		if n.role == RoleStopped {
			return
		}
		op := n.id()
		sum := sha256.Sum256(blob)
		name := VersionName(sum)
		tmp := ConfDir + "/" + versionTmpName(sum, op)
		ver := ConfDir + "/" + name
		ptrTmp := ConfDir + "/" + pointerTmpName(op)
		var cleanup string
		fail := func(what string, d IODone) {
			n.log(Error, "conf.save-failed", fmt.Sprintf("%s failed: %s %s — config not saved", what, d.Err, d.Detail))
			n.ioFn(FileOp{Op: OpRemove, Path: cleanup}, func(d IODone) { // best effort; the trim cleans leftovers
				if d.Err != IOOK && d.Err != IONotExist {
					n.log(Warn, "conf.cleanup-failed", fmt.Sprintf("cannot remove %s: %s %s", cleanup, d.Err, d.Detail))
				}
			})
			n.storeDone()
			done(false)
		}
		cleanup = tmp
		n.replaceDurablyFn(tmp, ver, ConfDir, blob, fail, func() {
			cleanup = ptrTmp
			n.replaceDurablyFn(ptrTmp, PointerPath, ConfDir, PointerContents(name), fail, func() {
				n.adopt(blob, sum)
				done(true)
				n.trim()
			})
		})
	})
}

// adopt makes a durably saved config the running one.
func (n *Node) adopt(blob []byte, sum [32]byte) {
	gen, _ := decodeGeneration(blob) // validated before saving
	n.cfg = &loaded{bytes: blob, sum: sum, tag: Tag(sum), name: VersionName(sum), gen: gen, modTime: n.now.Wall}
	n.cfgProblem = ""
	n.savedTags = append(n.savedTags, n.cfg.tag)
	n.log(Info, "conf.saved", fmt.Sprintf("saved config %s (tag=%016x); conf/current updated", n.cfg.name, n.cfg.tag))
}

// trim is conf_trim_old_versions (seed 002 §3.3, §10.9): read the pointer
// first, never delete its target, keep keep_n versions, clean stale .tmp.
// It is best effort: failures are logged and left for the next trim.
func (n *Node) trim() {
	finish := func() { n.storeDone() }
	n.ioFn(FileOp{Op: OpRead, Path: PointerPath, MaxSize: nameMaxBytes + 1}, func(d IODone) {
		if d.Err != IOOK {
			n.log(Warn, "conf.trim-skipped", fmt.Sprintf("trim skipped: cannot read conf/current: %s %s", d.Err, d.Detail))
			finish()
			return
		}
		target, err := ParsePointer(d.Data)
		if err != nil {
			n.log(Warn, "conf.trim-skipped", "trim skipped: "+err.Error())
			finish()
			return
		}
		n.ioFn(FileOp{Op: OpList, Path: ConfDir}, func(d IODone) {
			if d.Err != IOOK {
				n.log(Warn, "conf.trim-skipped", fmt.Sprintf("trim skipped: cannot list conf/: %s %s", d.Err, d.Detail))
				finish()
				return
			}
			n.removeAll(TrimPlan(d.Entries, target, n.opt.KeepN, nil), func() {
				n.log(Debug, "conf.trimmed", "trim pass done")
				finish()
			})
		})
	})
}

func (n *Node) removeAll(names []string, then func()) {
	paths := make([]string, len(names))
	for i, name := range names {
		paths[i] = ConfDir + "/" + name
	}
	n.run(removeOps(paths, ConfDir, "conf.trim-remove", "trim: "), fn(func(result) { then() }))
}
