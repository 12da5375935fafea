package sim

import (
	"fmt"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// TestCrashTruncateEnumeration: a standby's log holds LSNs 1..8 of term 1,
// which its new primary (term 3) also holds, then a divergent suffix 9..30
// of term 2 in three segments. Told that the logs agree up to (term 1,
// lsn 8), it cuts the suffix off. After every file operation of the cut,
// every dependency-closed crash state of its disk is booted as a one-node
// cluster and recovered: it holds a prefix of its old log at least 8
// records long (never a gap, a splice or a FATAL), and the cut ends with
// exactly the 8 agreed records on disk.
func TestCrashTruncateEnumeration(t *testing.T) {
	cfg, base := crashBase(t)
	var err error
	var old []*schema.WalRecord
	segs := map[uint64][]byte{}
	first := uint64(1)
	for l := uint64(1); l <= 30; l++ {
		term := uint64(1)
		if l > 8 {
			term = 2
		}
		if l == 13 || l == 21 {
			first = l // segments 1..12, 13..20, 21..30: the cut point is mid-segment
		}
		r := enqueueRecord(l, term, fmt.Sprintf("r%02d", l))
		old = append(old, r)
		if segs[first], err = wal.AppendFrame(segs[first], r); err != nil {
			t.Fatal(err)
		}
	}
	if err := base.PutDurable(sm.TermPath, []byte("2\n"), epoch); err != nil {
		t.Fatal(err)
	}
	for f, b := range segs {
		if err := base.PutDurable(wal.SegmentPath(f), b, epoch); err != nil {
			t.Fatal(err)
		}
	}
	prefix := map[string]int{} // recovered payloads -> the prefix length they are
	for k := 8; k <= 30; k++ {
		prefix[payloadSet(t, cfg, old[:k])] = k
	}
	if len(prefix) != 23 {
		t.Fatalf("prefixes do not replay to distinct states: %d", len(prefix))
	}

	d := newDriver(t, 1, base.Clone())
	d.feed(sm.Boot{Seed: 7})
	primary := sm.Msg{Role: sm.RolePrimary, Term: 3, Priority: 0}
	m := primary
	m.Type = sm.MsgHeartbeat
	d.feed(sm.Recv{From: 0, Msg: m})
	if tm, l := d.node.LogPosition(); d.node.Role() != sm.RoleStandby || tm != 2 || l != 30 {
		t.Fatalf("node is %s at log position (%d, %d), want a standby of n0 at (2, 30)", d.node.Role(), tm, l)
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
			if !ok {
				t.Fatalf("after %s %s (crash point %d): recovered jobs %s — not a prefix of the old log of 8 or more records\ndisk:\n%s", op.Op, op.Path, points, got, st)
			}
			if pos.lsn != uint64(k) || pos.term != old[k-1].GetTerm() {
				t.Fatalf("after %s %s (crash point %d): boot-time log position %+v, but recovery rebuilt %d records", op.Op, op.Path, points, pos, k)
			}
		}
	}
	m = primary
	m.Type, m.ReqID, m.CatchUp, m.Diverged, m.PrevLSN, m.PrevTerm = sm.MsgReplRecords, 1, true, true, 8, 1
	d.feed(sm.Recv{From: 0, Msg: m})
	if tm, l := d.node.LogPosition(); tm != 1 || l != 8 {
		t.Fatalf("truncation did not complete: log position (%d, %d), logs %v", tm, l, d.logs)
	}
	rejoined := false
	for _, s := range d.sent {
		rejoined = rejoined || s.Msg.Type == sm.MsgJoin && s.Msg.CatchUp && s.Msg.WALPos == 8 && s.Msg.LogTerm == 1
	}
	if !rejoined {
		t.Fatalf("no catch-up join from (term 1, lsn 8) after the cut; sent %v", d.sent)
	}
	got, _, problem := recoverSolo(t, d.disk.Clone())
	if problem != "" || prefix[got] != 8 {
		t.Fatalf("after the cut the disk recovers %q (%s), want the 8 agreed records", got, problem)
	}
	t.Logf("%d crash states over %d crash points: each recovers a prefix of the old log", states, points)
	if points < 8 || states < points {
		t.Fatalf("enumeration too small: %d states, %d points", states, points)
	}
}
