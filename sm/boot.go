package sm

import (
	"errors"
	"fmt"
	"time"
)

// Paths of the node's durable HA state.
const (
	DataDir     = "data"
	TermPath    = "data/term"
	termTmpPath = "data/term.tmp"
	maxTermFile = 64
)

// boot is Phase 1: make the directories durable, read the durable term and
// the saved config, then run the election (seed 002 §7; DESIGN §4.1).
func (n *Node) boot(b Boot) {
	n.rng = b.Seed
	if n.rng == 0 {
		n.rng = 0x9E3779B97F4A7C15 // xorshift64 must not start at zero
	}
	n.role = RoleBooting
	if b.Install != nil {
		n.mkdirs([]string{ConfDir}, func() { n.install(b.Install) })
		return
	}
	n.mkdirs([]string{ConfDir, DataDir}, func() {
		n.ioFn(FileOp{Op: OpRead, Path: TermPath, MaxSize: maxTermFile}, n.onTermRead)
	})
}

// ErrBadTermFile reports an unreadable data/term.
var ErrBadTermFile = errors.New("corrupt term file")

// ParseTerm parses data/term and returns its term (ParseTermVote also
// returns the vote).
func ParseTerm(b []byte) (uint64, error) {
	t, _, err := ParseTermVote(b)
	return t, err
}

func (n *Node) onTermRead(d IODone) {
	switch d.Err {
	case IOOK:
		t, v, err := ParseTermVote(d.Data)
		if err != nil {
			n.die("fatal.term", err.Error())
			return
		}
		// What we act on must be durable even if an earlier process died
		// after a failed fsync left it only in the page cache: until the
		// fsyncs below complete, messages revealing it are held.
		n.term, n.vote = t, v
		n.ioFn(FileOp{Op: OpFsync, Path: TermPath}, func(IODone) {
			n.ioFn(FileOp{Op: OpFsyncDir, Path: DataDir}, func(IODone) {
				if !n.haWriting && n.durTerm < t {
					n.durTerm, n.durVote = t, v
					if !n.haDirty() {
						n.releaseHeld()
					}
				}
				n.loadSaved(func() { n.scanBootLog(n.afterBootScan) })
			})
		})
		return
	case IONotExist:
		n.term = 0
	default:
		n.die("fatal.term", fmt.Sprintf("cannot read '%s': %s %s", TermPath, d.Err, d.Detail))
		return
	}
	n.loadSaved(func() { n.scanBootLog(n.afterBootScan) })
}

// afterBootScan: a log holding records of a term above data/term (a
// standby appended them and died before its term write) raises the term.
func (n *Node) afterBootScan(pos logPos, clean bool) {
	n.logPos, n.logClean = pos, clean
	n.observeTerm(n.logPos.term)
	n.startElection(false)
}

// loadSaved resolves conf/current -> versioned file and verifies it. A
// problem leaves cfg nil and records why in cfgProblem; whether that is
// FATAL depends on the role the election gives (seed 002 §10).
func (n *Node) loadSaved(then func()) {
	n.ioFn(FileOp{Op: OpRead, Path: PointerPath, MaxSize: PointerReadLimit}, func(d IODone) {
		name, problem, key, level := ResolvePointer(d)
		// §10.6a: an empty pointer is a missing config; anything else wrong
		// is a config the FATAL says is unusable, and why.
		n.cfgMissing = d.Err == IONotExist || key == "conf.pointer-empty"
		if problem != "" {
			n.cfgProblem = problem
			if key != "" {
				n.log(level, key, problem)
			}
			then()
			return
		}
		path := ConfDir + "/" + name
		n.ioFn(FileOp{Op: OpRead, Path: path, MaxSize: MaxConfigSize}, func(d IODone) {
			c, problem, key := verifyVersioned(name, d)
			if c == nil {
				n.cfgProblem = problem
				n.log(Error, key, problem)
				then()
				return
			}
			// Make what we loaded durable before acting on it (see onTermRead).
			n.ioFn(FileOp{Op: OpFsync, Path: path}, func(IODone) {
				n.ioFn(FileOp{Op: OpFsync, Path: PointerPath}, func(IODone) {
					n.ioFn(FileOp{Op: OpFsyncDir, Path: ConfDir}, func(IODone) {
						n.adoptLoaded(c, then)
					})
				})
			})
		})
	})
}

// PointerReadLimit is how much of conf/current the daemon reads: a
// longer file is refused (seed 002 §3.2: one NAME_MAX line).
const PointerReadLimit = nameMaxBytes + 1

// ResolvePointer is the daemon's reading of conf/current, from the result
// of reading it with MaxSize PointerReadLimit: the versioned file's name,
// or the problem with the log key and level the daemon reports it at
// ("" key: a missing pointer, reported later by the §10 FATALs). The one
// check xce-config verify and show run too.
func ResolvePointer(d IODone) (name, problem, key string, level Level) {
	switch d.Err {
	case IOOK:
	case IONotExist:
		return "", "conf/current does not exist", "", Info
	case IOTooBig:
		return "", fmt.Sprintf("conf/current is longer than %d bytes — not a pointer file (one line naming the versioned config file)", PointerReadLimit-1), "conf.pointer-invalid", Error
	default:
		return "", fmt.Sprintf("cannot read conf/current: %s %s", d.Err, d.Detail), "conf.pointer-unreadable", Error
	}
	name, err := ParsePointer(d.Data)
	if errors.Is(err, ErrPointerEmpty) {
		return "", "Config pointer file 'conf/current' exists but is empty — treating as missing config. This can occur if the controller crashed during a config write.", "conf.pointer-empty", Warn
	}
	if err != nil {
		return "", err.Error(), "conf.pointer-invalid", Error
	}
	return name, "", "", Info
}

// VerifyVersioned is the daemon's check of the versioned file conf/name,
// from the result of reading it with MaxSize MaxConfigSize: "" if it
// loads, else the problem (xce-config verify and show run it too).
func VerifyVersioned(name string, d IODone) string {
	_, problem, _ := verifyVersioned(name, d)
	return problem
}

func verifyVersioned(name string, d IODone) (*loaded, string, string) {
	path := ConfDir + "/" + name
	switch d.Err {
	case IOOK:
	case IOTooBig:
		return nil, fmt.Sprintf("Config file '%s' exceeds CONF_MAX_SIZE (%d bytes)", path, MaxConfigSize), "conf.too-big"
	default:
		return nil, fmt.Sprintf("conf/current names '%s' which is not readable: %s %s", path, d.Err, d.Detail), "conf.target-unreadable"
	}
	c, problem := verifyBlob(name, d.Data, d.ModTime)
	if c == nil {
		return nil, problem, "conf.invalid"
	}
	return c, "", ""
}

// adoptLoaded makes a verified saved config the running one and computes
// config_stale from its mtime (seed 002 §10.3).
func (n *Node) adoptLoaded(c *loaded, then func()) {
	n.cfg = c
	n.stale = n.opt.StaleTimeout > 0 && time.Duration(n.now.Wall-c.modTime) > n.opt.StaleTimeout
	if n.stale {
		n.log(Warn, "conf.stale", fmt.Sprintf("saved config %s (tag=%016x) is older than conf_stale_timeout %v — flagged config_stale", c.name, c.tag, n.opt.StaleTimeout))
	}
	n.log(Info, "conf.loaded", fmt.Sprintf("loaded saved config %s (tag=%016x, generation %d)", c.name, c.tag, c.gen))
	then()
}

// install saves blob as the node's config and exits: 0 once it is durable
// and trimmed, 1 if the blob is invalid or the save failed.
func (n *Node) install(blob []byte) {
	if _, problem := verifyBlob("", blob, 0); problem != "" {
		n.die("install.invalid", "refusing to install config: "+problem)
		return
	}
	n.saveConfig(blob, func(ok bool) {
		if !ok {
			n.die("install.failed", "config install failed; conf/current unchanged")
			return
		}
		n.enqueueStore(func() { // runs after the trim that follows the save
			n.log(Info, "install.done", fmt.Sprintf("installed config %s (tag=%016x)", n.cfg.name, n.cfg.tag))
			n.emit(Exit{Code: 0, Reason: "config installed"})
			n.role = RoleStopped
		})
	})
}
