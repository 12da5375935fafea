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
	n.el.setRole(RoleBooting)
	if b.Install != nil {
		n.run(mkdirOps([]string{ConfDir}, ""), bootStep{kind: bootInstall, blob: b.Install})
		return
	}
	n.run(mkdirOps([]string{ConfDir, DataDir}, ""), bootStep{kind: bootReadTerm})
}

// bootStep is what resumes in Phase 1 (boot, and the reads of conf/ that
// an election without a config repeats).
type bootStep struct {
	kind bootKind
	blob []byte  // bootInstall: the config to install
	t    uint64  // bootTermDurable: the term read
	v    int     // ... and the vote
	name string  // loadVersioned, loadDurable: the versioned file
	c    *loaded // loadDurable: the config read and verified
	next bootKind
}

type bootKind uint8

const (
	bootInstall     bootKind = iota // conf/ is made: install the config
	bootReadTerm                    // the directories are made: read data/term
	bootTermRead                    // data/term read
	bootTermDurable                 // the term read is durable: load the config
	loadPointer                     // conf/current read
	loadVersioned                   // the versioned file read
	loadDurable                     // what was read is durable: adopt it
	bootScan                        // the config is loaded: scan the job log (boot)
	bootElect                       // the config is loaded: stand again (election)
)

var bootKindNames = [...]string{"install", "read term", "term read", "term durable", "pointer read", "versioned read", "config durable", "scan the log", "elect"}

func (s bootStep) String() string {
	out := "boot: " + bootKindNames[s.kind]
	if s.name != "" {
		out += " " + s.name
	}
	if s.kind >= loadPointer && s.kind <= loadDurable {
		out += ", then " + bootKindNames[s.next]
	}
	return out
}

func (s bootStep) resume(n *Node, r result) {
	switch s.kind {
	case bootInstall:
		n.conf.install(s.blob)
	case bootReadTerm:
		n.io(FileOp{Op: OpRead, Path: TermPath, MaxSize: maxTermFile}, bootStep{kind: bootTermRead})
	case bootTermRead:
		n.el.onTermRead(r.IODone)
	case bootTermDurable:
		if !n.el.ha.haWriting && n.el.ha.durTerm < s.t {
			n.el.ha.durTerm, n.el.ha.durVote = s.t, s.v
			if !n.el.ha.dirty() {
				n.el.releaseHeld()
			}
		}
		n.conf.loadSaved(bootScan)
	case loadPointer:
		n.conf.onPointerRead(r.IODone, s.next)
	case loadVersioned:
		n.conf.onVersionedRead(s.name, r.IODone, s.next)
	case loadDurable:
		n.conf.adoptLoaded(s.c)
		n.el.afterLoad(s.next)
	}
}

// afterLoad goes on once loadSaved is done, as next says.
func (el *election) afterLoad(next bootKind) {
	if next == bootElect {
		el.startElection(el.failover)
		return
	}
	el.disk.scanBootLog()
}

// ErrBadTermFile reports an unreadable data/term.
var ErrBadTermFile = errors.New("corrupt term file")

// ParseTerm parses data/term and returns its term (ParseTermVote also
// returns the vote).
func ParseTerm(b []byte) (uint64, error) {
	t, _, err := ParseTermVote(b)
	return t, err
}

func (el *election) onTermRead(d IODone) {
	switch d.Err {
	case IOOK:
		t, v, err := ParseTermVote(d.Data)
		if err != nil {
			el.node.die("fatal.term", err.Error())
			return
		}
		// What we act on must be durable even if an earlier process died
		// after a failed fsync left it only in the page cache: until the
		// fsyncs below complete, messages revealing it are held.
		el.ha.term, el.ha.vote = t, v
		el.run([]seqOp{{op: FileOp{Op: OpFsync, Path: TermPath}}, {op: FileOp{Op: OpFsyncDir, Path: DataDir}}}, bootStep{kind: bootTermDurable, t: t, v: v})
		return
	case IONotExist:
		el.ha.term = 0
	default:
		el.node.die("fatal.term", fmt.Sprintf("cannot read '%s': %s %s", TermPath, d.Err, d.Detail))
		return
	}
	el.conf.loadSaved(bootScan)
}

// afterBootScan: a log holding records of a term above data/term (a
// standby appended them and died before its term write) raises the term.
func (el *election) afterBootScan(pos logPos, clean bool) {
	el.disk.logPos, el.disk.logClean = pos, clean
	el.observeTerm(el.disk.logPos.term)
	el.startElection(false)
}

// loadSaved resolves conf/current -> versioned file and verifies it. A
// problem leaves cfg nil and records why in cfgProblem; whether that is
// FATAL depends on the role the election gives (seed 002 §10).
// next is what goes on afterwards (bootScan or bootElect).
func (cs *configState) loadSaved(next bootKind) {
	cs.io(FileOp{Op: OpRead, Path: PointerPath, MaxSize: PointerReadLimit}, bootStep{kind: loadPointer, next: next})
}

func (cs *configState) onPointerRead(d IODone, next bootKind) {
	name, problem, key, level := ResolvePointer(d)
	// §10.6a: an empty pointer is a missing config; anything else wrong
	// is a config the FATAL says is unusable, and why.
	cs.cfgMissing = d.Err == IONotExist || key == "conf.pointer-empty"
	if problem != "" {
		cs.cfgProblem = problem
		if key != "" {
			cs.log(level, key, problem)
		}
		cs.el.afterLoad(next)
		return
	}
	cs.io(FileOp{Op: OpRead, Path: ConfDir + "/" + name, MaxSize: MaxConfigSize}, bootStep{kind: loadVersioned, name: name, next: next})
}

func (cs *configState) onVersionedRead(name string, d IODone, next bootKind) {
	c, problem, key := verifyVersioned(name, d)
	if c == nil {
		cs.cfgProblem = problem
		cs.log(Error, key, problem)
		cs.el.afterLoad(next)
		return
	}
	// Make what we loaded durable before acting on it (see onTermRead).
	cs.run([]seqOp{
		{op: FileOp{Op: OpFsync, Path: ConfDir + "/" + name}},
		{op: FileOp{Op: OpFsync, Path: PointerPath}},
		{op: FileOp{Op: OpFsyncDir, Path: ConfDir}},
	}, bootStep{kind: loadDurable, name: name, c: c, next: next})
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
func (cs *configState) adoptLoaded(c *loaded) {
	cs.cfg = c
	cs.stale = cs.opt.StaleTimeout > 0 && time.Duration(cs.now.Wall-c.modTime) > cs.opt.StaleTimeout
	if cs.stale {
		cs.log(Warn, "conf.stale", fmt.Sprintf("saved config %s (tag=%016x) is older than conf_stale_timeout %v — flagged config_stale", c.name, c.tag, cs.opt.StaleTimeout))
	}
	cs.log(Info, "conf.loaded", fmt.Sprintf("loaded saved config %s (tag=%016x, generation %d)", c.name, c.tag, c.gen))
}

// install saves blob as the node's config and exits: 0 once it is durable
// and trimmed, 1 if the blob is invalid or the save failed.
func (cs *configState) install(blob []byte) {
	if _, problem := verifyBlob("", blob, 0); problem != "" {
		cs.node.die("install.invalid", "refusing to install config: "+problem)
		return
	}
	cs.saveConfig(blob, saveFor{kind: savedInstall})
}

// installSaved: once the installed config is durable, the trim that
// follows the save runs, then the node exits.
func (cs *configState) installSaved(ok bool) {
	if !ok {
		cs.node.die("install.failed", "config install failed; conf/current unchanged")
		return
	}
	cs.enqueueStore(storeJob{kind: jobInstalled})
}

// configInstalled ends an install (a store job: after the trim).
func (cs *configState) configInstalled() {
	cs.log(Info, "install.done", fmt.Sprintf("installed config %s (tag=%016x)", cs.cfg.name, cs.cfg.tag))
	cs.emit(Exit{Code: 0, Reason: "config installed"})
	cs.el.setRole(RoleStopped)
}
