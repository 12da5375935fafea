package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"time"

	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
)

// refTag and refName compute the tag and versioned name independently of
// sm (seed 002 §3.1, §4), so a bug in sm's helpers cannot hide from S1.
func refTag(sum [32]byte) uint64 { return binary.BigEndian.Uint64(sum[:8]) }

func refName(sum [32]byte) string { return "cluster.bin." + hex.EncodeToString(sum[:6]) }

// nodeCheck is the checkers' per-node memory.
type nodeCheck struct {
	booting    bool
	durable    string          // config name known durably current ("" = none)
	inflight   map[string]bool // versioned names whose save started since boot
	excused    bool            // this boot may find no config (wipe, rot, injected I/O error)
	unsure     bool            // an excused boot found none: the disk may or may not hold durable
	lastName   string          // S1: last verified running config
	fetchStart time.Duration   // L3: start of the current config fetch
	fsyncIDs   map[uint64]bool // S7: fsyncs in flight
}

func (c *nodeCheck) reset(d *simdisk.Disk) {
	c.durable = validConfigOn(d.Files())
	c.inflight = map[string]bool{}
	c.fsyncIDs = map[uint64]bool{}
}

func (c *nodeCheck) wiped() {
	c.durable = ""
	c.inflight = map[string]bool{}
}

func (c *nodeCheck) excuse() { c.excused = true }

func (c *nodeCheck) crashed() { c.fsyncIDs = map[uint64]bool{} }

// fetchWindow is the §5.5 retry window (~87.5 s with the defaults).
func fetchWindow(o sm.Options) time.Duration { return o.FetchWindow() }

// checkStep: S7 — an I/O error must be reported (a WARN/ERROR/FATAL log
// or an exit) in the step that receives it, and a failed fsync is fatal.
func (w *World) checkStep(nd *simNode, in sm.Input, effs []sm.Effect) {
	var d sm.IODone
	switch x := in.(type) {
	case sm.IODone:
		d = x
	case sm.Computed: // a Compute's failure is reported as a file operation's is
		d = sm.IODone{ID: x.ID, Err: x.Err, Detail: x.Detail}
	default:
		return
	}
	wasFsync := nd.chk.fsyncIDs[d.ID]
	delete(nd.chk.fsyncIDs, d.ID)
	if d.Err == sm.IOOK || d.Err == sm.IONotExist {
		return
	}
	reported, exited := false, false
	for _, e := range effs {
		switch x := e.(type) {
		case sm.Log:
			reported = reported || x.Level >= sm.Warn
		case sm.Exit:
			exited = x.Code != 0
		}
	}
	if wasFsync && !exited {
		w.violate("S7", "n%d: fsync failed (%s) and the node did not exit", nd.id, d.Err)
	}
	if !reported && !exited {
		w.violate("S7", "n%d: I/O error %s (%s) swallowed: no log, no exit", nd.id, d.Err, d.Detail)
	}
}

// checkSend: S1 — config bytes sent must hash to the SHA-256 and tag sent.
func (w *World) checkSend(nd *simNode, s sm.Send) {
	m := s.Msg
	if len(m.Bytes) == 0 || m.Type != sm.MsgReplConfigReply && m.Type != sm.MsgReplConfigPush {
		return
	}
	sum := sha256.Sum256(m.Bytes)
	if !bytes.Equal(sum[:], m.SHA256) || refTag(sum) != m.ConfigTag {
		w.violate("S1", "n%d sent %s with bytes hashing to tag %016x but claims tag %016x", nd.id, m.Type, refTag(sum), m.ConfigTag)
	}
}

// checkFileOp: S3 — the pointer target is never deleted; it also notes
// saves in flight (S2) and fsyncs (S7).
func (w *World) checkFileOp(nd *simNode, op sm.FileOp) {
	switch op.Op {
	case sm.OpFsync, sm.OpFsyncDir:
		nd.chk.fsyncIDs[op.ID] = true
	case sm.OpWrite:
		if name, ok := strings.CutPrefix(op.Path, "conf/"); ok && strings.HasSuffix(name, ".tmp") && strings.HasPrefix(name, sm.VersionPfx) {
			nd.chk.inflight[name[:len(sm.VersionPfx)+12]] = true
		}
	case sm.OpRemove:
		if !strings.HasPrefix(op.Path, "conf/") {
			return
		}
		files := nd.disk.Files()
		if target, err := sm.ParsePointer(files[sm.PointerPath]); err == nil && sm.ConfDir+"/"+target == op.Path {
			w.violate("S3", "n%d removes %s, the file conf/current names", nd.id, op.Path)
		}
	}
}

// checkLog: S3 keep_n after a trim; L3 — each §10 path only when its
// condition holds; S2 — a completed save is durable.
func (w *World) checkLog(nd *simNode, l sm.Log) {
	n := nd.node
	rotLost := l.Level == sm.Fatal && w.rotExplains(nd, l) // injected bit rot in data/ (rot.go)
	if l.Level == sm.Fatal && w.liveness && !documentedFatal[l.Key] && !rotLost {
		// Faults are off: no injected fault explains it, and a node that
		// exits on it is stuck in a restart loop the cluster only survives
		// by luck (S7: no swallowed error — and no unexplained one).
		w.violate("S7", "n%d: FATAL %s in the liveness phase, with every fault off: %s", nd.id, l.Key, l.Text)
	}
	if l.Key == "repl.sync-buffer-full" {
		w.bufferFulls++
		w.rep.BufferFulls++
	}
	clean := w.cleanSyncs && n.Primary() != w.l2Killed // a sync of the killed primary may predate the calm
	if clean && l.Key == "repl.gap" && w.bufferFulls > 0 {
		w.bufferFulls-- // the primary dropped the records on purpose: they come from its log
	} else if clean && (l.Key == "repl.gap" || l.Key == "repl.bad-records") {
		// No loss, no duplication, no reset, and every sync begun after
		// the faults ended: only the primary can have left the hole.
		w.violate("L4", "n%d: %s with every fault off, in a sync begun after them: %s", nd.id, l.Key, l.Text)
	}
	switch l.Key {
	case "repl.behind":
		w.rep.Behinds++
	case "upgrade.switchover":
		w.rep.UpgradeHandovers++
	case "repl.catch-up":
		w.rep.CatchUps++
	case "repl.synced":
		w.rep.SnapshotSyncs++
	case "repl.truncated":
		w.rep.Truncations++
	case "repl.compacted":
		w.rep.Compactions++
	case "conf.saved":
		_, name, _ := n.Config()
		nd.chk.durable = name
		nd.chk.unsure = false
	case "conf.trimmed":
		count := 0
		for _, p := range nd.disk.Paths() {
			if name, ok := strings.CutPrefix(p, "conf/"); ok && sm.IsVersionName(name) {
				count++
			}
		}
		if count > nd.opts.KeepN {
			w.violate("S3", "n%d: %d versioned configs remain after trim, keep_n=%d", nd.id, count, nd.opts.KeepN)
		}
	case "conf.fetch-request":
		nd.chk.fetchStart = w.now
	case "fatal.standby-no-config", "conf.fetch-gave-up-saved":
		want := time.Duration(float64(fetchWindow(nd.opts))*(1-w.maxDrift)/(1+w.maxDrift)) - time.Millisecond
		if el := w.now - nd.chk.fetchStart; el < want {
			w.violate("L3", "n%d: %s after %v of fetching, before the %v retry window", nd.id, l.Key, el, fetchWindow(nd.opts))
		}
		if (l.Key == "fatal.standby-no-config") != (n.ConfigTag() == 0) {
			w.violate("L3", "n%d: %s with config tag %016x", nd.id, l.Key, n.ConfigTag())
		}
	case "fatal.primary-no-config":
		if n.ConfigTag() != 0 {
			w.violate("L3", "n%d: primary-no-config FATAL while holding config %016x", nd.id, n.ConfigTag())
		}
	case "conf.loaded":
		_, name, _ := n.Config()
		mtime, ok := w.mtime(nd, sm.ConfDir+"/"+name)
		if !ok {
			return
		}
		stale := nd.opts.StaleTimeout > 0 && time.Duration(w.wall(nd.id)-mtime) > nd.opts.StaleTimeout
		if stale != n.Stale() {
			w.violate("L3", "n%d: config_stale=%v but the config is %v old (timeout %v)", nd.id, n.Stale(), time.Duration(w.wall(nd.id)-mtime), nd.opts.StaleTimeout)
		}
	}
}

// documentedFatal are the FATAL exits seed 002 §10 prescribes without an
// injected fault: no valid config anywhere (checked against that
// condition by L3 above).
var documentedFatal = map[string]bool{"fatal.primary-no-config": true, "fatal.standby-no-config": true}

// mtime reads a file's mtime from a listing (listing rolls no faults).
func (w *World) mtime(nd *simNode, path string) (int64, bool) {
	dir, base := path[:strings.LastIndexByte(path, '/')], path[strings.LastIndexByte(path, '/')+1:]
	res := nd.disk.Exec(sm.FileOp{Op: sm.OpList, Path: dir}, w.wall(nd.id))
	for _, e := range res.Entries {
		if e.Name == base {
			return e.ModTime, true
		}
	}
	return 0, false
}

// checkNode runs after each step of a node: S1 on its running config, L3
// never serving without one, S2 at the end of boot.
func (w *World) checkNode(nd *simNode) {
	n := nd.node
	w.checkPromotion(nd)
	w.noteTermPrimary(nd)
	w.checkJobState(nd)
	if n.Serving() && n.ConfigTag() == 0 {
		w.violate("L3", "n%d serving (%s) without a config", nd.id, n.Role())
	}
	if blob, name, ok := n.Config(); ok && name != nd.chk.lastName {
		sum := sha256.Sum256(blob)
		if name != refName(sum) || refTag(sum) != n.ConfigTag() {
			w.violate("S1", "n%d runs config named %s tag %016x whose SHA-256 is %x", nd.id, name, n.ConfigTag(), sum[:8])
		}
		nd.chk.lastName = name
	}
	if nd.chk.booting && n.Role() != sm.RoleBooting {
		nd.chk.booting = false
		if n.Role() != sm.RoleStopped { // a FATAL during boot loaded nothing
			w.checkBooted(nd)
		}
	}
}

// checkBooted: S2 — a boot finds the durable config (or one whose save was
// in flight at the crash), never a torn one, and never loses a durable one
// unless a fault this boot explains it.
func (w *World) checkBooted(nd *simNode) {
	c := &nd.chk
	_, name, ok := nd.node.Config()
	switch {
	case ok && name != c.durable && !c.inflight[name] && !c.excused:
		w.violate("S2", "n%d booted with %s; durable was %q, in flight %v", nd.id, name, c.durable, c.inflight)
	case !ok && c.durable != "" && !c.excused && !c.unsure:
		w.violate("S2", "n%d booted without config; %s had been durably saved", nd.id, c.durable)
	}
	if ok || !c.excused && !c.unsure {
		c.durable = name
		c.unsure = false
	} else {
		// The durable file may still be there, unreadable this time, or
		// since rot struck at an earlier boot: rot stays on the disk, and
		// a boot after it finds nothing again without an excuse of its
		// own. What the disk holds stays unsettled until a config loads
		// or is saved; a power loss may yet bring back the intact pointer
		// the rot's copy replaced unsynced (seed 675225).
		c.unsure = true
	}
	if !c.unsure {
		// An excused boot that found nothing has not settled what the
		// disk holds: saves in flight before it may still surface.
		c.inflight = map[string]bool{}
	}
	c.excused = false
}

// s4State measures dual-primary time (S4).
type s4State struct {
	since     [][]time.Duration
	watching  bool // some since is set (not -1)
	dualStart time.Duration
	total     time.Duration
}

func (s *s4State) init(n int) {
	s.since = make([][]time.Duration, n)
	for i := range s.since {
		s.since[i] = make([]time.Duration, n)
		for j := range s.since[i] {
			s.since[i][j] = -1
		}
	}
	s.dualStart = -1
}

func (s *s4State) finish(now time.Duration, r *Report) {
	if s.dualStart >= 0 {
		s.total += now - s.dualStart
	}
	r.DualPrimary = s.total
}

// checkGlobal: S4 — two primaries coexist only while the network keeps
// them apart, plus one heartbeat interval and one message delay.
func (w *World) checkGlobal() {
	var prim [8]int
	np := 0
	for _, nd := range w.nodes {
		if nd.up && nd.node.Role() == sm.RolePrimary && np < len(prim) {
			prim[np] = nd.id
			np++
		}
	}
	s := &w.s4
	switch {
	case np >= 2 && s.dualStart < 0:
		s.dualStart = w.now
	case np < 2 && s.dualStart >= 0:
		s.total += w.now - s.dualStart
		s.dualStart = -1
	}
	if np < 2 {
		// No pair to watch: every pair's clock restarts (what the loop
		// below does for a pair not both primary), without computing the
		// bound, a loop over every link, at every event.
		if s.watching {
			for a := range s.since {
				for b := range s.since[a] {
					s.since[a][b] = -1
				}
			}
			s.watching = false
		}
		return
	}
	bound := time.Duration(float64(w.nodes[0].opts.HeartbeatInterval)*(1+w.maxDrift)) + w.net.maxDelay() + 20*time.Millisecond
	if w.net.rated {
		bound += maxCleanBusy // a heartbeat may wait behind a message on the wire
	}
	for a := 0; a < w.sc.Nodes; a++ {
		for b := a + 1; b < w.sc.Nodes; b++ {
			both := isIn(prim[:np], a) && isIn(prim[:np], b)
			// A stopped process can neither hear nor be heard: a pause
			// keeps two primaries apart like a partition does.
			if !both || !w.net.clean(w.now, a, b) || w.paused(a) || w.paused(b) {
				s.since[a][b] = -1
				continue
			}
			if s.since[a][b] < 0 {
				s.since[a][b] = w.now
				s.watching = true
			}
			if d := w.now - s.since[a][b]; d > bound {
				w.violate("S4", "n%d and n%d both primary for %v while able to talk (bound %v)", a, b, d, bound)
			}
		}
	}
}

func isIn(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
