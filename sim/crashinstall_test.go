package sim

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// TestCrashInstallEnumeration: a standby with a log of its own (term 1,
// LSNs 1..20, in one segment or several) installs its new primary's
// snapshot of another history (term 2, LSN 12). After every file operation
// of the install, every dependency-closed crash state of its disk
// (simdisk.CrashStates) is booted as a one-node cluster and recovered: the
// job state is the old log's (or, once its segments wholly after the
// snapshot are going, newest first, a prefix of it ending at a segment
// boundary) or the snapshot's, never a splice of the snapshot with the old
// log's later records, and the boot-time log position matches what
// recovery rebuilt. With a segment wholly after the snapshot's LSN, the
// install used to remove the one holding that LSN first: a crash then left
// the snapshot and a later segment with a gap between them, which recovery
// can only call corruption (found by the simulator, seed 201878).
func TestCrashInstallEnumeration(t *testing.T) {
	for _, starts := range [][]uint64{{1}, {1, 15}, {1, 6, 15, 18}} {
		t.Run(fmt.Sprint(starts), func(t *testing.T) { crashInstall(t, starts) })
	}
}

// crashInstall runs the enumeration with the old log in segments starting
// at starts.
func crashInstall(t *testing.T, starts []uint64) {
	cfg, base := crashBase(t)
	var err error
	var old []*schema.WalRecord
	segs := map[uint64][]byte{}
	first := uint64(0)
	for l := uint64(1); l <= 20; l++ {
		if slices.Contains(starts, l) {
			first = l
		}
		r := enqueueRecord(l, 1, fmt.Sprintf("old-%d", l))
		old = append(old, r)
		if segs[first], err = wal.AppendFrame(segs[first], r); err != nil {
			t.Fatal(err)
		}
	}
	if err := base.PutDurable(sm.TermPath, []byte("1\n"), epoch); err != nil {
		t.Fatal(err)
	}
	for f, b := range segs {
		if err := base.PutDurable(wal.SegmentPath(f), b, epoch); err != nil {
			t.Fatal(err)
		}
	}
	var fresh []*schema.WalRecord
	for l := uint64(1); l <= 12; l++ {
		fresh = append(fresh, enqueueRecord(l, 2, fmt.Sprintf("new-%d", l)))
	}
	q, _ := sm.ReplayRecords(cfg, fresh)
	snap, err := wal.EncodeSnapshot(sm.SnapshotOf(q, 12, 2))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{payloadSet(t, cfg, old): true, payloadSet(t, cfg, fresh): true}
	if len(want) != 2 || want[""] {
		t.Fatalf("test logs do not replay to two distinct, non-empty states: %v", want)
	}
	for _, f := range starts {
		if f > 12 { // a segment wholly after the snapshot: the old log without it
			want[payloadSet(t, cfg, old[:f-1])] = true
		}
	}

	d := newDriver(t, 1, base.Clone())
	d.feed(sm.Boot{Seed: 7})
	primary := sm.Msg{Role: sm.RolePrimary, Term: 2, Priority: 0}
	m := primary
	m.Type = sm.MsgHeartbeat
	d.feed(sm.Recv{From: 0, Msg: m})
	if d.node.Role() != sm.RoleStandby {
		t.Fatalf("node is %s, want a standby of n0", d.node.Role())
	}
	states, points := 0, 0
	d.onOp = func(op sm.FileOp) {
		points++
		for _, st := range d.disk.CrashStates() {
			states++
			got, pos, problem := recoverSolo(t, st)
			if problem != "" {
				t.Fatalf("after %s %s (crash point %d): %s\ndisk:\n%s", op.Op, op.Path, points, problem, st)
			}
			if !want[got] {
				t.Fatalf("after %s %s (crash point %d): recovered jobs %s — neither the old log nor the snapshot\ndisk:\n%s", op.Op, op.Path, points, got, st)
			}
			if strings.Contains(got, "new-") != (pos.term == 2) {
				t.Fatalf("after %s %s (crash point %d): boot-time log position %+v but recovered %s", op.Op, op.Path, points, pos, got)
			}
		}
	}
	m = primary
	m.Type, m.ReqID, m.Bytes = sm.MsgReplSnapshot, 1, snap // one chunk: the whole file
	m.Total, m.PrevLSN, m.PrevTerm = uint64(len(snap)), 12, 2
	d.feed(sm.Recv{From: 0, Msg: m})
	if tm, l := d.node.LogPosition(); tm != 2 || l != 12 {
		t.Fatalf("install did not complete: log position (%d, %d), logs %v", tm, l, d.logs)
	}
	t.Logf("%d crash states over %d crash points: each recovers the old log or the snapshot", states, points)
	if points < 8 || states < points {
		t.Fatalf("enumeration too small: %d states, %d points", states, points)
	}
}

type logPosOf struct{ term, lsn uint64 }

// recoverSolo boots disk as a one-node cluster (it promotes at once and
// recovers) and returns its job payloads, its boot-time log position and
// any FATAL.
func recoverSolo(t *testing.T, disk *simdisk.Disk) (string, logPosOf, string) {
	t.Helper()
	n, err := sm.NewNode(sm.DefaultOptions(0, []string{"solo"}))
	if err != nil {
		t.Fatal(err)
	}
	d := &ioDriver{t: t, node: n, disk: disk}
	var pos logPosOf
	seen := false
	d.onOp = func(sm.FileOp) {
		if !seen && n.Role() == sm.RolePrimary {
			seen = true
		}
		if !seen {
			pos.term, pos.lsn = n.LogPosition()
		}
	}
	d.feed(sm.Boot{Seed: 3})
	if d.exit != nil {
		return "", pos, "FATAL: " + d.exit.Reason
	}
	q, _, ok := n.JobState()
	if !ok {
		return "", pos, "no job state recovered"
	}

	var ps []string
	for _, j := range q.List("") {
		ps = append(ps, string(j.Payload))
	}
	sort.Strings(ps)
	return strings.Join(ps, ","), pos, ""
}

func payloadSet(t *testing.T, cfg *schema.ClusterConfig, recs []*schema.WalRecord) string {
	t.Helper()
	q, _ := sm.ReplayRecords(cfg, recs)
	var ps []string
	for _, j := range q.List("") {
		ps = append(ps, string(j.Payload))
	}
	sort.Strings(ps)
	return strings.Join(ps, ",")
}
