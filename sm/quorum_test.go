package sm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// Quorum mode (DESIGN §4.4) on the step harness: the rules one node at a
// time; the simulator checks them together under faults.

// threeNodes boots a 3-node quorum cluster with the config on every node
// and returns it once one primary leads two standbys.
func threeNodes(t *testing.T) (*harness, int) {
	t.Helper()
	return threeNodesWith(t, nil)
}

// threeNodesWith is threeNodes with every node's options edited by mut.
func threeNodesWith(t *testing.T, mut func(*sm.Options)) (*harness, int) {
	t.Helper()
	blob := testConfig(t, "Q", 2)
	h := newHarness(t, 3)
	for i := 0; i < 3; i++ {
		install(t, h.add(i, nil, mut).disk, blob, epoch)
	}
	h.boot(0, 1, 2)
	ok := h.advanceUntil(20*time.Second, func() bool {
		p := primaries(h)
		if len(p) != 1 {
			return false
		}
		for i, hn := range h.nodes {
			if i != p[0] && (hn.n.Role() != sm.RoleStandby || hn.n.Primary() != p[0]) {
				return false
			}
		}
		_, _, rec := h.node(p[0]).n.JobState()
		return rec
	})
	if !ok {
		t.Fatalf("no primary with two standbys: %v", primaries(h))
	}
	h.advance(time.Second) // standbys synced
	return h, primaries(h)[0]
}

// A node of three booting alone never becomes primary, and takes no term:
// pre-votes change nothing.
func TestQuorumLoneNodeNeverPrimary(t *testing.T) {
	h := newHarness(t, 3)
	n := h.add(0, nil, nil)
	install(t, n.disk, testConfig(t, "Q", 1), epoch)
	h.boot(0)
	h.advance(60 * time.Second)
	if n.primary {
		t.Fatalf("a lone node of 3 became primary\n%s", n.logDump())
	}
	if _, ok := n.disk.DurableFiles()[sm.TermPath]; ok || n.n.Term() != 0 {
		t.Errorf("lone node took term %d (pre-votes must not change terms)", n.n.Term())
	}
	if len(h.outboxOf(sm.MsgPreVote)) == 0 {
		t.Errorf("no pre-vote was asked for")
	}
}

// Every granted vote is durable (data/term names the candidate in that
// term) before the reply leaves, and the winner holds a majority of such
// votes when it becomes primary.
func TestQuorumVotesDurableBeforeReply(t *testing.T) {
	blob := testConfig(t, "Q", 1)
	h := newHarness(t, 3)
	for i := 0; i < 3; i++ {
		install(t, h.add(i, nil, nil).disk, blob, epoch)
	}
	granted := map[uint64]map[int]bool{} // term -> voters
	h.onStep = func(i int, _ sm.Input, effs []sm.Effect) {
		for _, e := range effs {
			s, ok := e.(sm.Send)
			if !ok || s.Msg.Type != sm.MsgVoteReply || !s.Msg.Accepted {
				continue
			}
			term, vote, err := sm.ParseTermVote(h.node(i).disk.DurableFiles()[sm.TermPath])
			if err != nil || term != s.Msg.Term || vote != s.To {
				t.Errorf("n%d granted n%d its vote of term %d while data/term durably holds term %d vote %d (%v)", i, s.To, s.Msg.Term, term, vote, err)
			}
			if granted[term] == nil {
				granted[term] = map[int]bool{}
			}
			granted[term][i] = true
		}
		if hn := h.node(i); hn.n.Role() == sm.RolePrimary {
			term := hn.n.Term()
			if 1+len(granted[term]) < 2 {
				t.Errorf("n%d primary of term %d with %d granted votes, want a majority", i, term, 1+len(granted[term]))
			}
		}
	}
	h.boot(0, 1, 2)
	h.advance(10 * time.Second)
	if p := primaries(h); len(p) != 1 {
		t.Fatalf("primaries %v, want one", p)
	}
}

// A primary cut off from both standbys acknowledges nothing: the write
// waits for a majority, and when the primary steps down (no majority heard
// within the failure timeout) it answers "outcome unknown"; a read is not
// answered from its stale state either.
func TestQuorumPartitionedPrimaryAcksNothing(t *testing.T) {
	h, p := threeNodes(t)
	pn := h.node(p)
	oldTerm := pn.n.Term()
	for i := 0; i < 3; i++ {
		if i != p {
			h.cutLink(p, i)
		}
	}
	before := len(pn.replies)
	h.enqueue(p, sm.ClientOp{ID: 901, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("x")}})
	h.enqueue(p, sm.ClientOp{ID: 902, Req: sm.JobRequest{Kind: sm.JobList}})
	h.run()
	h.advance(pn.opts.FailureTimeout / 2)
	if got := pn.replies[before:]; len(got) != 0 {
		t.Fatalf("cut-off primary answered %+v before its step-down", got)
	}
	h.advance(2 * pn.opts.FailureTimeout)
	if pn.n.Role() == sm.RolePrimary || !pn.hasLog("ha.quorum-lost", sm.Warn) {
		t.Fatalf("n%d still %v without a majority", p, pn.n.Role())
	}
	got := map[uint64]sm.Reply{}
	for _, r := range pn.replies[before:] {
		got[r.ID] = r
	}
	if r := got[901]; r.Status != sm.StatusOutcomeUnknown {
		t.Errorf("write answered %+v, want outcome unknown", r)
	}
	if r := got[902]; r.Status == sm.StatusOK {
		t.Errorf("read answered from a deposed primary: %+v", r)
	}
	// The other two elect a new primary in a higher term.
	h.advance(5 * time.Second)
	var np []int
	for _, q := range primaries(h) {
		if q != p {
			np = append(np, q)
		}
	}
	if len(np) != 1 || h.node(np[0]).n.Term() <= oldTerm {
		t.Errorf("new primaries %v, want one in a term above %d", np, oldTerm)
	}
}

// With the majority intact a write is acknowledged, and only once the
// standbys' acks make it durable on a majority.
func TestQuorumWriteAckedWithMajority(t *testing.T) {
	h, p := threeNodes(t)
	pn := h.node(p)
	before := len(pn.replies)
	h.enqueue(p, sm.ClientOp{ID: 903, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("y")}})
	h.run()
	h.advance(time.Second)
	if got := pn.replies[before:]; len(got) != 1 || got[0].Status != sm.StatusOK {
		t.Fatalf("replies %+v, want one OK", got)
	}
	lsn := pn.replies[before].LSN
	held := 0
	for i := 0; i < 3; i++ {
		if t2, l := h.node(i).n.LogPosition(); l >= lsn && t2 == pn.n.Term() {
			held++
		}
	}
	if held < 2 {
		t.Errorf("acked LSN %d held by %d nodes, want a majority", lsn, held)
	}
}

// A read reaching a primary that has lost its majority is not answered,
// even with nothing pending: it waits for a heartbeat round a majority
// echoes, which never comes, and ends "not primary" at the step-down. (A
// new primary may already be committing writes the read would miss.)
func TestQuorumReadNeedsMajorityRound(t *testing.T) {
	h, p := threeNodes(t)
	pn := h.node(p)
	for i := 0; i < 3; i++ {
		if i != p {
			h.cutLink(p, i)
		}
	}
	before := len(pn.replies)
	h.enqueue(p, sm.ClientOp{ID: 904, Req: sm.JobRequest{Kind: sm.JobList}})
	h.run()
	h.advance(3 * pn.opts.FailureTimeout)
	for _, r := range pn.replies[before:] {
		if r.ID == 904 && r.Status == sm.StatusOK {
			t.Fatalf("a primary cut off from its majority answered a read: %+v", r)
		}
	}
	if pn.n.Role() == sm.RolePrimary {
		t.Fatalf("n%d still primary without a majority", p)
	}
	// With the majority back, a read is answered.
	h.heal()
	h.advance(5 * time.Second)
	q := primaries(h)
	if len(q) != 1 {
		t.Fatalf("primaries %v after heal", q)
	}
	qn := h.node(q[0])
	before = len(qn.replies)
	h.enqueue(q[0], sm.ClientOp{ID: 905, Req: sm.JobRequest{Kind: sm.JobList}})
	h.run()
	h.advance(time.Second)
	if got := qn.replies[before:]; len(got) != 1 || got[0].Status != sm.StatusOK {
		t.Fatalf("read on the healed primary answered %+v, want one OK", got)
	}
}

// A standby synced by a primary never appends records that primary's peer
// sends in a newer term on the strength of the old sync: the peer's new
// process starts syncs of its own, and its log may hold other
// records at the LSNs the standby has (found by the simulator's
// canonical-chain check, seed 397: a standby kept its uncommitted record
// of term 1 at LSN 2 under the new term-2 primary's LSN 3, so its log
// matched no primary's).
func TestQuorumNewTermNeedsFreshSync(t *testing.T) {
	h, p := threeNodes(t)
	s := (p + 1) % 3
	sn := h.node(s)
	var epoch uint64 // of the sync that started it: a snapshot or a catch-up
	for _, m := range append(h.node(p).sentOf(sm.MsgReplSnapshot), h.node(p).sentOf(sm.MsgReplRecords)...) {
		if m.To == s && (m.Msg.Type == sm.MsgReplSnapshot || m.Msg.CatchUp) {
			epoch = max(epoch, m.Msg.ReqID)
		}
	}
	if epoch == 0 {
		t.Fatalf("n%d never started a sync of n%d", p, s)
	}
	term, lsn := sn.n.LogPosition()
	oldTerm := h.node(p).n.Term()
	newTerm := oldTerm + 1
	frame, err := wal.AppendFrame(nil, &schema.WalRecord{Lsn: lsn + 1, Term: newTerm, Op: &schema.WalRecord_Noop{Noop: &schema.WalNoop{}}})
	if err != nil {
		t.Fatal(err)
	}
	appends := len(sn.opsOf(sm.OpAppend))
	h.deliver(p, s, sm.Msg{Type: sm.MsgReplRecords, Role: sm.RolePrimary, Term: newTerm, ReqID: epoch, Bytes: frame})
	h.advance(100 * time.Millisecond)
	if got := len(sn.opsOf(sm.OpAppend)); got != appends {
		t.Fatalf("standby at (term %d, lsn %d) appended records of term %d under its term-%d sync", term, lsn, newTerm, oldTerm)
	}
	// A late sync message of the old term is refused too.
	h.deliver(p, s, sm.Msg{Type: sm.MsgReplRecords, Role: sm.RolePrimary, Term: newTerm - 1, ReqID: epoch, Bytes: frame})
	h.advance(100 * time.Millisecond)
	if got := len(sn.opsOf(sm.OpAppend)); got != appends {
		t.Fatalf("standby in term %d appended a batch of the older term %d", newTerm, newTerm-1)
	}
}

// A controller started with another --peers list (seed §11.2) is ignored:
// its messages are dropped with an ERROR naming it, so it is never voted
// for, followed or counted; the two that agree elect a primary.
func TestPeersListMismatchIgnored(t *testing.T) {
	blob := testConfig(t, "Q", 1)
	h := newHarness(t, 3)
	for i := 0; i < 3; i++ {
		hash := uint64(0xabc)
		if i == 2 {
			hash = 0xdef // another list
		}
		install(t, h.add(i, nil, func(o *sm.Options) { o.PeersHash = hash }).disk, blob, epoch)
	}
	h.boot(0, 1, 2)
	h.advance(10 * time.Second)
	p := primaries(h)
	if len(p) != 1 || p[0] == 2 {
		t.Fatalf("primaries %v, want one of n0, n1", p)
	}
	if r := h.node(2).n.Role(); r == sm.RoleStandby || r == sm.RolePrimary {
		t.Fatalf("n2 with another --peers list is %v", r)
	}
	for i := 0; i < 2; i++ {
		if got := h.node(i).n.PeersMismatch(); len(got) != 1 || got[0] != 2 {
			t.Errorf("n%d PeersMismatch = %v, want [2]", i, got)
		}
		if len(h.node(i).logsWithKey("peers.mismatch")) != 1 {
			t.Errorf("n%d logged peers.mismatch %d times, want once", i, len(h.node(i).logsWithKey("peers.mismatch")))
		}
	}
}

// A primary whose own step ran long (a recovery of a large state, a
// pause) must not count that gap as its standbys' silence: their messages
// of that time are still queued behind the timer that fires first (issue
// 7 A2: CheckQuorum counts on messages received, never on a gap in its
// own clock).
func TestQuorumCheckIgnoresOwnStall(t *testing.T) {
	h, p := threeNodes(t)
	pn := h.node(p)
	a, ok := pn.timers[sm.TimerHeartbeat]
	if !ok {
		t.Fatal("no heartbeat timer armed on the primary")
	}
	h.now += 3 * time.Second // nobody stepped meanwhile: the primary was busy
	h.step(p, sm.TimerFired{Kind: sm.TimerHeartbeat, Gen: a.gen})
	if pn.n.Role() != sm.RolePrimary {
		t.Fatalf("n%d stepped down after its own 3 s stall: %v", p, pn.logsWithKey("ha.quorum-lost"))
	}
	h.run()
	h.advance(3 * time.Second) // the standbys are heard again: it stays
	if pn.n.Role() != sm.RolePrimary || len(pn.logsWithKey("ha.quorum-lost")) != 0 {
		t.Fatalf("n%d lost its role (%s) with its standbys alive: %v", p, pn.n.Role(), pn.logsWithKey("ha.quorum-lost"))
	}
}

// A primary whose re-read of its config file (to serve a standby's
// config request) fails after it stepped down still says so: an I/O
// error is never swallowed (S7, simulator seed 5083: the read completed
// with bit rot detected after the step-down, and nothing logged it).
func TestConfigServeReadFailingAfterStepDownIsLogged(t *testing.T) {
	h, p := threeNodes(t)
	s := (p + 1) % 3
	var read *sm.FileOp
	h.hold = func(i int, e sm.Effect) bool {
		if op, ok := e.(sm.FileOp); ok && i == p && op.Op == sm.OpRead && strings.HasPrefix(op.Path, sm.ConfDir+"/cluster.bin.") {
			read = &op
			return true
		}
		return false
	}
	h.deliver(s, p, sm.Msg{Type: sm.MsgReplConfig, ReqID: 777, Role: sm.RoleStandby, Term: h.node(p).n.Term()})
	if read == nil {
		t.Fatalf("n%d did not re-read its config file to serve n%d", p, s)
	}
	h.hold, h.held = nil, nil
	h.deliver(s, p, sm.Msg{Type: sm.MsgProbe, Role: sm.RoleCandidate, Term: h.node(p).n.Term() + 5})
	if r := h.node(p).n.Role(); r == sm.RolePrimary {
		t.Fatalf("n%d is still primary after a higher term", p)
	}
	h.enqueue(p, sm.IODone{ID: read.ID, Err: sm.IOFailed, Detail: "input/output error"})
	h.run()
	if !hasLog(h, p, "conf.serve-read") {
		t.Errorf("n%d swallowed the failed read of %s:\n%s", p, read.Path, h.node(p).logDump())
	}
}

// A candidate that lost its primary takes nothing the primary sent no
// later than the last heartbeat it had from it for a sign of life: a
// clogged link that delivers a dead primary's backlog after the failure
// timeout made a standby follow it again for another failure timeout,
// and the failover took over 5 s (L2, seed 1097166 of a long run). A
// message of a newer round is one the primary sent after that silence
// began: the candidate follows it.
func TestCandidateIgnoresLostPrimarysBacklog(t *testing.T) {
	h, p := threeNodes(t)
	s := (p + 1) % 3
	var last sm.Msg
	h.onStep = func(i int, _ sm.Input, effs []sm.Effect) {
		for _, e := range effs {
			if x, ok := e.(sm.Send); ok && i == p && x.To == s && x.Msg.Type == sm.MsgHeartbeat {
				last = x.Msg
			}
		}
	}
	enqueueN(t, h, p, 3, 100)
	h.advance(2 * time.Second)
	h.onStep = nil
	if last.Round == 0 {
		t.Fatalf("n%d sent n%d no numbered heartbeat", p, s)
	}
	h.kill(p)
	h.cutLink(s, 3-p-s) // no votes: it stays a candidate while the test speaks for the primary
	sn := h.node(s)
	if !h.advanceUntil(5*time.Second, func() bool { return sn.n.Role() == sm.RoleCandidate }) {
		t.Fatalf("n%d did not stand after its primary was killed: %s", s, sn.n.Role())
	}
	for _, m := range []sm.Msg{last, {Type: sm.MsgReplRecords, Role: sm.RolePrimary, Term: last.Term, Round: last.Round, ReqID: 1}} {
		h.inject(p, s, m)
		h.run()
		if role := sn.n.Role(); role == sm.RoleStandby {
			t.Fatalf("n%d follows its dead primary again on a late %s of round %d (its last heartbeat's)", s, m.Type, m.Round)
		}
	}
	newer := last
	newer.Round++
	h.inject(p, s, newer)
	h.run()
	if role := sn.n.Role(); role != sm.RoleStandby {
		t.Fatalf("n%d is %s after a heartbeat of round %d from the primary it lost, want a standby again", s, role, newer.Round)
	}
}
