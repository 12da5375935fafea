package sm

import (
	"errors"
	"fmt"
	"slices"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// A standby's own checkpoint (issue 9 item 1: a standby never resyncs
// merely because it applied N records). Once its current segment holds
// max_wal_records records, a standby rolls to a new segment and builds a
// snapshot of its log up to there from its newest snapshot and the
// segments after it, as recovery would; writes it like a primary's
// checkpoint (temporary file, fsync, rename, directory fsync); then
// removes the segments and snapshots it makes obsolete. Records keep
// arriving meanwhile and go to the new segment. A crash at any point
// leaves a layout recovery reads (the newest snapshot wins, the
// segments after it replay). A snapshot install waits for it (both
// write data/snap), and so does a truncation (it must not cut what the
// snapshot covers); a promotion abandons it, taking the state it builds
// on or has built (keptState, buildInFlight) for its recovery.
//
// A checkpoint keeps the state it built (ckptBase) from the moment it is
// built (compactBuilt), and the next one replays the newer records onto that state
// instead of reading the snapshot back and decoding it again: the read
// back was 40% of a standby's checkpoint CPU (docs/performance.md). The
// state is the log's only while nothing else writes data/snap or cuts
// the log and the config is the same: an install, a truncation and a
// promotion drop it; a checkpoint that fails before its state is built
// has it half replayed and drops it; one whose write fails leaves it past
// the newest snapshot, where a promotion may start from it but the next
// checkpoint reads the snapshot as before.
//
// The records replay with the standby's config, so a queue the standby's
// config lacks lands in lost_and_found in the snapshot, as it would in a
// recovery on this node (seed 002 §6.5).
//
// Between checkpoints the kept state advances: every MaxWALRecords /
// advanceShare records a standby rolls to a new segment, as a checkpoint
// does, and replays the segments since the kept state onto it (an
// advance: a checkpoint that builds and writes nothing). A promotion
// then replays at most that many records, from the segment the last
// advance rolled to, instead of everything since the last checkpoint
// (0.33–0.43 s of a 2 s failover at 1M jobs, docs/performance.md); the
// next checkpoint reads only the segments since the last advance. The
// work is the same as without advances (each record is read and applied
// once), spread over the interval. A standby with no kept state (after a
// restart or a truncation) builds it at its first advance from its
// newest snapshot, as a checkpoint would: it is ready for a promotion
// that many records later, not a whole interval later (a promotion
// without it reads and imports the snapshot, 3.2 s at 1M jobs). After an
// install its first checkpoint does, as before: an advance then read the
// snapshot just received back whole in the sync's last second, beside
// the catch-up of the records written meanwhile (a probe request of 98.5
// ms in one bench-scale run of three, docs/performance.md).

// compactBase is the job state a standby checkpoint built: the state of
// the log up to at, under the config whose hash is cfg. It is handed to
// the next checkpoint's compute, which changes it, so at most one holds
// it at a time.
type compactBase struct {
	q   *queue.Queues
	at  logPos
	cfg [32]byte
}

// advanceShare: the kept state advances every MaxWALRecords/advanceShare
// records, so a standby rolls to a new segment that often too (well
// under maxCkptSegments in a checkpoint's interval).
const advanceShare = 8

// takeBase hands the kept state to the next checkpoint or advance if it
// is the state of the log at or past the newest snapshot, newest ("":
// none, the log from its start), under the config in force; the standby
// keeps no base meanwhile (a failed checkpoint leaves the state half
// replayed).
func (sl *standbyLog) takeBase(newest string) *compactBase {
	b := sl.keptState()
	lsn, ok := wal.ParseSnapshotName(newest)
	if newest == "" {
		lsn, ok = 0, true
	}
	if !ok || !b.covers(lsn, sl.conf.cfg) {
		return nil
	}
	return b
}

// covers: b (nil: none) is the state of this node's log at or past the
// snapshot at lsn, under cfg — the test for a checkpoint, an advance and
// a promotion's recovery, which replay the log's records after b.at.
// Past the newest snapshot after an advance, or while the checkpoint
// that built b writes its snapshot; whatever else replaces or cuts the
// log (an install, a truncation) drops b first.
func (b *compactBase) covers(lsn uint64, cfg *loaded) bool {
	return b != nil && cfg != nil && b.at.lsn >= lsn && b.cfg == cfg.sum
}

// keptState hands over the state the last checkpoint kept (nil: none, or
// a checkpoint's build has it): a promotion's recovery may start from it.
// A checkpoint still reading its segments hands back the state it took,
// which it has not changed yet.
func (sl *standbyLog) keptState() *compactBase {
	b := sl.ckptBase
	sl.ckptBase = nil
	if c := sl.compact; b == nil && c != nil {
		b, c.base = c.base, nil
	}
	return b
}

// compaction is a standby checkpoint in progress.
type compaction struct {
	at       logPos // the snapshot's position: the log's end when it began
	thenJoin bool   // a truncation waited: join again when done
	advance  bool   // an advance: the kept state built up to at, nothing written
	// base: the kept state it builds on (nil: it reads its newest
	// snapshot), while it reads its segments and has not changed it (a
	// promotion meanwhile takes it back: keptState).
	base *compactBase
	// build: its ComputeBuild in flight (nil: none), which a promotion
	// meanwhile takes over (buildInFlight).
	build *stateBuild
}

// stateBuild is a standby checkpoint's ComputeBuild in flight, handed to
// a promotion's recovery (startRecovery), which waits for it instead of
// reading and importing the newest snapshot: that import would run on
// the compute lane behind the build anyway, and the build's state is the
// log's up to at, as the kept state is (compactBuilt).
type stateBuild struct {
	id uint64
	in *compactInput
}

// pendingID is b's Compute ID, 0 (never an operation's) for none.
func (b *stateBuild) pendingID() uint64 {
	if b == nil {
		return 0
	}
	return b.id
}

// buildInFlight is the checkpoint's build in flight, if any; called by a
// promotion before endLog ends the checkpoint.
func (sl *standbyLog) buildInFlight() *stateBuild {
	if c := sl.compact; c != nil {
		return c.build
	}
	return nil
}

// maxCkptSegments bounds the segments a standby's log holds past its
// last checkpoint: a resync begins a segment, so a standby resynced every
// few batches (a lossy link) held hundreds of a record or two, which a
// promotion read and fsynced one by one, seconds on a slow disk, before
// it could serve (the simulator's seed 22044: 960 segments, 989 records).
const maxCkptSegments = 64

// maybeCompact starts a standby checkpoint once MaxWALRecords records, or
// maxCkptSegments segments, were appended since its last one, and else
// an advance once MaxWALRecords/advanceShare records were since its kept
// state last began to move; sr's later appends go to a new segment.
func (sl *standbyLog) maybeCompact(sr *standbyRepl) {
	if sl.compact != nil || sl.installBusy || sl.disk.logUnknown || sl.conf.cfg == nil {
		return
	}
	limit := sl.opt.MaxWALRecords
	if sr.segLimit > 0 {
		limit = sr.segLimit
	}
	due := sl.sinceCkpt.records >= limit || sl.sinceCkpt.segments >= maxCkptSegments
	cold := sl.ckptBase == nil // an advance would read and import the newest snapshot
	if !due && (sl.sinceCkpt.unkept < max(1, sl.opt.MaxWALRecords/advanceShare) || cold && sl.sinceCkpt.installed) {
		return
	}
	c := &compaction{at: sl.disk.logPos, advance: !due}
	sl.compact = c
	sr.seg = wal.SegmentPath(c.at.lsn + 1)
	if c.advance {
		sl.sinceCkpt.unkept = 0
		sl.log(Debug, "repl.advancing", fmt.Sprintf("standby: advancing its kept state to lsn %d", c.at.lsn))
	} else {
		sr.segLimit, sl.sinceCkpt = sl.opt.MaxWALRecords, appendedSince{}
		sl.log(Info, "repl.compacting", fmt.Sprintf("standby checkpoint: compacting our log up to lsn %d into a snapshot", c.at.lsn))
	}
	// The log's: a promotion ends it (pending.go), whatever it was doing.
	prev := sl.ops.own(sl.ops.logOwner())
	sl.startCompaction(c)
	sl.ops.cur = prev
}

// firstSegLimit is the compaction threshold of a standby's first segment
// after it joins: MaxWALRecords (Self+1)/(len(Peers)+1). Standbys that
// follow a primary from the same position (a new cluster, a restart of
// all) would otherwise compact at the very records the primary
// checkpoints at, every time: three writes of the whole state at once on
// a shared disk, which held the WAL's fsyncs, and so every request, for
// up to 850 ms at 1M jobs (docs/performance.md). A shorter first segment
// sets each standby's later compactions apart from the others' and from
// the primary's by a fixed share of the interval.
func (sl *standbyLog) firstSegLimit() int {
	return max(1, sl.opt.MaxWALRecords*(sl.opt.Self+1)/(len(sl.opt.Peers)+1))
}

func (sl *standbyLog) startCompaction(c *compaction) {
	sl.io(FileOp{Op: OpList, Path: wal.SnapDir}, compactStep{kind: compactSnapsListed, c: c})
}

// compactStep is what resumes in a standby checkpoint: the listing of
// data/snap and the read of its newest snapshot, the listing of data/wal
// and the read of each segment after it, one at a time, then the write
// and the removal of what it makes obsolete.
type compactStep struct {
	kind  compactKind
	c     *compaction
	snaps []string      // data/snap, sorted
	snap  []byte        // compactSegsListed: the newest snapshot (nil: none)
	in    *compactInput // compactSegRead: what the snapshot is built from so far
	names []string      // data/wal
	rest  []string      // compactSegRead: the segments still to read, rest[0] the one read
}

type compactKind uint8

const (
	compactSnapsListed   compactKind = iota // data/snap listed: read its newest snapshot
	compactSnapRead                         // the newest snapshot read: list data/wal
	compactSegsListed                       // data/wal listed: read the segments after the snapshot
	compactSegRead                          // a segment read: the next, or build the state
	compactBuilt                            // the state built: keep it, write the snapshot
	compactWritten                          // the snapshot written durably: remove the segments it covers
	compactSegsRemoved                      // those removed: list data/snap
	compactSnapsRelisted                    // data/snap listed: remove the snapshots beyond the newest two
	compactSnapsRemoved                     // those removed: done
)

var compactKindNames = [...]string{
	"data/snap listed", "newest snapshot read", "data/wal listed", "segment read", "state built", "snapshot written",
	"covered segments removed", "data/snap listed again", "old snapshots removed",
}

func (s compactStep) String() string {
	what := "standby checkpoint"
	if s.c.advance {
		what = "standby advance"
	}
	if s.kind == compactSegRead {
		return fmt.Sprintf("%s at lsn %d: %s %s/%s (%d left)", what, s.c.at.lsn, compactKindNames[s.kind], wal.WALDir, s.rest[0], len(s.rest)-1)
	}
	return fmt.Sprintf("%s at lsn %d: %s", what, s.c.at.lsn, compactKindNames[s.kind])
}

func (s compactStep) resume(n *Node, r result) {
	c := s.c
	switch s.kind {
	case compactSnapsListed:
		if r.Err != IOOK && r.Err != IONotExist {
			n.sb.compactFailed(c, "list "+wal.SnapDir, r.IODone)
			return
		}
		var snaps []string
		for _, e := range r.Entries {
			snaps = append(snaps, e.Name)
		}
		snaps = wal.SortSnapshots(snaps)
		// No snapshot yet: the state kept is the log's from its start
		// (an advance before the first checkpoint built it).
		newest := ""
		if len(snaps) > 0 {
			newest = snaps[len(snaps)-1]
		}
		if base := n.sb.takeBase(newest); base != nil || len(snaps) == 0 {
			n.sb.compactFrom(c, snaps, nil, base)
			return
		}
		n.io(FileOp{Op: OpRead, Path: wal.SnapDir + "/" + snaps[len(snaps)-1], MaxSize: maxLogFile, Bulk: true, Background: true}, compactStep{kind: compactSnapRead, c: c, snaps: snaps})
	case compactSnapRead:
		if r.Err != IOOK {
			n.sb.compactFailed(c, "read "+wal.SnapDir+"/"+s.snaps[len(s.snaps)-1], r.IODone)
			return
		}
		n.sb.compactFrom(c, s.snaps, r.Data, nil)
	case compactSegsListed:
		n.sb.compactSegsListed(s, r.IODone)
	case compactSegRead:
		path := wal.WALDir + "/" + s.rest[0]
		if r.Err != IOOK {
			n.sb.compactFailed(c, "read "+path, r.IODone)
			return
		}
		s.in.segs, s.in.paths = append(s.in.segs, r.Data), append(s.in.paths, path)
		s.rest = s.rest[1:]
		n.sb.compactRead(s)
	case compactBuilt:
		c.build = nil
		if r.Err != IOOK {
			n.sb.compactFailed(c, "build the state at lsn "+fmt.Sprint(c.at.lsn), r.IODone)
			return
		}
		n.sb.compactBuilt(c, s.names, s.in)
	case compactWritten:
		if r.failed != "" {
			n.sb.compactFailed(c, r.failed, r.IODone)
			return
		}
		n.sb.compactWritten(c, s.names, s.in)
	case compactSegsRemoved:
		n.run(listOps(wal.SnapDir, "fatal.recovery"), compactStep{kind: compactSnapsRelisted, c: c})
	case compactSnapsRelisted:
		n.run(removeOps(prefixAll(wal.SnapDir, wal.ObsoleteSnapshots(r.names(), 2)), wal.SnapDir, "wal.remove-failed", ""), compactStep{kind: compactSnapsRemoved, c: c})
	case compactSnapsRemoved:
		n.sb.compactDone(c, "snapshot "+wal.SnapshotPath(c.at.lsn)+" written")
	}
}

// compactFrom reads the segments after the snapshot snap (nil: none, or
// base holds its state) and writes the compacted snapshot. Nothing here is proportional to the
// number of jobs: the reads are the executor's, and the rebuild and the
// encoding run in the ComputeEncodeTo's Encode, on the executor's compute
// lane.
func (sl *standbyLog) compactFrom(c *compaction, snaps []string, snap []byte, base *compactBase) {
	if c.advance && base != nil && base.at.lsn >= c.at.lsn {
		sl.ckptBase = base // nothing since: it stays as it is
		sl.compactDone(c, "")
		return
	}
	if len(snaps) > 0 {
		if lsn, _ := wal.ParseSnapshotName(snaps[len(snaps)-1]); lsn >= c.at.lsn {
			sl.compactDone(c, "nothing to compact")
			return
		}
	}
	c.base = base
	sl.io(FileOp{Op: OpList, Path: wal.WALDir}, compactStep{kind: compactSegsListed, c: c, snaps: snaps, snap: snap})
}

// compactSegsListed plans the segments to read after the snapshot and
// reads them.
func (sl *standbyLog) compactSegsListed(s compactStep, d IODone) {
	c := s.c
	if d.Err != IOOK {
		sl.compactFailed(c, "list "+wal.WALDir, d)
		return
	}
	var names []string
	for _, e := range d.Entries {
		names = append(names, e.Name)
	}
	plan, err := wal.PlanRecovery(s.snaps, names)
	if err != nil {
		sl.compactRefused(c, err.Error())
		return
	}
	segs := plan.Segments
	if c.base != nil {
		segs = segs[len(wal.Obsolete(segs, c.base.at.lsn)):] // those before an advance's state
	}
	in := &compactInput{cfg: sl.conf.cfgDecoded(), cfgSum: sl.conf.cfg.sum, snap: s.snap, base: c.base, upto: c.at}
	sl.compactRead(compactStep{kind: compactSegRead, c: c, in: in, names: names, rest: segmentsUpTo(segs, c.at.lsn)})
}

// segmentsUpTo drops the segments that start after lsn: the one the
// standby appends to since the checkpoint began holds nothing it covers,
// and its bulk read would run beside those appends (FileOp.Bulk).
func segmentsUpTo(segs []string, lsn uint64) []string {
	for i, name := range segs {
		if first, ok := wal.ParseSegmentName(name); ok && first > lsn {
			return segs[:i]
		}
	}
	return segs
}

// compactRead reads s.rest[0], or writes the snapshot once all are read.
func (sl *standbyLog) compactRead(s compactStep) {
	if len(s.rest) == 0 {
		sl.writeCompaction(s.c, s.in, s.names)
		return
	}
	sl.io(FileOp{Op: OpRead, Path: wal.WALDir + "/" + s.rest[0], MaxSize: maxLogFile, Bulk: true, Background: true}, s)
}

// compactInput is what a standby checkpoint rebuilds its snapshot from:
// all of it read already, none of it shared with the node.
type compactInput struct {
	cfg    *schema.ClusterConfig
	cfgSum [32]byte
	snap   []byte       // the newest snapshot file; nil: none, or base
	base   *compactBase // the newest snapshot's state, kept from the checkpoint that wrote it
	built  *compactBase // build's: the state it built, for the next checkpoint
	failed error        // build's: why it could not
	jobs   int          // estimate's
	segs   [][]byte     // the segments after it, oldest first
	paths  []string
	upto   logPos // the snapshot to build: the log up to here
}

// encode is the snapshot at upto of the state build rebuilds.
func (in *compactInput) encode() ([]byte, error) {
	q, err := in.build()
	if err != nil {
		return nil, err
	}
	return encodeView(q.View(), in.upto.lsn, in.upto.term)
}

// build rebuilds the state as recovery would — the snapshot (or the
// state kept from the checkpoint that wrote it), then the records after
// it up to upto. It builds once: a second call (the simulator encodes
// each snapshot twice, to check it unchanged) has the state it built.
func (in *compactInput) build() (*queue.Queues, error) {
	if in.failed != nil {
		return nil, in.failed
	}
	if in.built != nil {
		return in.built.q, nil
	}
	q, err := in.rebuild()
	if err != nil {
		in.failed = err // the base, if any, is half replayed
		return nil, err
	}
	in.built = &compactBase{q: q, at: in.upto, cfg: in.cfgSum}
	return q, nil
}

// rebuild is build's work, done once.
func (in *compactInput) rebuild() (*queue.Queues, error) {
	r := newRouter(in.cfg)
	q, from := queue.New(), uint64(0)
	if b := in.base; b != nil {
		q, from = b.q, b.at.lsn
	} else if in.snap != nil {
		var err error
		if q, from, _, err = importSnapshot(in.snap, r); err != nil {
			return nil, fmt.Errorf("our newest snapshot does not load: %w", err)
		}
	}
	next := from + 1
	for i, data := range in.segs {
		var why string
		_, err := wal.Walk(data, func(_ int, rec *schema.WalRecord) error {
			switch lsn := rec.GetLsn(); {
			case lsn < next || lsn > in.upto.lsn:
				return nil
			case lsn != next:
				why = fmt.Sprintf("%s skips from lsn %d to %d", in.paths[i], next-1, lsn)
				return errStop
			case lsn == in.upto.lsn && rec.GetTerm() != in.upto.term:
				why = fmt.Sprintf("our record at lsn %d has term %d, our log position says %d", lsn, rec.GetTerm(), in.upto.term)
				return errStop
			}
			_ = replayApply(q, r, rec) // refused records are skipped, as recovery does
			next++
			return nil
		})
		switch {
		case why != "":
			return nil, errors.New(why)
		case err != nil && next <= in.upto.lsn:
			return nil, fmt.Errorf("%s: %w", in.paths[i], err)
		}
	}
	if next <= in.upto.lsn {
		return nil, fmt.Errorf("our segments end before lsn %d", in.upto.lsn)
	}
	return q, nil
}

// estimate sets how many jobs the snapshot will hold, about: those of the
// base and one per 256 bytes read. It runs before the build, which then
// owns the base.
func (in *compactInput) estimate() {
	n := len(in.snap)
	for _, d := range in.segs {
		n += len(d)
	}
	in.jobs = n / 256
	if in.base != nil {
		in.jobs += in.base.q.Len()
	}
}

// writeCompaction has the executor build the state the snapshot holds
// (ComputeBuild), then writes it (compactBuilt).
func (sl *standbyLog) writeCompaction(c *compaction, in *compactInput, names []string) {
	in.estimate()
	c.base = nil // the build's from now on: it replays onto it
	id := sl.compute(Compute{Kind: ComputeBuild, Snapshot: &SnapshotData{compact: in}}, compactStep{kind: compactBuilt, c: c, names: names, in: in})
	c.build = &stateBuild{id: id, in: in}
}

// compactBuilt: the state at c.at is built. The standby keeps it at once
// and the executor encodes a view of it into the snapshot file, written
// durably; then what it makes obsolete goes. Kept while the snapshot is
// encoded and written (seconds at 1M jobs), it is what a promotion then
// recovers from, with the records after c.at replayed: built into the
// encode instead, the state was the compute's until the write ended, and
// a promotion meanwhile read and imported the newest snapshot from disk
// behind the encode on the compute lane (kill -9 to serving 6.9–10.1 s
// at 1M jobs, docs/performance.md). The view is copy on write: a
// promoted node's changes do not reach the encode.
func (sl *standbyLog) compactBuilt(c *compaction, names []string, in *compactInput) {
	sl.ckptBase = in.built
	if c.advance {
		sl.log(Debug, "repl.advanced", fmt.Sprintf("standby: its kept state advanced to lsn %d", c.at.lsn))
		sl.compactDone(c, "")
		return
	}
	sl.log(Info, "repl.compact-built", fmt.Sprintf("standby checkpoint at lsn %d: state built, writing its snapshot", c.at.lsn))
	path := wal.SnapshotPath(c.at.lsn)
	tmp := wal.SnapDir + "/" + wal.SnapshotTempName(c.at.lsn)
	snap := &SnapshotData{view: in.built.q.View(), lsn: c.at.lsn, term: c.at.term}
	sl.replaceComputed(Compute{Kind: ComputeEncodeTo, Path: tmp, Snapshot: snap}, path, wal.SnapDir, compactStep{kind: compactWritten, c: c, names: names, in: in})
}

// compactWritten: the snapshot is durable, and the state in built holds
// what it holds; the segments it covers go.
func (sl *standbyLog) compactWritten(c *compaction, names []string, in *compactInput) {
	sl.ckptBase = in.built
	// The segment appends roll to may not exist yet: count it, so
	// the one before it, wholly covered, goes too.
	if next := wal.SegmentName(c.at.lsn + 1); !slices.Contains(names, next) {
		names = append(names, next)
	}
	sl.run(removeOps(prefixAll(wal.WALDir, wal.Obsolete(names, c.at.lsn)), wal.WALDir, "wal.remove-failed", ""), compactStep{kind: compactSegsRemoved, c: c})
}

// compactRefused: the log cannot be compacted from what is on disk; a
// snapshot from the primary compacts it instead.
func (sl *standbyLog) compactRefused(c *compaction, why string) {
	sl.log(Warn, "repl.compact-refused", "standby checkpoint: "+why+" — asking the primary for a snapshot")
	sl.wantSnapshot = true
	c.thenJoin = true
	sl.compactDone(c, "")
}

func (sl *standbyLog) compactFailed(c *compaction, what string, d IODone) {
	sl.compactRefused(c, fmt.Sprintf("%s failed: %s %s", what, d.Err, d.Detail))
}

// compactDone ends the compaction and lets what waited for it run.
func (sl *standbyLog) compactDone(c *compaction, what string) {
	sl.compact = nil
	if what != "" {
		sl.log(Info, "repl.compacted", fmt.Sprintf("standby checkpoint at lsn %d: %s", c.at.lsn, what))
	}
	if sl.startReady() {
		return
	}
	if c.thenJoin && sl.role == RoleStandby {
		sl.resync()
	}
}
