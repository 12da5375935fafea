package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// frames encodes no-op records (LSN, term) as one WAL segment.
func frames(t *testing.T, recs ...[2]uint64) []byte {
	t.Helper()
	var b []byte
	for _, r := range recs {
		var err error
		if b, err = wal.AppendFrame(b, &schema.WalRecord{Lsn: r[0], Term: r[1], Op: &schema.WalRecord_Noop{Noop: &schema.WalNoop{}}}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// chainWorld is the demo's 3-node quorum world with node i's durable log
// set to logs[i] (one segment), nothing run.
func chainWorld(t *testing.T, logs ...[]byte) *World {
	t.Helper()
	w := NewWorld(Demo(1), nil)
	if !w.chainArmed() {
		t.Fatal("the demo does not run in quorum mode")
	}
	for i, l := range logs {
		if err := w.nodes[i].disk.PutDurable(wal.SegmentPath(1), l, epoch); err != nil {
			t.Fatal(err)
		}
		w.durableChanged(w.nodes[i])
	}
	return w
}

func wantViolation(t *testing.T, w *World, prop, detail string) {
	t.Helper()
	switch {
	case w.fail == nil:
		t.Fatalf("no %s violation (want %q)", prop, detail)
	case w.fail.Property != prop || !strings.Contains(w.fail.Detail, detail):
		t.Fatalf("got %s %q, want %s %q", w.fail.Property, w.fail.Detail, prop, detail)
	}
}

func wantNone(t *testing.T, w *World) {
	t.Helper()
	if w.fail != nil {
		t.Fatalf("unexpected violation: %s", w.fail.Error())
	}
}

// TestChainCatchesDivergentLog: a stale tail of an older term may sit at
// a committed LSN; a log that reaches the commit term past it may not.
func TestChainCatchesDivergentLog(t *testing.T) {
	committed := frames(t, [2]uint64{1, 1}, [2]uint64{2, 2})
	w := chainWorld(t, committed, committed, frames(t, [2]uint64{1, 1}, [2]uint64{2, 1}, [2]uint64{3, 1}))
	w.noteCommit(w.nodes[0], sm.Reply{ID: 1, Status: sm.StatusOK, LSN: 2}, 2)
	wantNone(t, w) // n2's (2, term 1) is a deposed primary's tail
	if err := w.nodes[2].disk.PutDurable(wal.SegmentPath(1), frames(t, [2]uint64{1, 1}, [2]uint64{2, 1}, [2]uint64{3, 2}), epoch); err != nil {
		t.Fatal(err)
	}
	w.durableChanged(w.nodes[2])
	wantViolation(t, w, "S5", "n2's durable log holds at committed lsn 2 a record of term 1")
}

// TestChainCatchesMinorityAck: an acknowledgement whose record only one of
// three disks holds fails; so does a disk that later holds another record
// of a newer term at the committed LSN.
func TestChainCatchesMinorityAck(t *testing.T) {
	w := chainWorld(t, frames(t, [2]uint64{1, 1}, [2]uint64{2, 1}), frames(t, [2]uint64{1, 1}), frames(t, [2]uint64{1, 1}))
	w.noteCommit(w.nodes[0], sm.Reply{ID: 1, Status: sm.StatusOK, LSN: 2}, 1)
	wantViolation(t, w, "S5", "while only 1 of 3 disks durably held that record")

	a, b := frames(t, [2]uint64{1, 1}, [2]uint64{2, 1}), frames(t, [2]uint64{1, 1}, [2]uint64{2, 2})
	w = chainWorld(t, a, a, frames(t, [2]uint64{1, 1}))
	w.noteCommit(w.nodes[0], sm.Reply{ID: 1, Status: sm.StatusOK, LSN: 2}, 1)
	wantNone(t, w)
	w.nodes[1].disk.Wipe() // (a disk swap the chain check is told about)
	if err := w.nodes[1].disk.PutDurable(wal.SegmentPath(1), b, epoch); err != nil {
		t.Fatal(err)
	}
	w.durableChanged(w.nodes[1])
	w.noteCommit(w.nodes[2], sm.Reply{ID: 2, Status: sm.StatusOK, LSN: 2}, 2)
	wantViolation(t, w, "S5", "n1's durable log holds at committed lsn 2 a record of term 2")
}

// TestAnswersCatchDeposedPrimary: an OK from a primary of term 1 to a
// request sent after a majority durably held term 2 fails S4; one sent
// before that is concurrent and passes.
func TestAnswersCatchDeposedPrimary(t *testing.T) {
	for _, c := range []struct {
		sent time.Duration
		bad  bool
	}{{500 * time.Millisecond, false}, {2 * time.Second, true}} {
		w := NewWorld(Demo(1), nil)
		w.ans.init(len(w.nodes))
		w.ans.hist = []termSince{{at: time.Second, term: 2}}
		w.ans.pre[0] = preStep{role: sm.RolePrimary, term: 1}
		w.wl.calls = []*call{{id: 1, req: sm.JobRequest{Kind: sm.JobGet, ID: 1}, sent: c.sent}}
		w.judgeReply(w.nodes[0], sm.Reply{ID: 1, Status: sm.StatusOK, OK: true})
		if c.bad {
			wantViolation(t, w, "S4", "a deposed primary answered")
		} else {
			wantNone(t, w)
		}
	}
}

// TestReadsAfterReelectionWaitForThisTerm replays the schedule that found
// a standby echoing an earlier term's heartbeat round (seed 300252, found
// by a 15,000-schedule run on 2026-12-02): the primary's rounds count
// from 1 again in each of its terms, so the echo of a larger round from
// its previous term confirmed every read of the new term at once, and
// the primary, paused and deposed meanwhile, answered reads sent after a
// majority held the next term (S4).
func TestReadsAfterReelectionWaitForThisTerm(t *testing.T) {
	_, fails := runSeeds(300252, 1, nil)
	for _, f := range fails {
		if f != nil {
			t.Fatal(f.Error())
		}
	}
}
