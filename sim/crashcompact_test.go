package sim

import (
	"fmt"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// TestCrashCompactEnumeration: a standby whose log holds LSNs 1..150
// catches up 110 more records from its primary in one message, so its
// current segment passes max_wal_records (100) and it compacts its own log
// into a snapshot (compact.go). After every file operation, every
// dependency-closed crash state of its disk is booted as a one-node
// cluster and recovered: it holds a prefix of the 260 records at least as
// long as the standby had acknowledged (never less, never a FATAL), and
// at the end the disk holds the snapshot at 260 and not the old segment.
func TestCrashCompactEnumeration(t *testing.T) {
	cfg, base := crashBase(t)
	var err error
	var recs []*schema.WalRecord
	var seg, more []byte
	for l := uint64(1); l <= 260; l++ {
		r := enqueueRecord(l, 1, fmt.Sprintf("r%03d", l))
		recs = append(recs, r)
		if l <= 150 {
			seg, err = wal.AppendFrame(seg, r)
		} else {
			more, err = wal.AppendFrame(more, r)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for p, b := range map[string][]byte{sm.TermPath: []byte("1\n"), wal.SegmentPath(1): seg} {
		if err := base.PutDurable(p, b, epoch); err != nil {
			t.Fatal(err)
		}
	}
	prefix := map[string]int{}
	for k := 150; k <= 260; k++ {
		prefix[payloadSet(t, cfg, recs[:k])] = k
	}

	o := sm.DefaultOptions(1, []string{"n0", "n1", "n2"})
	o.MaxWALRecords = 100
	n, err := sm.NewNode(o)
	if err != nil {
		t.Fatal(err)
	}
	d := &ioDriver{t: t, node: n, disk: base.Clone()}
	d.feed(sm.Boot{Seed: 7})
	primary := sm.Msg{Role: sm.RolePrimary, Term: 1, Priority: 0}
	m := primary
	m.Type = sm.MsgHeartbeat
	d.feed(sm.Recv{From: 0, Msg: m})
	if tm, l := n.LogPosition(); n.Role() != sm.RoleStandby || tm != 1 || l != 150 {
		t.Fatalf("node is %s at (%d, %d), want a standby of n0 at (1, 150)", n.Role(), tm, l)
	}
	acked := func() int {
		a := 150
		for _, s := range d.sent {
			if s.Msg.Type == sm.MsgReplAck && s.Msg.ReqID == 1 {
				a = max(a, int(s.Msg.WALPos))
			}
		}
		return a
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
			k, ok := prefix[got]
			if !ok || k < acked() {
				t.Fatalf("after %s %s (crash point %d): recovered %d records (a prefix: %v), but %d were acknowledged\ndisk:\n%s", op.Op, op.Path, points, k, ok, acked(), st)
			}
			if pos.lsn != uint64(k) {
				t.Fatalf("after %s %s (crash point %d): boot-time log position %+v, recovery rebuilt %d records", op.Op, op.Path, points, pos, k)
			}
		}
	}
	m = primary
	m.Type, m.ReqID, m.CatchUp, m.PrevLSN, m.PrevTerm, m.Bytes = sm.MsgReplRecords, 1, true, 150, 1, more
	d.feed(sm.Recv{From: 0, Msg: m})
	compacted := false
	for _, l := range d.logs {
		compacted = compacted || l.Key == "repl.compacted"
	}
	if !compacted || acked() != 260 {
		t.Fatalf("no standby checkpoint after 110 records (acked %d); logs %v", acked(), d.logs)
	}
	if _, ok := d.disk.Clone().ReadFile(wal.SnapshotPath(260)); !ok {
		t.Fatalf("no snapshot at lsn 260 after the standby checkpoint:\n%s", d.disk)
	}
	if _, ok := d.disk.Clone().ReadFile(wal.SegmentPath(1)); ok {
		t.Fatalf("the segment the snapshot covers was not removed:\n%s", d.disk)
	}
	t.Logf("%d crash states over %d crash points: each recovers every acknowledged record", states, points)
	if points < 10 || states < points {
		t.Fatalf("enumeration too small: %d states, %d points", states, points)
	}
}
