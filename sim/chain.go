package sim

import (
	"bytes"
	"hash/fnv"
	"path"
	"sort"
	"strings"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// The canonical chain (S5, quorum mode): one sequence of committed job-log
// records, built by the checker from the disks, never from a node's own
// bookkeeping.
//
//   - A record is committed when a primary acknowledges a write at its LSN
//     or above: every record up to the reply's LSN in that primary's log
//     (as its disk holds it) joins the chain, remembered with the term of
//     the primary whose acknowledgement first covered it (its commit term).
//     At that moment the record at the reply's LSN must be durable on a
//     majority of disks (each disk's durable view, read the way recovery
//     reads it): an acknowledgement released before the majority held it
//     fails here, whether or not a later failover loses it.
//   - The chain never changes: a later acknowledgement whose log holds
//     another record at a committed LSN fails.
//   - Every node's durable log is, at every durable change (each fsync of
//     data/, each crash and restart) and whenever the chain grows, a prefix
//     of the chain, except for a stale tail: a node may still hold another
//     record at a committed LSN L only while no record of its log at or
//     after L has a term at or above L's commit term (a deposed primary's
//     or a cut-off standby's uncommitted records, which the next sync
//     replaces). Raft's log matching makes this exact: a log holding a
//     record of term >= K after L got it from a primary of term >= K,
//     which holds L's committed record (leader completeness).
//
// Records below a node's snapshot are not on its disk: a snapshot is
// compared by its (LSN, term) only. Not checked in seed mode, where a
// failover may rightly discard acknowledged records (their loss is
// measured by the durability checker), nor after a disk wipe (amnesia).

// logRec is one record of a log view. Two records are the same record
// when their encodings are equal (compared byte for byte; sum names one
// in a failure).
type logRec struct {
	lsn, term uint64
	payload   []byte // the record's encoding (shared with the cache); nil: none
	// chained is what checkChainView found of this record (in its
	// cache's copy) against the chain's entry at its LSN: nothing yet,
	// the entry's term (while the entry had no record), or its term and
	// record. An entry never changes once set but for gaining its record,
	// and the cache's record never changes, so a finding stands.
	chained chainFinding
}

type chainFinding uint8

const (
	chainedNot  chainFinding = iota
	chainedTerm              // the entry's term, the entry holding no record
	chainedRec               // the entry's term and record
)

// sum is the FNV-1a hash of an encoding, 0 for none: how a failure names
// a record.
func sum(payload []byte) uint64 {
	if len(payload) == 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write(payload) // a hash.Hash never fails
	return h.Sum64()
}

// logView is a node's job log as recovery would rebuild it from one view
// of its disk: the newest decodable snapshot, then the contiguous records
// after it.
type logView struct {
	snapLSN, snapTerm uint64
	// chunks hold LSNs snapLSN+1 .. snapLSN+n in order: runs of the
	// cache's segment records, shared, not copied.
	chunks [][]logRec
	n      int
}

func (v *logView) lastLSN() uint64 { return v.snapLSN + uint64(v.n) }

// clone is a copy of v that shares nothing with the caches.
func (v *logView) clone() *logView {
	c := *v
	c.chunks = make([][]logRec, len(v.chunks))
	for i, ch := range v.chunks {
		c.chunks[i] = append([]logRec(nil), ch...)
	}
	return &c
}

func (v *logView) lastTerm() uint64 {
	if len(v.chunks) > 0 {
		c := v.chunks[len(v.chunks)-1]
		return c[len(c)-1].term
	}
	return v.snapTerm
}

// durablePos is the log position on nd's durable view (checkDurableClaim).
func (w *World) durablePos(nd *simNode) (term, lsn uint64) {
	w.cc.init(len(w.nodes))
	v := w.durableView(nd.id)
	return v.lastTerm(), v.lastLSN()
}

// rec returns the record at lsn, when the view holds it (not under its
// snapshot).
func (v *logView) rec(lsn uint64) (logRec, bool) {
	if lsn <= v.snapLSN || lsn > v.lastLSN() {
		return logRec{}, false
	}
	for _, c := range v.chunks {
		if first := c[0].lsn; lsn < first+uint64(len(c)) {
			return c[lsn-first], true
		}
	}
	return logRec{}, false
}

// extend appends the run of recs (increasing LSNs, as wal.Walk yields
// them) that continues the view; false when the view ends in recs (a gap,
// or the snapshot's LSN holding a record of another term).
func (v *logView) extend(recs []logRec) bool {
	for len(recs) > 0 {
		next := v.lastLSN() + 1
		if s := v.snapLSN; s > 0 {
			k := sort.Search(len(recs), func(i int) bool { return recs[i].lsn >= s })
			if k < len(recs) && recs[k].lsn == s && recs[k].term != v.snapTerm {
				return false // another log's record at the snapshot's LSN
			}
		}
		// skip what the view already holds (records under the snapshot)
		recs = recs[sort.Search(len(recs), func(i int) bool { return recs[i].lsn >= next }):]
		if len(recs) == 0 {
			return true
		}
		if recs[0].lsn != next {
			return false
		}
		// the contiguous run from here
		run := sort.Search(len(recs), func(i int) bool { return recs[i].lsn != next+uint64(i) })
		v.chunks = append(v.chunks, recs[:run])
		v.n += run
		recs = recs[run:]
	}
	return true
}

// termAt is the term of the view's record at lsn, its snapshot's included.
func (v *logView) termAt(lsn uint64) (uint64, bool) {
	if lsn == v.snapLSN && lsn > 0 {
		return v.snapTerm, true
	}
	r, ok := v.rec(lsn)
	return r.term, ok
}

// frameCache keeps what readLog parsed of one disk: snapshots by their
// bytes, segments by their bytes (segments grow by appends: only the new
// tail is decoded). It shares the disk's bytes, which never change
// (simdisk): a file rewritten is a new slice, and compared again.
type frameCache struct {
	snaps   map[string]snapPos
	snapVer map[string]uint64
	segs    map[string]*segFrames
	walker  wal.Walker // one decoder for every walk
}

type segFrames struct {
	data []byte // the bytes parsed (the disk's, shared)
	recs []logRec
	ver  uint64 // the mirror version parsed (0: unknown)
}

// snapshot parses a snapshot file; ver, when not 0, is the mirror version
// of data (the same version: the same bytes, no comparison needed).
func (c *frameCache) snapshot(name string, data []byte, ver uint64) snapPos {
	if c.snaps == nil {
		c.snaps = map[string]snapPos{}
		c.snapVer = map[string]uint64{}
	}
	if sp, ok := c.snaps[name]; ok && (ver != 0 && c.snapVer[name] == ver || bytes.Equal(sp.data, data)) {
		c.snapVer[name] = ver
		return sp
	}
	c.snapVer[name] = ver
	sp := snapPos{data: data}
	if h, err := readSnapshotHead(data); err != nil {
		sp.bad = true
	} else {
		sp.term, sp.lsn = h.Term, h.LSN
	}
	c.snaps[name] = sp
	return sp
}

// readSnapshotHead checks a snapshot file as wal.DecodeSnapshot does and
// returns its scalars: wal.ReadSnapshot, the same checks as a stream
// (one job decoded at a time), accepts exactly the files DecodeSnapshot
// accepts, with the same contents (TestPropSnapshotReadersAgree in
// sm/wal); its error's text may differ.
func readSnapshotHead(data []byte) (wal.SnapshotHead, error) {
	var head wal.SnapshotHead
	err := wal.ReadSnapshot(data, wal.SnapshotVisitor{
		Head:     func(h wal.SnapshotHead) error { head = h; return nil },
		Job:      func(*schema.SnapshotJob) error { return nil },
		Schedule: func(*schema.SnapshotSchedule) error { return nil },
	})
	return head, err
}

func (c *frameCache) segment(name string, data []byte, ver uint64) []logRec {
	if c.segs == nil {
		c.segs = map[string]*segFrames{}
	}
	sp := c.segs[name]
	if sp != nil && ver != 0 && sp.ver == ver {
		return sp.recs
	}
	if sp == nil || len(data) < len(sp.data) || !samePrefix(data, sp.data) {
		sp = &segFrames{}
		c.segs[name] = sp
	}
	sp.ver = ver
	if len(data) == len(sp.data) {
		return sp.recs
	}
	base := len(sp.data)
	tail := data[base:]
	type at struct {
		off       int
		lsn, term uint64
	}
	var found []at
	valid, _ := c.walker.Walk(tail, func(off int, r *schema.WalRecord) error {
		found = append(found, at{off: off, lsn: r.GetLsn(), term: r.GetTerm()})
		return nil
	})
	tail = tail[:valid]
	for i, f := range found {
		end := valid
		if i+1 < len(found) {
			end = found[i+1].off
		}
		p := tail[f.off+wal.HeaderSize : end]
		sp.recs = append(sp.recs, logRec{lsn: f.lsn, term: f.term, payload: p})
	}
	sp.data = data[: base+valid : base+valid]
	return sp.recs
}

// samePrefix reports whether data begins with the bytes of prefix. A
// file's bytes never change (simdisk): data that starts at prefix's first
// byte in memory holds it, and only other memory is compared.
func samePrefix(data, prefix []byte) bool {
	if len(prefix) == 0 || &data[0] == &prefix[0] {
		return len(data) >= len(prefix)
	}
	return bytes.Equal(data[:len(prefix)], prefix)
}

// readLog rebuilds the log recovery would find on one view of disk d (the
// rule recovery applies: a record at the snapshot's LSN with another term
// ends the log there, a gap ends it).
func readLog(d *simdisk.Disk, durable bool, c *frameCache) logView {
	files := map[string]*mirrorFile{}
	var snaps, segs []string
	d.Peek(wal.SnapDir, durable, func(p string, b []byte) {
		if path.Dir(p) == wal.SnapDir {
			snaps = append(snaps, path.Base(p))
			files[p] = &mirrorFile{data: b}
		}
	})
	d.Peek(wal.WALDir, durable, func(p string, b []byte) {
		if path.Dir(p) == wal.WALDir {
			segs = append(segs, path.Base(p))
			files[p] = &mirrorFile{data: b}
		}
	})
	return assembleLog(snaps, segs, files, c)
}

// assembleLog is readLog over named files (their data and mirror versions).
func assembleLog(snaps, segs []string, files map[string]*mirrorFile, c *frameCache) logView {
	sort.Strings(snaps)
	sort.Strings(segs)
	return assemblePlanned(snaps, segs, nil, files, c, nil)
}

// assemblePlanned is assembleLog of sorted names; first, when not nil, is
// wal.PlanRecovery(snaps, segs), computed before. The view's chunks are
// appended to chunks[:0].
func assemblePlanned(snaps, segs []string, first *wal.Plan, files map[string]*mirrorFile, c *frameCache, chunks [][]logRec) logView {
	for {
		var plan wal.Plan
		if first != nil {
			plan, first = *first, nil
		} else {
			plan, _ = wal.PlanRecovery(snaps, segs)
		}
		v := logView{chunks: chunks[:0]}
		if plan.Snapshot != "" {
			f := files[wal.SnapDir+"/"+plan.Snapshot]
			sp := c.snapshot(plan.Snapshot, f.data, f.ver)
			if sp.bad {
				snaps = removeName(snaps, plan.Snapshot)
				continue
			}
			v.snapLSN, v.snapTerm = sp.lsn, sp.term
		}
		for _, seg := range plan.Segments {
			f := files[wal.WALDir+"/"+seg]
			if !v.extend(c.segment(seg, f.data, f.ver)) {
				return v
			}
		}
		return v
	}
}

// chainEntry is one committed LSN of the chain.
type chainEntry struct {
	set     bool
	term    uint64
	hasRec  bool   // false: known only as a snapshot's (LSN, term)
	payload []byte // the record's encoding, with hasRec (nil without)
	byTerm  uint64 // commit term: the term of the first primary whose acknowledgement covered it
	byNode  int
	byReply uint64
}

// chainNode is the checker's view of one node's disk.
type chainNode struct {
	durCache frameCache // the durable view's parse
	curCache frameCache // the current view's parse (a primary's log at an acknowledgement)
	// cur is readLog of curDisk's current view at its Gen curGen (curOK):
	// replies acknowledged between two changes of the disk read it once.
	cur     logView
	curDisk *simdisk.Disk
	curGen  uint64
	curOK   bool
	view    logView // the durable view, as of the last durable change
	dirty   bool
	mirror  durMirror // the durable data/wal and data/snap files
}

// mirrorFile is one file's bytes; ver (when not 0) changes with them.
type mirrorFile struct {
	data []byte
	ver  uint64
}

// durMirror mirrors the durable log files of a disk, updated per fsync:
// a file fsync re-reads that file, a directory fsync that directory, and
// anything else (a crash, a restart, an fsync of data/) everything.
type durMirror struct {
	files map[string]*mirrorFile
	ver   uint64
	ok    bool
	// names: the sorted snapshot and segment names of files and their
	// recovery plan, while no file came or went (most fsyncs only grow a
	// segment: listing, sorting and planning again each time was a third
	// of the mirror's reading).
	named       bool
	snaps, segs []string
	plan        wal.Plan
}

// set records p's durable bytes (the disk's, shared: they never change).
func (m *durMirror) set(p string, b []byte) {
	m.ver++
	if f, ok := m.files[p]; ok {
		*f = mirrorFile{data: b, ver: m.ver} // the mirror's own: read only while assembling
		return
	}
	m.named = false
	m.files[p] = &mirrorFile{data: b, ver: m.ver}
}

// drop forgets p.
func (m *durMirror) drop(p string) {
	if _, ok := m.files[p]; ok {
		delete(m.files, p)
		m.named = false
	}
}

func (m *durMirror) reload(d *simdisk.Disk) {
	m.files, m.ok, m.named = map[string]*mirrorFile{}, true, false
	for _, dir := range []string{wal.SnapDir, wal.WALDir} {
		d.Peek(dir, true, func(p string, b []byte) {
			if path.Dir(p) == dir {
				m.set(p, b)
			}
		})
	}
}

// sync follows op, an fsync that completed (nil: reload everything).
func (m *durMirror) sync(d *simdisk.Disk, op *sm.FileOp) {
	if !m.ok || op == nil {
		m.reload(d)
		return
	}
	dir := path.Dir(op.Path)
	switch {
	case op.Op == sm.OpFsync && (dir == wal.WALDir || dir == wal.SnapDir):
		if b, ok := d.DurableData(op.Path); ok {
			m.set(op.Path, b)
		} else {
			m.drop(op.Path)
		}
	case op.Op == sm.OpFsyncDir && (op.Path == wal.WALDir || op.Path == wal.SnapDir):
		seen := map[string]bool{}
		d.Peek(op.Path, true, func(p string, b []byte) {
			if path.Dir(p) != op.Path {
				return
			}
			seen[p] = true
			if f := m.files[p]; f == nil || !bytes.Equal(f.data, b) {
				m.set(p, b)
			}
		})
		for p := range m.files {
			if path.Dir(p) == op.Path && !seen[p] {
				m.drop(p)
			}
		}
	case op.Path == sm.TermPath || strings.HasPrefix(op.Path, sm.TermPath):
	default:
		m.reload(d)
	}
}

// read assembles the mirrored durable log; its chunks are appended to
// chunks[:0] (the array of a view no longer read).
func (m *durMirror) read(c *frameCache, chunks [][]logRec) logView {
	if !m.named {
		m.snaps, m.segs = nil, nil
		for p := range m.files {
			if path.Dir(p) == wal.SnapDir {
				m.snaps = append(m.snaps, path.Base(p))
			} else {
				m.segs = append(m.segs, path.Base(p))
			}
		}
		sort.Strings(m.snaps)
		sort.Strings(m.segs)
		m.plan, _ = wal.PlanRecovery(m.snaps, m.segs)
		m.named = true
	}
	return assemblePlanned(m.snaps, m.segs, &m.plan, m.files, c, chunks)
}

type chainCheck struct {
	nodes []chainNode
	chain []chainEntry // by LSN; chain[0] unused
	top   uint64       // highest committed LSN
}

// chainArmed reports whether the chain is checked (quorum mode, no wipe).
func (w *World) chainArmed() bool {
	return !w.sc.SeedMode && !w.sc.SeedLiteralP0 && w.strict()
}

func (cc *chainCheck) init(n int) {
	if cc.nodes == nil {
		cc.nodes = make([]chainNode, n)
		cc.chain = make([]chainEntry, 1)
	}
}

// durableView returns node i's durable log view, re-assembled if its disk
// changed since.
func (w *World) durableView(i int) *logView {
	cn := &w.cc.nodes[i]
	if cn.dirty || !cn.mirror.ok {
		if !cn.mirror.ok {
			cn.mirror.reload(w.nodes[i].disk)
		}
		// The old view's chunk array is reused: nothing keeps a view
		// past the next durable change (rot keeps a clone).
		cn.view = cn.mirror.read(&cn.durCache, cn.view.chunks)
		cn.dirty = false
	}
	return &cn.view
}

// durableChanged is the hook for every change of node nd's durable state:
// an fsync (of anything under data/) completed, the process crashed, or
// it starts (after a wipe or bit rot, perhaps). It re-reads the durable
// log and checks it against the chain.
func (w *World) durableChanged(nd *simNode) { w.durableSynced(nd, nil) }

// durableSynced is durableChanged for one completed fsync (op; nil: any
// change, re-read everything).
func (w *World) durableSynced(nd *simNode, op *sm.FileOp) {
	w.noteDurableTerm(nd)
	w.cc.init(len(w.nodes))
	cn := &w.cc.nodes[nd.id]
	if op != nil && (op.Path == sm.TermPath || strings.HasPrefix(op.Path, sm.TermPath)) {
		return // data/term: no log file changed
	}
	// The mirror is kept in every mode: checkDurableClaim reads it too.
	cn.mirror.sync(nd.disk, op)
	cn.dirty = true
	if w.chainArmed() {
		w.checkChainView(nd.id, 1)
	}
}

// isDataSync reports whether op makes something under data/ durable.
func isDataSync(op sm.FileOp) bool {
	if op.Op != sm.OpFsync && op.Op != sm.OpFsyncDir {
		return false
	}
	switch {
	case op.Path == "", op.Path == sm.DataDir, op.Path == wal.WALDir, op.Path == wal.SnapDir:
		return true // directory entries: the log's files, data/term's rename
	}
	return strings.HasPrefix(op.Path, wal.WALDir+"/") || strings.HasPrefix(op.Path, wal.SnapDir+"/") || op.Path == sm.TermPath
}

// checkChainView: node i's durable log holds no record other than the
// chain's at a committed LSN >= from, unless that record is a stale tail
// (no term at or after it reaches the LSN's commit term).
func (w *World) checkChainView(i int, from uint64) {
	cc := &w.cc
	if cc.top < from {
		return
	}
	v := w.durableView(i)
	// suffix maximum of the terms, walking down from the end
	maxTerm := uint64(0)
	for ci := len(v.chunks) - 1; ci >= 0; ci-- {
		c := v.chunks[ci]
		for k := len(c) - 1; k >= 0; k-- {
			r := &c[k] // the cache's: its finding is kept there
			maxTerm = max(maxTerm, r.term)
			if r.lsn > cc.top || r.lsn < from {
				continue
			}
			e := &cc.chain[r.lsn]
			if !e.set || maxTerm < e.byTerm {
				continue
			}
			if r.chained == chainedRec || r.chained == chainedTerm && !e.hasRec {
				continue // found equal to this entry before
			}
			if e.term != r.term || e.hasRec && !bytes.Equal(e.payload, r.payload) {
				w.violate("S5", "n%d's durable log holds at committed lsn %d a record of term %d (hash %016x), not the chain's record of term %d (hash %016x, committed in term %d by n%d's reply to #%d), and its log reaches term %d at or after it", i, r.lsn, r.term, sum(r.payload), e.term, sum(e.payload), e.byTerm, e.byNode, e.byReply, maxTerm)
				return
			}
			r.chained = chainedTerm
			if e.hasRec {
				r.chained = chainedRec
			}
		}
	}
	if s := v.snapLSN; s > 0 && s >= from && s <= cc.top {
		maxTerm = max(maxTerm, v.snapTerm)
		if e := cc.chain[s]; e.set && maxTerm >= e.byTerm && e.term != v.snapTerm {
			w.violate("S5", "n%d's durable snapshot at committed lsn %d has term %d, but the chain's record there has term %d (committed in term %d by n%d's reply to #%d)", i, s, v.snapTerm, e.term, e.byTerm, e.byNode, e.byReply)
		}
	}
}

// noteCommit is the hook for every acknowledged reply: a write with LSN l
// acknowledged by a primary of term k commits every record up to l of its
// log; the record at l must be durable on a majority.
func (w *World) noteCommit(nd *simNode, r sm.Reply, term uint64) {
	if r.Status != sm.StatusOK || r.LSN == 0 || !w.chainArmed() {
		return
	}
	cc := &w.cc
	cc.init(len(w.nodes))
	l := r.LSN
	pv := w.currentLog(nd)
	ref, ok := pv.rec(l)
	refHash := ok
	if !ok && l == pv.snapLSN {
		ref.term, ok = pv.snapTerm, true // checkpointed already: known by its term
	}
	if !ok && l < pv.snapLSN {
		// A checkpoint past l completed before the reply: the record is
		// under the snapshot, judged only if the chain already holds it.
		if cc.top < l || !cc.chain[l].set {
			return
		}
		e := cc.chain[l]
		ref.term, ref.payload, refHash, ok = e.term, e.payload, e.hasRec, true
	}
	if !ok {
		w.violate("S5", "n%d acknowledged #%d at lsn %d, but its log on disk holds (snapshot %d, up to lsn %d)", nd.id, r.ID, l, pv.snapLSN, pv.lastLSN())
		return
	}
	// The record at l is durable on a majority.
	held := 0
	for i := range w.nodes {
		v := w.durableView(i)
		if r := &w.nodes[i].rot; r.before != nil && (r.lost || !w.nodes[i].up || !r.read) {
			// Lost to bit rot, down with rot on its disk, or not yet
			// past reading it: what it durably held before the rot
			// counts, as its acknowledgements do (a lost minority is the
			// failure a majority is there to survive). A node rotted
			// while down that stops again for another reason before it
			// reads the rot (an fsync fault at boot, then the start
			// limit) is as lost; its disk, judged now, holds nothing past
			// the rotted snapshot (seed 495489). One that has restarted
			// and not yet read the rotted file holds, as far as anyone
			// can know, its log before the rot (seed 1011091).
			b := r.before
			if x, ok := b.rec(l); ok && x.term == ref.term && (!refHash || bytes.Equal(x.payload, ref.payload)) {
				held++
				continue
			}
		}
		if x, ok := v.rec(l); ok && x.term == ref.term && (!refHash || bytes.Equal(x.payload, ref.payload)) {
			held++
		} else if v.snapLSN >= l {
			// A snapshot covering l: of this log, or of a newer term's
			// beyond this log's end (a primary paused past its deposition
			// answers late; the newer primary's snapshot stands for l, and
			// what it holds is judged by the recovery replay).
			// A snapshot beyond the acknowledging primary's disk in the
			// record's own term is that primary's (one per term): its
			// in-memory state, sent while its own appends were slower.
			if t, ok := pv.termAt(v.snapLSN); ok && t == v.snapTerm || !ok && v.snapLSN > pv.lastLSN() && v.snapTerm >= ref.term {
				held++
			}
		}
	}
	if need := w.majority(); held < need {
		w.violate("S5", "n%d acknowledged #%d at lsn %d (term %d) while only %d of %d disks durably held that record (a majority is %d)", nd.id, r.ID, l, ref.term, held, len(w.nodes), need)
		return
	}
	// Join the chain; what is already there must not change.
	for uint64(len(cc.chain)) <= l {
		cc.chain = append(cc.chain, chainEntry{})
	}
	from := cc.top + 1
	for lsn := max(pv.snapLSN, 1); lsn <= l; lsn++ {
		e := &cc.chain[lsn]
		x, hasRec := pv.rec(lsn)
		if !hasRec {
			x.term = pv.snapTerm // lsn == snapLSN
		}
		if e.set {
			if e.term != x.term || hasRec && e.hasRec && !bytes.Equal(e.payload, x.payload) {
				w.violate("S5", "the committed chain changed at lsn %d: n%d's reply to #%d acknowledges a log with term %d (hash %016x) there, but the record of term %d (hash %016x) was committed in term %d by n%d's reply to #%d", lsn, nd.id, r.ID, x.term, sum(x.payload), e.term, sum(e.payload), e.byTerm, e.byNode, e.byReply)
				return
			}
			if hasRec && !e.hasRec {
				e.hasRec, e.payload = true, x.payload
			}
			continue
		}
		*e = chainEntry{set: true, term: x.term, hasRec: hasRec, payload: x.payload, byTerm: term, byNode: nd.id, byReply: r.ID}
		from = min(from, lsn)
	}
	if l > cc.top {
		cc.top = l
	}
	for i := range w.nodes {
		if w.fail == nil {
			w.checkChainView(i, from)
		}
	}
}

// currentLog is readLog(nd.disk, false, ...) with nd's current-view
// cache, read again only once the disk changed (simdisk Gen). The view
// is shared: read only.
func (w *World) currentLog(nd *simNode) logView {
	w.cc.init(len(w.nodes))
	cn := &w.cc.nodes[nd.id]
	if !cn.curOK || cn.curDisk != nd.disk || cn.curGen != nd.disk.Gen() {
		cn.cur = readLog(nd.disk, false, &cn.curCache)
		cn.curDisk, cn.curGen, cn.curOK = nd.disk, nd.disk.Gen(), true
	}
	return cn.cur
}

// chainPayload returns the encoding of the committed record at lsn, when
// the chain holds it (checkRecovered's replay).
func (w *World) chainPayload(lsn uint64) ([]byte, bool) {
	cc := &w.cc
	if lsn == 0 || lsn > cc.top || !cc.chain[lsn].hasRec {
		return nil, false
	}
	return cc.chain[lsn].payload, true
}
