package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
)

// TestCrashVoteEnumeration: a candidate of term 0 grants its vote of term 5.
// After every file operation, every dependency-closed crash state of its
// disk is booted: the durable term and vote never fall below what a message
// already sent revealed (a granted vote must survive: one vote per term).
func TestCrashVoteEnumeration(t *testing.T) {
	disk := simdisk.New()
	mustProvision(t, disk, sampleConfig(1, 3), epoch)
	d := newDriver(t, 1, disk.Clone())
	d.feed(sm.Boot{Seed: 7})
	points, states := 0, 0
	d.onOp = func(op sm.FileOp) {
		points++
		var term uint64
		vote := -1
		for _, s := range d.sent {
			term = max(term, s.Msg.Term)
			if s.Msg.Type == sm.MsgVoteReply && s.Msg.Accepted {
				vote = s.To
			}
		}
		for _, st := range d.disk.CrashStates() {
			states++
			b, _ := st.ReadFile(sm.TermPath) // what a boot of this crash state reads
			gt, gv := uint64(0), -1
			if b != nil {
				var err error
				if gt, gv, err = sm.ParseTermVote(b); err != nil {
					t.Fatalf("after %s %s: data/term %q: %v", op.Op, op.Path, b, err)
				}
			}
			if gt < term || vote >= 0 && gt == term && gv != vote {
				t.Fatalf("after %s %s (crash point %d): a boot finds term %d vote %d, but term %d (vote %d) was already sent", op.Op, op.Path, points, gt, gv, term, vote)
			}
		}
	}
	d.feed(sm.Recv{From: 0, Msg: sm.Msg{Type: sm.MsgVote, ReqID: 9, Role: sm.RoleCandidate, Term: 5, Priority: 0}})
	granted := false
	for _, s := range d.sent {
		granted = granted || s.Msg.Type == sm.MsgVoteReply && s.Msg.Accepted && s.Msg.Term == 5
	}
	if !granted {
		t.Fatalf("no vote granted; sent %v, logs %v", d.sent, d.logs)
	}
	t.Logf("%d crash states over %d crash points: the term and vote sent survive each", states, points)
	if points < 4 {
		t.Fatalf("enumeration too small: %d points", points)
	}
}

// TestCrashAppendEnumeration: a one-node primary acknowledges enqueues,
// rolling WAL segments and checkpointing (max_wal_records 100). After every
// file operation, every crash state is recovered: it holds every job whose
// enqueue was acknowledged before that point.
func TestCrashAppendEnumeration(t *testing.T) {
	if ckpt := crashAppendEnumeration(t, 250, 0); ckpt < 2 {
		t.Fatalf("only %d checkpoints: segment roll and removal not exercised", ckpt)
	}
}

// TestCrashAppendLargeEnumeration is the same with 1 KiB payloads, so a
// group commit's unsynced tail spans sectors: its crash states include
// tails ending in garbage and holes followed by later records, which
// recovery must treat as torn (never as corruption, never as records).
func TestCrashAppendLargeEnumeration(t *testing.T) {
	crashAppendEnumeration(t, 40, 1024)
}

// crashAppendEnumeration runs count enqueues with payloads padded to pad
// bytes and returns the number of checkpoints.
func crashAppendEnumeration(t *testing.T, count, pad int) int {
	disk := simdisk.New()
	mustProvision(t, disk, sampleConfig(1, 3), epoch)
	o := sm.DefaultOptions(0, []string{"solo"})
	o.MaxWALRecords = 100
	n, err := sm.NewNode(o)
	if err != nil {
		t.Fatal(err)
	}
	d := &ioDriver{t: t, node: n, disk: disk.Clone()}
	d.feed(sm.Boot{Seed: 7})
	if _, _, ok := n.JobState(); !ok {
		t.Fatalf("solo node did not recover: %v", d.logs)
	}
	points, states := 0, 0
	d.onOp = func(op sm.FileOp) {
		points++
		var acked []string
		for _, r := range d.replies {
			if r.Status == sm.StatusOK && r.OK {
				for _, j := range r.Jobs {
					acked = append(acked, string(j.Payload))
				}
			}
		}
		for _, st := range d.disk.CrashStates() {
			states++
			got, _, problem := recoverSolo(t, st)
			if problem != "" {
				t.Fatalf("after %s %s (crash point %d): %s", op.Op, op.Path, points, problem)
			}
			have := map[string]bool{}
			for _, p := range strings.Split(got, ",") {
				have[p] = true
			}
			for _, p := range acked {
				if !have[p] {
					t.Fatalf("after %s %s (crash point %d): acknowledged job %s lost (recovered %d jobs)", op.Op, op.Path, points, p, len(have))
				}
			}
		}
	}
	for i := 0; i < count; i++ {
		payload := fmt.Sprintf("j%d", i)
		if pad > 0 {
			payload += "." + strings.Repeat("p", pad)
		}
		op := sm.ClientOp{ID: uint64(i + 1), Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte(payload)}}
		if i%10 != 9 {
			d.queue = append(d.queue, op) // bursts of 10: appends overlap writes and checkpoints
			continue
		}
		d.feed(op)
	}
	if len(d.replies) != count {
		t.Fatalf("%d replies to %d enqueues", len(d.replies), count)
	}
	ckpt := 0
	for _, l := range d.logs {
		if l.Key == "wal.checkpoint" {
			ckpt++
		}
	}
	t.Logf("%d crash states over %d crash points, %d checkpoints: every acknowledged job survives each", states, points, ckpt)
	return ckpt
}
