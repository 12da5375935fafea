package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// Crash-state enumeration of the WAL's durable sequences (issue 7 B5): the
// segment roll, the checkpoint with removal of old segments and snapshots,
// and recovery's rewrite of a torn tail. After every file operation, every
// dependency-closed crash state of the disk (simdisk.CrashStates) is
// recovered as a one-node primary, and the state it recovers must be a
// legal one: no FATAL, every acknowledged record there, and the jobs
// exactly those of a prefix of the log that was written (nothing lost in
// the middle, nothing invented), at the LSN that prefix ends at, with the
// boot-time log position (what the node would claim in an election) equal
// to what recovery rebuilt.

// walRecovery is what recovering one crash state gave.
type walRecovery struct {
	jobs      map[string]uint64 // payload -> job id
	pos       logPosOf          // the boot-time log position, before promotion
	recovered uint64            // the LSN recovery ended at
	fatal     string
}

// recoverWAL boots disk as a one-node cluster with options o (it promotes
// at once and recovers) and reports what it rebuilt.
func recoverWAL(t *testing.T, disk *simdisk.Disk, o sm.Options) walRecovery {
	t.Helper()
	n, err := sm.NewNode(o)
	if err != nil {
		t.Fatal(err)
	}
	d := &ioDriver{t: t, node: n, disk: disk}
	var r walRecovery
	promoted := false
	d.onOp = func(sm.FileOp) {
		promoted = promoted || n.Role() == sm.RolePrimary
		if !promoted {
			r.pos.term, r.pos.lsn = n.LogPosition()
		}
	}
	d.feed(sm.Boot{Seed: 3})
	if d.exit != nil {
		r.fatal = "FATAL: " + d.exit.Reason
		return r
	}
	q, _, ok := n.JobState()
	if !ok {
		r.fatal = "no job state recovered"
		return r
	}
	r.jobs = map[string]uint64{}
	for _, j := range q.List("") {
		r.jobs[string(j.Payload)] = j.ID
	}
	r.recovered = n.RecoveredLSN()
	return r
}

func soloOptions(repair bool) sm.Options {
	o := sm.DefaultOptions(0, []string{"solo"})
	o.MaxWALRecords = 100 // the minimum: rolls and checkpoints every 100 records
	o.WALRepair = repair
	return o
}

// walLog is a log under test: base records already durable before the
// node under test booted (their payloads, LSNs 1..len(base)), then the
// first recovery's no-op, then the enqueues the test issues, in order.
type walLog struct {
	base   []string
	issued []string          // enqueue payloads in the order the node applied them
	ids    map[string]uint64 // acknowledged enqueues: payload -> job id
	seen   int               // replies noted
	acked  int               // the acknowledged enqueues are issued[:acked]
	opt    sm.Options
	points int
	states int
}

func has(m map[string]uint64, k string) bool { _, ok := m[k]; return ok }

// check recovers every crash state of disk and fails the test on the first
// illegal one; where names the crash point.
func (l *walLog) check(t *testing.T, disk *simdisk.Disk, where string) {
	t.Helper()
	l.points++
	for _, st := range disk.CrashStates() {
		l.states++
		if msg := l.judge(t, st.Clone()); msg != "" {
			t.Fatalf("%s (crash point %d): %s\ndisk:\n%s", where, l.points, msg, st)
		}
	}
}

// judge is the legality of one crash state's recovery ("" if legal).
func (l *walLog) judge(t *testing.T, st *simdisk.Disk) string {
	t.Helper()
	r := recoverWAL(t, st, l.opt)
	if r.fatal != "" {
		return r.fatal
	}
	for _, p := range l.base {
		if _, ok := r.jobs[p]; !ok {
			return fmt.Sprintf("record %s, durable before the node booted, lost (recovered %d jobs)", p, len(r.jobs))
		}
	}
	k := 0
	for k < len(l.issued) && has(r.jobs, l.issued[k]) {
		k++
	}
	if k < l.acked {
		return fmt.Sprintf("acknowledged job %s lost (recovered the first %d of %d acknowledged enqueues)", l.issued[k], k, l.acked)
	}
	for _, p := range l.issued[k:] {
		if has(r.jobs, p) {
			return fmt.Sprintf("recovered %s but not %s logged before it: not a prefix of the log", p, l.issued[k])
		}
	}
	if len(r.jobs) != len(l.base)+k {
		return fmt.Sprintf("recovered %d jobs, the log's prefix has %d: %v", len(r.jobs), len(l.base)+k, r.jobs)
	}
	for _, p := range l.issued[:k] {
		if id, ok := l.ids[p]; ok && r.jobs[p] != id {
			return fmt.Sprintf("job %s recovered with id %d, acknowledged with id %d", p, r.jobs[p], id)
		}
	}
	b := uint64(len(l.base))
	want := []uint64{b + 1 + uint64(k)} // the no-op and k enqueues after the base
	if k == 0 {
		want = append(want, b) // the no-op may be lost too
	}
	if r.recovered != want[0] && (len(want) == 1 || r.recovered != want[1]) {
		return fmt.Sprintf("recovery ended at lsn %d, but the %d jobs recovered are the log's prefix up to lsn %v", r.recovered, len(r.jobs), want)
	}
	if r.pos.lsn != r.recovered {
		return fmt.Sprintf("boot-time log position %+v, but recovery rebuilt the log up to lsn %d", r.pos, r.recovered)
	}
	return ""
}

// drive runs count enqueues of payloads prefix+i on d in bursts of 10 (the
// first nine queued, so appends overlap writes and checkpoints) and
// records the acknowledgements in l.
func (l *walLog) drive(t *testing.T, d *ioDriver, prefix string, count int) {
	t.Helper()
	for i := 0; i < count; i++ {
		op := l.enqueue(fmt.Sprintf("%s%d", prefix, i))
		if i%10 != 9 && i != count-1 {
			d.queue = append(d.queue, op)
			continue
		}
		d.feed(op)
	}
	if len(d.replies) != len(l.issued) {
		t.Fatalf("%d replies to %d enqueues; logs %v", len(d.replies), len(l.issued), d.logs)
	}
	l.noteReplies(d)
	l.check(t, d.disk, "at the end") // the replies after the last file operation
}

// enqueue is the next enqueue of payload p (the node applies inputs in
// the order they are queued, so l.issued is the log's order).
func (l *walLog) enqueue(p string) sm.ClientOp {
	l.issued = append(l.issued, p)
	return sm.ClientOp{ID: uint64(len(l.issued)), Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte(p)}}
}

// noteReplies records the acknowledgements among d's replies so far (an
// enqueue is acknowledged when its OK reply leaves: the crash points after
// it must keep it).
func (l *walLog) noteReplies(d *ioDriver) {
	if l.ids == nil {
		l.ids = map[string]uint64{}
	}
	for _, r := range d.replies[l.seen:] {
		l.seen++
		if r.Status != sm.StatusOK || !r.OK || len(r.Jobs) != 1 {
			continue
		}
		l.ids[string(r.Jobs[0].Payload)] = r.Jobs[0].ID
	}
	l.acked = 0
	for l.acked < len(l.issued) && has(l.ids, l.issued[l.acked]) {
		l.acked++
	}
}

// startSolo boots a one-node primary on disk; every file operation from
// then on is a crash point judged by l (enumerate may narrow that).
func (l *walLog) startSolo(t *testing.T, disk *simdisk.Disk, enumerate func(*ioDriver, sm.FileOp) bool) *ioDriver {
	t.Helper()
	n, err := sm.NewNode(l.opt)
	if err != nil {
		t.Fatal(err)
	}
	d := &ioDriver{t: t, node: n, disk: disk}
	d.onOp = func(op sm.FileOp) {
		l.noteReplies(d)
		if enumerate == nil || enumerate(d, op) {
			l.check(t, d.disk, fmt.Sprintf("after %s %s", op.Op, op.Path))
		}
	}
	d.feed(sm.Boot{Seed: 7})
	if _, _, ok := n.JobState(); !ok || d.exit != nil {
		t.Fatalf("solo node did not recover: exit %+v, logs %v", d.exit, d.logs)
	}
	return d
}

func countLogs(d *ioDriver, key string) int {
	c := 0
	for _, l := range d.logs {
		if l.Key == key {
			c++
		}
	}
	return c
}

// durableNames lists the durable files of disk under dir.
func durableNames(disk *simdisk.Disk, dir string) []string {
	var out []string
	for p := range disk.DurableFiles() {
		if strings.HasPrefix(p, dir+"/") {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
	}
	return out
}

// TestCrashSegmentRollEnumeration: a one-node primary acknowledges 130
// enqueues; at 100 records in the segment it rolls to a new one (the
// checkpoint's trigger) while the records keep coming, so the new
// segment's first appends — a file created, fsync'd, its directory
// fsync'd — race the snapshot's writes. Every crash state of every point
// recovers a legal prefix holding every acknowledged enqueue.
func TestCrashSegmentRollEnumeration(t *testing.T) {
	disk := simdisk.New()
	mustProvision(t, disk, sampleConfig(1, 3), epoch)
	l := &walLog{opt: soloOptions(false)}
	rolled := 0 // crash points with the new segment's entry not yet durable
	d := l.startSolo(t, disk.Clone(), func(d *ioDriver, op sm.FileOp) bool {
		if op.Op == sm.OpAppend && op.Path != wal.SegmentPath(1) {
			if _, ok := d.disk.DurableFile(op.Path); !ok {
				rolled++
			}
		}
		return true
	})
	l.drive(t, d, "j", 130)
	segs := durableNames(d.disk, wal.WALDir)
	t.Logf("%d crash states over %d crash points (%d with the new segment not yet durable); segments at the end %v", l.states, l.points, rolled, segs)
	if countLogs(d, "wal.checkpoint") != 1 || rolled == 0 || !contains(segs, wal.SegmentName(102)) {
		t.Fatalf("the log did not roll to segment %s (checkpoints %d, segments %v)", wal.SegmentName(102), countLogs(d, "wal.checkpoint"), segs)
	}
}

// TestCrashCheckpointEnumeration: 320 enqueues, three checkpoints, each a
// snapshot written (tmp, fsync, rename, directory fsync) and then the old
// segments and all but the newest two snapshots unlinked (directory fsync
// after each); three more enqueues arrive while each snapshot is written,
// so the first checkpoint already removes the first segment (the only
// copy of its records but the new snapshot). Only the checkpoints' crash points are enumerated (from the
// checkpoint's start to its last directory fsync): every crash state
// recovers a legal prefix holding every acknowledged enqueue, whichever
// unlinks and renames survived.
func TestCrashCheckpointEnumeration(t *testing.T) {
	disk := simdisk.New()
	mustProvision(t, disk, sampleConfig(1, 3), epoch)
	l := &walLog{opt: soloOptions(false)}
	removals, during := 0, 0
	d := l.startSolo(t, disk.Clone(), func(d *ioDriver, op sm.FileOp) bool {
		if op.Op == sm.OpRemove {
			removals++
		}
		if op.Op == sm.OpWrite && strings.HasPrefix(op.Path, wal.SnapDir+"/") {
			// Clients keep writing while the snapshot is written: the new
			// segment exists before the old ones are listed for removal.
			for i := 0; i < 3; i++ {
				during++
				d.queue = append(d.queue, l.enqueue(fmt.Sprintf("c%d", during)))
			}
		}
		return d.node.CheckpointInProgress() || op.Op == sm.OpRemove || op.Op == sm.OpFsyncDir && op.Path == wal.SnapDir
	})
	l.drive(t, d, "j", 320)
	segs, snaps := durableNames(d.disk, wal.WALDir), durableNames(d.disk, wal.SnapDir)
	t.Logf("%d crash states over %d crash points, %d checkpoints, %d unlinks; at the end segments %v, snapshots %v", l.states, l.points, countLogs(d, "wal.checkpoint"), removals, segs, snaps)
	if countLogs(d, "wal.checkpoint") < 3 || len(snaps) != 2 || contains(segs, wal.SegmentName(1)) || removals < 3 {
		t.Fatalf("checkpoints did not remove old segments and snapshots: %d checkpoints, segments %v, snapshots %v", countLogs(d, "wal.checkpoint"), segs, snaps)
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// tornCase is a log left by a crash: records 1..n in segments (a
// snapshot at snapAt if nonzero), the last segment's tail torn.
type tornCase struct {
	label  string
	n      int
	snapAt int
	tail   func(frame []byte) []byte // what follows the last valid record
	split  int                       // nonzero: the records from split on are in a second segment
	repair bool                      // --wal-repair; tail then corrupts a record before later ones
}

// TestCrashTornTailEnumeration: recovery finds a torn tail (half a frame,
// a zeroed sector, garbage; after a snapshot; and, with --wal-repair, a
// corrupt record with later records and a later segment behind it) and
// rewrites the segment without it (tmp, fsync, rename, directory fsync),
// removes what follows, then logs its no-op to a new segment, and the
// node acknowledges 15 enqueues. Every crash state of every point, the
// recovery's own writes included, recovers a legal prefix: every record
// before the tear and every acknowledged enqueue, and never a FATAL (a
// torn segment left in front of the new one would be refused).
func TestCrashTornTailEnumeration(t *testing.T) {
	half := func(f []byte) []byte { return f[:len(f)/2] }
	cases := []tornCase{
		{label: "half a frame", n: 12, tail: half},
		{label: "a zeroed sector", n: 12, tail: func([]byte) []byte { return make([]byte, 512) }},
		{label: "garbage", n: 12, tail: func(f []byte) []byte {
			g := make([]byte, len(f)+7)
			for i := range g {
				g[i] = byte(i*131 + 17)
			}
			return g
		}},
		{label: "after a snapshot at lsn 8", n: 12, snapAt: 8, tail: half},
		// A crash between the rewrite of the torn segment and the removal
		// of the later one leaves an LSN gap between segments, which the
		// boot-time scan must stop at as recovery does.
		{label: "half a frame in the first of two segments (--wal-repair)", n: 12, split: 14, repair: true, tail: half},
	}
	total, totalPoints := 0, 0
	for _, c := range cases {
		disk, base := tornDisk(t, c)
		l := &walLog{opt: soloOptions(c.repair), base: base}
		if msg := l.judge(t, disk.Clone()); msg != "" {
			t.Fatalf("%s: the log as left by the crash does not recover: %s", c.label, msg)
		}
		d := l.startSolo(t, disk, nil)
		torn, repaired := countLogs(d, "wal.torn-tail"), countLogs(d, "wal.repair")
		if torn+repaired == 0 {
			t.Fatalf("%s: recovery found no torn tail; logs %v", c.label, d.logs)
		}
		l.drive(t, d, "e", 15)
		t.Logf("%s: %d crash states over %d crash points", c.label, l.states, l.points)
		total += l.states
		totalPoints += l.points
		for p, b := range d.disk.DurableFiles() {
			if strings.HasPrefix(p, wal.WALDir+"/") {
				if n, err := wal.Walk(b, func(int, *schema.WalRecord) error { return nil }); err != nil || n != len(b) {
					t.Fatalf("%s: after recovery %s still ends in a bad tail at %d of %d bytes (%v)", c.label, p, n, len(b), err)
				}
			}
		}
	}
	if totalPoints < 40 {
		t.Fatalf("enumeration too small: %d points", totalPoints)
	}
}

// tornDisk builds the disk of c: config, data/term, the log; it returns
// the payloads of the records a recovery must keep.
func tornDisk(t *testing.T, c tornCase) (*simdisk.Disk, []string) {
	t.Helper()
	blob := sampleConfig(1, 3)
	cfg, err := schema.DecodeClusterConfig(blob)
	if err != nil {
		t.Fatal(err)
	}
	disk := simdisk.New()
	mustProvision(t, disk, blob, epoch)
	rec := func(l int) *schema.WalRecord {
		return enqueueRecord(uint64(l), 1, fmt.Sprintf("t%d", l))
	}
	frame := func(l int) []byte {
		b, err := wal.AppendFrame(nil, rec(l))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	put := func(p string, b []byte) {
		if err := disk.PutDurable(p, b, epoch); err != nil {
			t.Fatal(err)
		}
	}
	put(sm.TermPath, []byte("1\n"))
	first := 1
	if c.snapAt > 0 {
		var recs []*schema.WalRecord
		for l := 1; l <= c.snapAt; l++ {
			recs = append(recs, rec(l))
		}
		q, _ := sm.ReplayRecords(cfg, recs)
		snap, err := wal.EncodeSnapshot(sm.SnapshotOf(q, uint64(c.snapAt), 1))
		if err != nil {
			t.Fatal(err)
		}
		put(wal.SnapshotPath(uint64(c.snapAt)), snap)
		first = c.snapAt + 1
	}
	var seg []byte
	for l := first; l <= c.n; l++ {
		seg = append(seg, frame(l)...)
	}
	keep := c.n
	seg = append(seg, c.tail(frame(c.n+1))...)
	if c.split > 0 {
		// Records after the bad frame in the same segment and a later
		// segment: without --wal-repair recovery refuses this (by design).
		for l := c.n + 2; l < c.split; l++ {
			seg = append(seg, frame(l)...)
		}
		var later []byte
		for l := c.split; l < c.split+3; l++ {
			later = append(later, frame(l)...)
		}
		put(wal.SegmentPath(uint64(c.split)), later)
	}
	put(wal.SegmentPath(uint64(first)), seg)
	var base []string
	for l := 1; l <= keep; l++ {
		base = append(base, fmt.Sprintf("t%d", l))
	}
	return disk, base
}
