package sim

import (
	"fmt"
	"testing"

	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// TestCrashTermEnumeration covers the data/term writes the vote
// enumeration does not: replacing an existing data/term, a second write
// coalesced behind one in flight (the term moved while the first was
// written), and a candidate's own vote for itself. After every file
// operation every dependency-closed crash state is booted: it never
// FATALs (data/term is never torn or lost), its term never goes back
// below the durable term the disk started with nor below any term a
// message already sent revealed, a vote sent in a term is the vote held
// in that term, and a candidate that asked for votes in a term holds its
// own vote there.
func TestCrashTermEnumeration(t *testing.T) {
	t.Run("a vote coalesced behind a vote", func(t *testing.T) {
		disk := simdisk.New()
		mustProvision(t, disk, sampleConfig(1, 3), epoch)
		if err := disk.PutDurable(sm.TermPath, termFileOf(3, 1), epoch); err != nil {
			t.Fatal(err)
		}
		d := newDriver(t, 1, disk)
		d.feed(sm.Boot{Seed: 7})
		points, states, renames := checkTermCrashes(t, d, 3, func() {
			vote := func(from int, term uint64) sm.Input {
				return sm.Recv{From: from, Msg: sm.Msg{Type: sm.MsgVote, ReqID: term, Role: sm.RoleCandidate, Term: term, Priority: from}}
			}
			d.queue = append(d.queue, vote(2, 5)) // its data/term write is in flight when term 6 arrives
			d.feed(vote(0, 6))
		})
		if got := votesGranted(d); len(got) != 2 || got[5] != 2 || got[6] != 0 {
			t.Fatalf("want votes for n2 in term 5 and n0 in term 6, sent %v; logs %v", got, d.logs)
		}
		if renames < 2 {
			t.Fatalf("%d data/term renames: the second write was not coalesced behind the first", renames)
		}
		t.Logf("%d crash states over %d crash points", states, points)
	})
	t.Run("a solo candidate votes for itself", func(t *testing.T) {
		disk := simdisk.New()
		mustProvision(t, disk, sampleConfig(1, 3), epoch)
		if err := disk.PutDurable(sm.TermPath, termFileOf(3, 0), epoch); err != nil {
			t.Fatal(err)
		}
		n, err := sm.NewNode(sm.DefaultOptions(0, []string{"solo"}))
		if err != nil {
			t.Fatal(err)
		}
		d := &ioDriver{t: t, node: n, disk: disk}
		points, states, _ := checkTermCrashes(t, d, 3, func() { d.feed(sm.Boot{Seed: 7}) })
		if n.Role() != sm.RolePrimary || n.Term() != 4 {
			t.Fatalf("solo node is %s in term %d, want primary of term 4", n.Role(), n.Term())
		}
		t.Logf("%d crash states over %d crash points", states, points)
	})
}

// checkTermCrashes runs act on d and, after every file operation, boots
// every crash state of d's disk and checks its data/term against what d
// had sent and the durable term floor it started with.
func checkTermCrashes(t *testing.T, d *ioDriver, floor uint64, act func()) (points, states, renames int) {
	t.Helper()
	self := d.node.Options().Self
	var check func(where string)
	d.onOp = func(op sm.FileOp) {
		if op.Op == sm.OpRename && op.To == sm.TermPath {
			renames++
		}
		check(fmt.Sprintf("after %s %s", op.Op, op.Path))
	}
	check = func(where string) {
		points++
		term, voteOf, own := floor, map[uint64]int{}, map[uint64]bool{}
		for _, s := range d.sent {
			term = max(term, s.Msg.Term)
			if s.Msg.Type == sm.MsgVoteReply && s.Msg.Accepted {
				voteOf[s.Msg.Term] = s.To
			}
			if s.Msg.Type == sm.MsgVote {
				own[s.Msg.Term] = true
			}
		}
		if d.node.Role() == sm.RolePrimary { // a solo primary won its own vote: it revealed its term
			term = max(term, d.node.Term())
			own[d.node.Term()] = true
		}
		for _, st := range d.disk.CrashStates() {
			states++
			b := newDriver(t, 1, st.Clone())
			b.feed(sm.Boot{Seed: 9})
			if b.exit != nil {
				t.Fatalf("%s (crash point %d): boot FATAL: %s\ndisk:\n%s", where, points, b.exit.Reason, st)
			}
			data, _ := st.ReadFile(sm.TermPath)
			gt, gv, err := sm.ParseTermVote(data)
			if err != nil {
				t.Fatalf("%s (crash point %d): data/term %q: %v", where, points, data, err)
			}
			v, voted := voteOf[gt]
			switch {
			case gt < term:
				t.Fatalf("%s (crash point %d): a boot finds term %d, but term %d was already revealed (or durable before)", where, points, gt, term)
			case voted && gv != v:
				t.Fatalf("%s (crash point %d): a boot finds term %d vote %d, but the vote for n%d in term %d was already sent", where, points, gt, gv, v, gt)
			case own[gt] && gv != self:
				t.Fatalf("%s (crash point %d): a boot finds term %d vote %d, but the node stood for term %d with its own vote", where, points, gt, gv, gt)
			}
		}
	}
	act()
	check("at the end") // the sends after the last file operation
	if points < 8 {
		t.Fatalf("enumeration too small: %d points", points)
	}
	return points, states, renames
}

// termFileOf is data/term holding (term, vote), checksummed.
func termFileOf(term uint64, vote int) []byte {
	body := fmt.Sprintf("%d %d", term, vote)
	return []byte(fmt.Sprintf("%s crc32c=%08x\n", body, wal.Checksum([]byte(body))))
}

// votesGranted maps each term to the peer d granted its vote in.
func votesGranted(d *ioDriver) map[uint64]int {
	out := map[uint64]int{}
	for _, s := range d.sent {
		if s.Msg.Type == sm.MsgVoteReply && s.Msg.Accepted {
			out[s.Msg.Term] = s.To
		}
	}
	return out
}
