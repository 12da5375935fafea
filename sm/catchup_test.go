package sm_test

import (
	"bytes"
	"fmt"
	"github.com/xce-hpc/xce/sm/queue"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// Catch-up from the log (DESIGN §4.4) on the step harness.

// hasLog reports whether node i logged key since its process started.
func hasLog(h *harness, i int, key string) bool {
	for _, l := range h.node(i).logs {
		if l.Key == key {
			return true
		}
	}
	return false
}

// enqueueN writes n jobs through primary p and waits for their replies.
func enqueueN(t *testing.T, h *harness, p, n int, id uint64) {
	t.Helper()
	pn := h.node(p)
	before := len(pn.replies)
	for k := 0; k < n; k++ {
		h.enqueue(p, sm.ClientOp{ID: id + uint64(k), Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("x")}})
	}
	h.run()
	h.advance(time.Second)
	ok := 0
	for _, r := range pn.replies[before:] {
		if r.Status == sm.StatusOK {
			ok++
		}
	}
	if ok != n {
		t.Fatalf("%d of %d enqueues acknowledged", ok, n)
	}
}

// A standby that restarts behind the primary catches up from its last
// record: it gets the records it lacks, no snapshot, and holds the
// primary's whole log again. The records are among the primary's last
// (recentlog.go): it sends them without reading a segment.
func TestCatchUpAfterRestart(t *testing.T) {
	h, p := threeNodes(t)
	s := (p + 1) % 3
	enqueueN(t, h, p, 5, 100)
	h.kill(s)
	enqueueN(t, h, p, 7, 200) // acknowledged by the other standby alone
	reads := len(h.node(p).opsOf(sm.OpRead))
	h.newProcess(h.node(s))
	h.boot(s)
	h.advance(5 * time.Second)
	if !hasLog(h, p, "repl.catch-up") {
		t.Errorf("the primary did not catch n%d up from the log", s)
	}
	if r := h.node(p).opsOf(sm.OpRead)[reads:]; len(r) > 0 {
		t.Errorf("the primary read %v for a catch-up its recent log covers", r)
	}
	if hasLog(h, s, "repl.synced") {
		t.Errorf("n%d installed a snapshot although the primary held every record it lacked", s)
	}
	pt, pl := h.node(p).n.LogPosition()
	if st, sl := h.node(s).n.LogPosition(); st != pt || sl != pl {
		t.Errorf("n%d log at (term %d, lsn %d), primary at (term %d, lsn %d)", s, st, sl, pt, pl)
	}
	enqueueN(t, h, p, 1, 300) // it acks live records after the catch-up
	if st, sl := h.node(s).n.LogPosition(); sl != pl+1 || st != pt {
		t.Errorf("n%d log at (term %d, lsn %d) after one more write, want lsn %d", s, st, sl, pl+1)
	}
}

// A standby that was down while the primary checkpointed (removing the
// segments it would need) still catches up from the log: the primary
// keeps the segments after its last ack, within RetainWALRecords. With no
// retention it gets a snapshot (so the test can tell the two apart). A
// sync buffer of 1 KiB keeps what it lacks out of the primary's recent
// log (recentlog.go), which would send it from memory either way.
func TestCatchUpFromRetainedSegments(t *testing.T) {
	for _, retain := range []int{1000, 0} {
		h, p := threeNodesWith(t, func(o *sm.Options) {
			o.MaxWALRecords, o.RetainWALRecords, o.SyncBufferBytes = 100, retain, 1<<10
		})
		s := (p + 1) % 3
		enqueueN(t, h, p, 20, 100)
		h.kill(s)
		enqueueN(t, h, p, 150, 200) // a checkpoint at 100 records
		enqueueN(t, h, p, 10, 400)  // old segments go with the next write
		if !hasLog(h, p, "wal.checkpoint") {
			t.Fatalf("retain %d: no checkpoint ran", retain)
		}
		pLogs := len(h.node(p).logs)
		h.newProcess(h.node(s))
		h.boot(s)
		h.advance(5 * time.Second)
		byLog := false
		for _, l := range h.node(p).logs[pLogs:] {
			byLog = byLog || l.Key == "repl.catch-up"
		}
		bySnap := hasLog(h, s, "repl.synced")
		if retain > 0 && (!byLog || bySnap || !hasLog(h, p, "wal.retained")) {
			t.Errorf("retain %d: n%d synced by log %v, by snapshot %v; want from the retained segments", retain, s, byLog, bySnap)
		}
		if retain == 0 && (byLog || !bySnap) {
			t.Errorf("retain 0: n%d synced by log %v, by snapshot %v; want a snapshot", s, byLog, bySnap)
		}
		pt, pl := h.node(p).n.LogPosition()
		if st, sl := h.node(s).n.LogPosition(); st != pt || sl != pl {
			t.Errorf("retain %d: n%d log at (term %d, lsn %d), primary at (term %d, lsn %d)", retain, s, st, sl, pt, pl)
		}
	}
}

// A standby whose log ends in a divergent suffix (records of a deposed
// primary that no one else holds) cuts the suffix off and catches up from
// where the logs agree: records, no snapshot.
func TestCatchUpTruncatesDivergentSuffix(t *testing.T) {
	h, p := threeNodes(t)
	enqueueN(t, h, p, 3, 100)
	// Cut the primary off; it logs writes nobody else holds, then steps
	// down; the others elect a new primary and write in a higher term.
	for i := 0; i < 3; i++ {
		if i != p {
			h.cutLink(p, i)
		}
	}
	for k := 0; k < 4; k++ {
		h.enqueue(p, sm.ClientOp{ID: 400 + uint64(k), Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("lost")}})
	}
	h.run()
	h.advance(5 * time.Second)
	np := -1
	for _, q := range primaries(h) {
		if q != p {
			np = q
		}
	}
	if np < 0 {
		t.Fatalf("no new primary: %v", primaries(h))
	}
	enqueueN(t, h, np, 2, 500)
	// The old primary restarts (a clean log ending in its own suffix) and
	// rejoins.
	h.heal()
	h.restart(p)
	h.advance(5 * time.Second)
	if !hasLog(h, np, "repl.diverged") || !hasLog(h, p, "repl.truncated") || !hasLog(h, np, "repl.catch-up") {
		t.Errorf("the deposed primary's divergent suffix was not cut (diverged=%v truncated=%v caught up=%v)", hasLog(h, np, "repl.diverged"), hasLog(h, p, "repl.truncated"), hasLog(h, np, "repl.catch-up"))
	}
	if hasLog(h, p, "repl.synced") {
		t.Errorf("n%d installed a snapshot although the logs agree up to the suffix", p)
	}
	nt, nl := h.node(np).n.LogPosition()
	if ot, ol := h.node(p).n.LogPosition(); ot != nt || ol != nl {
		t.Errorf("old primary's log at (term %d, lsn %d), new primary at (term %d, lsn %d)", ot, ol, nt, nl)
	}
}

// A primary's file operations belong to its promotion: once it steps
// down, the completions of what it had in flight start nothing more (here
// the WAL append of a write in flight is never fsync'd or followed up),
// and the stepped-down node reports them abandoned.
func TestStepDownAbandonsJobOperations(t *testing.T) {
	h, p := threeNodes(t)
	pn := h.node(p)
	other := (p + 1) % 3
	appended := writeInFlight(t, h, p, 700)
	if len(pn.n.PendingOps()) == 0 {
		t.Fatal("no pending operation after the append was issued")
	}
	// A primary of a higher term speaks before the append completes (its
	// completion is queued behind this message).
	h.queue = append([]queued{{p, sm.Recv{From: other, Msg: sm.Msg{Type: sm.MsgHeartbeat, Role: sm.RolePrimary, Term: pn.n.Term() + 1, Priority: other}}}}, h.queue...)
	opsBefore := len(pn.ops)
	h.step(p, h.queue[0].in)
	h.queue = h.queue[1:]
	if pn.n.Role() == sm.RolePrimary {
		t.Fatalf("n%d still primary after a higher term's heartbeat", p)
	}
	h.run()
	// The only operations on that segment since are the rescan's of a
	// node leaving the primary role (relearnLog): it reads the segment
	// and makes what it read durable. The abandoned write's own fsync
	// would come first, with no read before it.
	var after []sm.OpKind
	for _, op := range pn.ops[opsBefore:] {
		if op.Path == appended {
			after = append(after, op.Op)
		}
	}
	if len(after) != 2 || after[0] != sm.OpRead || after[1] != sm.OpFsync {
		t.Errorf("after the step-down n%d issued %v on %s; want only the rescan's read and fsync", p, after, appended)
	}
}

// A standby's checkpoint of its own log (compact.go) belongs to the
// standby role: a standby promoted while one is in flight goes no further
// with it (its files are recovery's now). The test holds the completion
// of the checkpoint's first operation, promotes the node, then delivers
// it.
func TestPromotionAbandonsStandbyCheckpoint(t *testing.T) {
	h, p := threeNodesWith(t, func(o *sm.Options) { o.MaxWALRecords = 100 })
	s, other := (p+1)%3, (p+2)%3
	var held []sm.Input
	h.onStep = func(i int, _ sm.Input, effs []sm.Effect) {
		if i != s || held != nil {
			return
		}
		var first uint64
		for _, e := range effs {
			if l, ok := e.(sm.Log); ok && l.Key == "repl.compacting" {
				first = 1
			}
			if op, ok := e.(sm.FileOp); ok && first == 1 {
				first = op.ID + 1 // the checkpoint's first operation
			}
		}
		if first <= 1 {
			return
		}
		for k, q := range h.queue {
			if d, ok := q.in.(sm.IODone); ok && q.node == s && d.ID == first-1 {
				held = []sm.Input{d}
				h.queue = append(h.queue[:k:k], h.queue[k+1:]...)
				return
			}
		}
	}
	enqueueN(t, h, p, 120, 100)
	if held == nil {
		t.Fatalf("n%d started no standby checkpoint after 120 records", s)
	}
	h.onStep = nil
	h.kill(p)
	if !h.advanceUntil(20*time.Second, func() bool { return h.node(s).n.Role() == sm.RolePrimary }) {
		t.Fatalf("n%d was not promoted (n%d is %s)", s, other, h.node(other).n.Role())
	}
	logsBefore, opsBefore := len(h.node(s).logs), len(h.node(s).ops)
	h.enqueue(s, held[0])
	h.run()
	h.advance(time.Second)
	for _, l := range h.node(s).logs[logsBefore:] {
		if strings.HasPrefix(l.Key, "repl.compact") {
			t.Errorf("after its promotion n%d went on with its standby checkpoint: %s %s", s, l.Key, l.Text)
		}
	}
	for _, op := range h.node(s).ops[opsBefore:] {
		if op.Op == sm.OpWrite && strings.HasSuffix(op.Path, ".snap.tmp") {
			t.Errorf("after its promotion n%d wrote %s", s, op.Path)
		}
	}
}

// A standby 36 MiB of records behind (more than one message, or the
// transport's queue, could carry at once) is caught up from the log, not
// by snapshot: in pieces of at most a snapshot chunk, never more than the
// window of them unacknowledged, and its log ends at the primary's.
func TestCatchUpOfManyMiBGoesWithFlowControl(t *testing.T) {
	h, p := threeNodes(t)
	s := (p + 1) % 3
	h.kill(s)
	big := bytes.Repeat([]byte("x"), 300<<10)
	pn := h.node(p)
	for k := 0; k < 120; k++ { // 36 MiB of records, one at a time
		h.enqueue(p, sm.ClientOp{ID: 900 + uint64(k), Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: big}})
		h.run()
	}
	h.advance(time.Second)
	sentBefore := len(pn.sent)
	// The pieces p has sent s and not yet seen acknowledged, after every step.
	var lasts []uint64 // the last LSN of each record message p sent s
	most := 0
	h.onStep = func(int, sm.Input, []sm.Effect) {
		for _, m := range pn.sent[sentBefore:] {
			if m.To != s || m.Msg.Type != sm.MsgReplRecords || len(m.Msg.Bytes) == 0 {
				continue
			}
			if len(m.Msg.Bytes) > 512<<10 {
				t.Errorf("a catch-up message of %d bytes, more than a chunk", len(m.Msg.Bytes))
			}
			var last uint64
			if _, err := wal.WalkPositions(m.Msg.Bytes, func(_ int, lsn, _ uint64) error { last = lsn; return nil }); err != nil {
				t.Fatalf("records sent to n%d do not scan: %v", s, err)
			}
			lasts = append(lasts, last)
		}
		sentBefore = len(pn.sent)
		var acked uint64
		for _, st := range pn.n.ReplicationStatus() {
			if st.Peer == s {
				acked = st.Acked
			}
		}
		out := 0
		for _, l := range lasts {
			if l > acked {
				out++
			}
		}
		most = max(most, out)
	}
	h.newProcess(h.node(s))
	h.boot(s)
	h.advance(10 * time.Second)
	h.onStep = nil
	if !hasLog(h, p, "repl.catch-up") || !hasLog(h, p, "repl.caught-up") || hasLog(h, s, "repl.synced") {
		t.Fatalf("catch-up %v, caught up %v, snapshot installed %v; want the records from the log and no snapshot",
			hasLog(h, p, "repl.catch-up"), hasLog(h, p, "repl.caught-up"), hasLog(h, s, "repl.synced"))
	}
	if len(lasts) < 100 {
		t.Errorf("%d record messages for 120 records of 300 KiB, want one or two records a piece", len(lasts))
	}
	if most > 8 || most < 2 {
		t.Errorf("at most %d record messages were unacknowledged at once, want 2 to 8 (the window)", most)
	}
	pt, pl := pn.n.LogPosition()
	if st, sl := h.node(s).n.LogPosition(); st != pt || sl != pl {
		t.Errorf("n%d log at (term %d, lsn %d), primary at (term %d, lsn %d)", s, st, sl, pt, pl)
	}
}

// A standby's snapshot install belongs to its log (issue 7 A9): promoted
// while the install reads its received file back (seed mode, the others
// dead), the node's recovery owns the log's files, and the install's
// completion starts nothing more — no rename of the primary's snapshot
// into data/snap under the recovery, which would mix that history with
// the one the new primary writes.
// loseDisk kills node s and gives it a new process on a new disk that
// holds only the installed config (not booted yet).
func loseDisk(t *testing.T, h *harness, s int) *hnode {
	t.Helper()
	h.kill(s)
	hn := h.node(s)
	hn.disk = simdisk.New()
	install(t, hn.disk, testConfig(t, "Q", 2), epoch)
	h.newProcess(hn)
	return hn
}

func TestPromotionStopsStandbyInstall(t *testing.T) {
	h, p := threeNodesWith(t, func(o *sm.Options) { o.SeedMode = true })
	s, other := (p+1)%3, (p+2)%3
	enqueueN(t, h, p, 5, 100)
	hn := loseDisk(t, h, s) // s syncs again from nothing: by snapshot
	var held []sm.Input
	var readID uint64
	h.onStep = func(i int, _ sm.Input, effs []sm.Effect) {
		if i != s || held != nil {
			return
		}
		for _, e := range effs {
			if c, ok := e.(sm.Compute); ok && c.Kind == sm.ComputeVerify && strings.HasSuffix(c.Path, ".snap.tmp") {
				readID = c.ID
				if c.MaxSize <= 0 || c.Data != nil {
					t.Errorf("n%d verifies its received snapshot with MaxSize %d and %d bytes of Data: want its file read back, bounded", s, c.MaxSize, len(c.Data))
				}
			}
		}
		for k, q := range h.queue {
			if d, ok := q.in.(sm.Computed); ok && q.node == s && readID != 0 && d.ID == readID {
				held = []sm.Input{d}
				h.queue = append(h.queue[:k:k], h.queue[k+1:]...)
				return
			}
		}
	}
	h.boot(s)
	h.advanceUntil(5*time.Second, func() bool { return held != nil })
	if held == nil {
		t.Fatalf("n%d never read its received snapshot back:\n%s", s, hn.logDump())
	}
	h.onStep = nil
	h.kill(p)
	h.kill(other)
	if !h.advanceUntil(20*time.Second, func() bool { return hn.n.Role() == sm.RolePrimary }) {
		t.Fatalf("n%d was not promoted: %s\n%s", s, hn.n.Role(), hn.logDump())
	}
	opsBefore := len(hn.ops)
	h.enqueue(s, held[0])
	h.run()
	h.advance(time.Second)
	for _, op := range hn.ops[opsBefore:] {
		if op.Op == sm.OpRename && strings.HasSuffix(op.Path, ".snap.tmp") {
			t.Errorf("after its promotion n%d went on with its install: rename %s -> %s", s, op.Path, op.To)
		}
	}
	if !hasLog(h, s, "wal.recovered") {
		t.Errorf("n%d did not recover as primary:\n%s", s, hn.logDump())
	}
}

// A standby whose last batch was lost, with nothing written after it
// (so no later batch shows the gap), sees from its primary's heartbeats
// that it stays behind, asks again after a failure timeout, and is
// caught up (L5: before, it waited forever).
func TestStandbyBehindWithNothingArrivingAsksAgain(t *testing.T) {
	h, p := threeNodes(t)
	s := (p + 1) % 3
	enqueueN(t, h, p, 3, 100)
	h.cutLink(p, s)
	h.enqueue(p, sm.ClientOp{ID: 200, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("lost on the way")}})
	// The batch to s is lost; the other standby makes the quorum. The
	// record waits up to groupWait for the writers of the last write
	// (groupcommit.go), who send nothing more here.
	h.advance(time.Millisecond)
	h.heal()
	if pt, pl := h.node(p).n.LogPosition(); func() bool { st, sl := h.node(s).n.LogPosition(); return st == pt && sl == pl }() {
		t.Fatalf("n%d already at the primary's position (term %d, lsn %d): the batch was not lost", s, pt, pl)
	}
	h.advance(5 * time.Second) // heartbeats only: nothing else is written
	if !hasLog(h, s, "repl.behind") {
		t.Errorf("n%d never said it stayed behind", s)
	}
	pt, pl := h.node(p).n.LogPosition()
	if st, sl := h.node(s).n.LogPosition(); st != pt || sl != pl {
		t.Errorf("n%d log at (term %d, lsn %d), primary at (term %d, lsn %d): never caught up", s, st, sl, pt, pl)
	}
}

// A standby part way through a snapshot transfer whose primary starts a
// newer sync (a second join) and loses that sync's first message waits
// for chunks the primary no longer sends: the primary ignores the old
// sync's acks and the standby the new sync's records. The standby sees
// from the heartbeats that nothing arrives, asks again after a failure
// timeout, and is caught up (L5, simulator seed 909521: before, it waited
// forever).
func TestStandbyWithStalledSnapshotTransferAsksAgain(t *testing.T) {
	h, p := threeNodesWith(t, func(o *sm.Options) { o.SeedMode = true; o.SnapshotChunk = 64 })
	s := (p + 1) % 3
	enqueueN(t, h, p, 5, 100)
	hn := loseDisk(t, h, s)
	cut := false
	h.onStep = func(i int, _ sm.Input, effs []sm.Effect) {
		if i != s || cut {
			return
		}
		for _, e := range effs {
			if op, ok := e.(sm.FileOp); ok && op.Op == sm.OpWrite && strings.HasSuffix(op.Path, ".snap.tmp") {
				// The first chunk is being written: the primary starts
				// a newer sync whose messages are lost.
				cut = true
				h.cutLink(p, s)
				h.inject(s, p, sm.Msg{Type: sm.MsgJoin, ReqID: 9999})
				return
			}
		}
	}
	h.boot(s)
	if !cut {
		t.Fatalf("n%d never wrote a received snapshot chunk:\n%s", s, hn.logDump())
	}
	h.onStep = nil
	h.heal()
	h.advance(5 * time.Second) // heartbeats only: nothing else is written
	if !hasLog(h, s, "repl.behind") {
		t.Errorf("n%d never said its transfer stalled:\n%s", s, hn.logDump())
	}
	pt, pl := h.node(p).n.LogPosition()
	if st, sl := h.node(s).n.LogPosition(); st != pt || sl != pl {
		t.Errorf("n%d log at (term %d, lsn %d), primary at (term %d, lsn %d): never caught up", s, st, sl, pt, pl)
	}
}

// A standby's later checkpoints build on the state its last one built
// (compact.go, ckptBase), advanced between them: they read no snapshot
// back, each segment is read once, the snapshot they leave is the log's
// state, as a promotion recovers it from the files, and a promotion
// replays only the records since the last advance. The records between checkpoints claim and acknowledge as well
// as enqueue, so the kept state is replayed onto, not only added to.
func TestStandbyCheckpointBuildsOnItsLast(t *testing.T) {
	h, p := threeNodesWith(t, func(o *sm.Options) { o.MaxWALRecords = 100 })
	s := (p + 1) % 3
	id := uint64(100)
	for round := 0; round < 6; round++ {
		enqueueN(t, h, p, 70, id)
		id += 70
		pn := h.node(p)
		before := len(pn.replies)
		h.enqueue(p, sm.ClientOp{ID: id, Req: sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 20}})
		h.advance(time.Millisecond) // the claim's write waits for the enqueuers' group (groupcommit.go)
		id++
		var claimed []sm.Reply
		for _, r := range pn.replies[before:] {
			if len(r.Jobs) > 0 {
				claimed = append(claimed, r)
			}
		}
		if len(claimed) != 1 {
			t.Fatalf("round %d: the claim got %d replies with jobs", round, len(claimed))
		}
		for _, j := range claimed[0].Jobs[:10] {
			h.enqueue(p, sm.ClientOp{ID: id, Req: sm.JobRequest{Kind: sm.JobAck, Handle: j.Handle()}})
			id++
		}
		h.run()
		h.advance(time.Second)
	}
	written := 0
	for _, l := range h.node(s).logsWithKey("repl.compacted") {
		if strings.Contains(l.Text, "written") {
			written++
		}
	}
	if written < 3 {
		t.Fatalf("n%d wrote %d checkpoints; want at least 3:\n%s", s, written, h.node(s).logDump())
	}
	if n := len(h.node(s).logsWithKey("repl.advanced")); n < written {
		t.Fatalf("n%d advanced its kept state %d times over %d checkpoints; want one between each two at least", s, n, written)
	}
	// Each segment is read once, by the advance or checkpoint after it:
	// the advances spread the checkpoints' work, they add none.
	seen := map[string]bool{}
	for _, op := range h.node(s).opsOf(sm.OpRead) {
		if strings.HasPrefix(op.Path, wal.SnapDir+"/") {
			t.Errorf("n%d read %s back: its checkpoints should build on the state the last one kept", s, op.Path)
		}
		if strings.HasPrefix(op.Path, wal.WALDir+"/") && (!op.Bulk || !op.Background) {
			t.Errorf("n%d's checkpoint read %s with Bulk %v, Background %v: want both", s, op.Path, op.Bulk, op.Background)
		}
		if seen[op.Path] {
			t.Errorf("n%d read %s twice", s, op.Path)
		}
		seen[op.Path] = true
	}
	want, wantLSN, _ := h.node(p).n.JobState()
	wantState := want.Export()
	readsBefore := len(h.node(s).opsOf(sm.OpRead))
	h.kill(p)
	if !h.advanceUntil(20*time.Second, func() bool {
		_, _, rec := h.node(s).n.JobState()
		return h.node(s).n.Role() == sm.RolePrimary && rec
	}) {
		t.Fatalf("n%d was not promoted and recovered", s)
	}
	// Its recovery starts from the state its last checkpoint kept: it
	// reads segments, not the snapshot.
	loaded := h.node(s).logsWithKey("wal.snapshot-loaded")
	var keptAt uint64
	if len(loaded) != 1 || !strings.Contains(loaded[0].Text, "kept") {
		t.Fatalf("n%d's recovery did not start from the state it kept:\n%s", s, h.node(s).logDump())
	}
	if _, err := fmt.Sscanf(loaded[0].Text, "loaded the state this standby kept at lsn %d", &keptAt); err != nil {
		t.Fatalf("n%d's recovery did not start from an advanced state (%v): %s", s, err, loaded[0].Text)
	}
	// It replays what came since its last advance: less than one share
	// of the interval past it, and the batch that crossed it.
	if wantLSN-keptAt > 2*100/advanceShare {
		t.Errorf("n%d's recovery replays lsn %d to %d: its kept state should be within %d records of the log's end", s, keptAt+1, wantLSN, 2*100/advanceShare)
	}
	// The other standby held the same log: it is caught up from the
	// record recovery replayed last, kept in memory, and the new term's
	// (recentlog.go), with no segment read again.
	if !h.advanceUntil(5*time.Second, func() bool { return len(h.node(s).logsWithKey("repl.caught-up")) > 0 }) {
		t.Fatalf("n%d caught the other standby up with nothing:\n%s", s, h.node(s).logDump())
	}
	read := map[string]bool{}
	for _, op := range h.node(s).opsOf(sm.OpRead)[readsBefore:] {
		if read[op.Path] {
			t.Errorf("n%d read %s again after its recovery", s, op.Path)
		}
		read[op.Path] = true
		if strings.HasPrefix(op.Path, wal.SnapDir+"/") {
			t.Errorf("n%d's recovery read %s", s, op.Path)
		}
		if op.Bulk || op.Background {
			t.Errorf("n%d's recovery read %s with Bulk %v, Background %v: a promotion waits for it", s, op.Path, op.Bulk, op.Background)
		}
		if first, ok := wal.ParseSegmentName(strings.TrimPrefix(op.Path, wal.WALDir+"/")); ok && first <= keptAt {
			t.Errorf("n%d's recovery read %s, whose records its kept state (lsn %d) holds", s, op.Path, keptAt)
		}
	}
	got, gotLSN, _ := h.node(s).n.JobState()
	if gotLSN < wantLSN {
		t.Fatalf("n%d recovered to lsn %d, the old primary was at %d", s, gotLSN, wantLSN)
	}
	gs := got.Export()
	if len(gs.Jobs) != len(wantState.Jobs) { // (a new term numbers its jobs anew: NextID differs)
		t.Fatalf("n%d recovered %d jobs; the old primary held %d", s, len(gs.Jobs), len(wantState.Jobs))
	}
	for k := range gs.Jobs {
		if !reflect.DeepEqual(gs.Jobs[k], wantState.Jobs[k]) {
			t.Fatalf("n%d recovered job %d as\n%+v\nthe old primary held\n%+v", s, k, gs.Jobs[k], wantState.Jobs[k])
		}
	}
}

// A restarted standby keeps no job state in memory; its first advance,
// MaxWALRecords/advanceShare records after it rejoins, builds it from
// its newest snapshot and the segments after it, as a checkpoint would
// (compact.go). A promotion after that starts from the state, reads no
// snapshot and imports nothing, instead of waiting for the next
// checkpoint's interval to end.
func TestRestartedStandbyKeepsItsStateAtItsFirstAdvance(t *testing.T) {
	h, p := threeNodesWith(t, func(o *sm.Options) { o.MaxWALRecords = 100 })
	s := (p + 1) % 3
	enqueueN(t, h, p, 150, 1000)
	if !slices.ContainsFunc(h.node(s).logsWithKey("repl.compacted"), func(l sm.Log) bool { return strings.Contains(l.Text, "written") }) {
		t.Fatalf("n%d wrote no checkpoint before its restart:\n%s", s, h.node(s).logDump())
	}
	h.restart(s)
	h.advance(5 * time.Second)
	for k := range 40 { // single writes, a record each, more than a share of 100
		enqueueN(t, h, p, 1, uint64(2000+k))
	}
	if n := len(h.node(s).logsWithKey("repl.advanced")); n == 0 {
		t.Fatalf("n%d did not advance after its restart:\n%s", s, h.node(s).logDump())
	}
	if len(h.node(s).logsWithKey("repl.compacting")) > 0 {
		t.Fatalf("n%d checkpointed after its restart: the test wants its state built by an advance", s)
	}
	want, wantLSN, _ := h.node(p).n.JobState()
	wantJobs := want.Export().Jobs
	readsBefore := len(h.node(s).opsOf(sm.OpRead))
	h.kill(p)
	if !h.advanceUntil(20*time.Second, func() bool {
		_, _, rec := h.node(s).n.JobState()
		return h.node(s).n.Role() == sm.RolePrimary && rec
	}) {
		t.Fatalf("n%d was not promoted and recovered:\n%s", s, h.node(s).logDump())
	}
	if !slices.ContainsFunc(h.node(s).logsWithKey("wal.snapshot-loaded"), func(l sm.Log) bool { return strings.Contains(l.Text, "this standby kept") }) {
		t.Errorf("n%d's recovery did not start from the state its advance built:\n%s", s, h.node(s).logDump())
	}
	for _, op := range h.node(s).opsOf(sm.OpRead)[readsBefore:] {
		if strings.HasPrefix(op.Path, wal.SnapDir+"/") {
			t.Errorf("n%d's recovery read %s", s, op.Path)
		}
	}
	got, gotLSN, _ := h.node(s).n.JobState()
	if gotLSN < wantLSN {
		t.Fatalf("n%d recovered to lsn %d, the old primary was at %d", s, gotLSN, wantLSN)
	}
	if gs := got.Export(); !reflect.DeepEqual(gs.Jobs, wantJobs) {
		t.Fatalf("n%d recovered %d jobs, not the %d the old primary held as it held them", s, len(gs.Jobs), len(wantJobs))
	}
}

// Before its first checkpoint a standby's advances build on the state
// the one before kept, the log's from its start: with no snapshot on
// disk yet, each reads only the segments since, not the whole log again
// (each advance from scratch made a fresh standby's work grow with the
// square of its log).
func TestAdvancesBeforeTheFirstCheckpointBuildOnTheLast(t *testing.T) {
	h, p := threeNodesWith(t, func(o *sm.Options) { o.MaxWALRecords = 100 })
	for k := range 60 { // single writes, a record each: advances at every 12
		enqueueN(t, h, p, 1, uint64(1000+k))
	}
	for s := range 3 {
		if s == p {
			continue
		}
		hn := h.node(s)
		if len(hn.logsWithKey("repl.compacting")) > 0 {
			continue // its first checkpoint came early (firstSegLimit)
		}
		if n := len(hn.logsWithKey("repl.advanced")); n < 3 {
			t.Fatalf("n%d advanced %d times over 60 records; want at least 3:\n%s", s, n, hn.logDump())
		}
		seen := map[string]bool{}
		for _, op := range hn.opsOf(sm.OpRead) {
			if seen[op.Path] {
				t.Errorf("n%d read %s twice: an advance rebuilt the log from its start", s, op.Path)
			}
			seen[op.Path] = true
		}
		return
	}
	t.Fatalf("every standby checkpointed within 60 records")
}

// A snapshot installed from the primary replaces the state a standby's
// last checkpoint kept (ckptBase): the next checkpoint builds on the
// installed snapshot, read from disk, not on the state from before the
// install. The standby is cut off while the primary checkpoints past
// what it has (no retained records, and a sync buffer of 1 KiB keeps it
// out of the primary's recent log), so it rejoins by snapshot.
func TestStandbyCheckpointAfterInstallReadsTheInstalledSnapshot(t *testing.T) {
	h, p := threeNodesWith(t, func(o *sm.Options) {
		o.MaxWALRecords, o.RetainWALRecords, o.SyncBufferBytes = 100, 0, 1<<10
	})
	s, other := (p+1)%3, (p+2)%3
	enqueueN(t, h, p, 150, 1000)
	if len(h.node(s).logsWithKey("repl.compacted")) == 0 {
		t.Fatalf("n%d did not checkpoint before the cut", s)
	}
	h.cutLink(p, s)
	h.cutLink(other, s)
	enqueueN(t, h, p, 250, 2000)
	synced := len(h.node(s).logsWithKey("repl.synced"))
	h.heal()
	if !h.advanceUntil(20*time.Second, func() bool { return len(h.node(s).logsWithKey("repl.synced")) > synced }) {
		t.Fatalf("n%d did not rejoin by snapshot:\n%s", s, h.node(s).logDump())
	}
	if h.node(p).n.Role() != sm.RolePrimary {
		t.Fatalf("n%d lost the primary role during the partition", p)
	}
	readsBefore := 0
	for _, op := range h.node(s).opsOf(sm.OpRead) {
		if strings.HasPrefix(op.Path, wal.SnapDir+"/") {
			readsBefore++
		}
	}
	compacted := len(h.node(s).logsWithKey("repl.compacted"))
	for k := range 120 { // single writes, a record each: several advances' worth before its first checkpoint
		enqueueN(t, h, p, 1, uint64(3000+k))
	}
	if len(h.node(s).logsWithKey("repl.compacted")) == compacted {
		t.Fatalf("n%d did not checkpoint after the install:\n%s", s, h.node(s).logDump())
	}
	reads := 0
	for _, op := range h.node(s).opsOf(sm.OpRead) {
		if strings.HasPrefix(op.Path, wal.SnapDir+"/") {
			reads++
		}
	}
	if reads == readsBefore {
		t.Errorf("n%d's first checkpoint after the install read no snapshot: it built on the state from before the install", s)
	}
	// Its first checkpoint builds the state, not an advance before it:
	// the snapshot just received is not read back in the sync's wake.
	installed := slices.IndexFunc(h.node(s).logs, func(l sm.Log) bool { return l.Key == "repl.synced" })
	for _, l := range h.node(s).logs[installed:] {
		if l.Key == "repl.compact-built" {
			break
		}
		if l.Key == "repl.advancing" {
			t.Errorf("n%d advanced its state after the install, before its first checkpoint: %s", s, l.Text)
			break
		}
	}
}

// A promotion's recovery takes the state a standby checkpoint kept only
// under the config it was built with: after an upgrade that removed a
// queue, the kept state still holds that queue's jobs, which a recovery
// from the files routes to lost_and_found, and so must this one.
func TestPromotionAfterUpgradeRoutesAsTheFilesWould(t *testing.T) {
	h, p := threeNodesWith(t, func(o *sm.Options) { o.MaxWALRecords, o.EnableUpgrade = 100, true })
	enqueueN(t, h, p, 150, 1000) // into q0
	for i := range 3 {
		if i != p && len(h.node(i).logsWithKey("repl.compacted")) == 0 {
			t.Fatalf("standby n%d did not checkpoint", i)
		}
	}
	c := &schema.ClusterConfig{ConfigGeneration: 2, ClusterName: "Q", Port: 7000,
		Queues: []*schema.Queue{{Id: 2, Name: "q1", VisibilityTimeoutS: 30, MaxAttempts: 5}}, Hosts: []*schema.Host{{Name: "h0"}}}
	blob, err := schema.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256Sum(blob)
	h.enqueue(p, sm.UpgradeConfig{ID: 77, Bytes: blob, SHA256: sum[:], Restart: true})
	if !h.advanceUntil(10*time.Second, func() bool { return !h.node(p).up }) {
		t.Fatalf("n%d did not restart after the upgrade:\n%s", p, h.node(p).logDump())
	}
	var np int
	if !h.advanceUntil(20*time.Second, func() bool {
		for i := range 3 {
			if _, _, rec := h.node(i).n.JobState(); i != p && h.node(i).n.Role() == sm.RolePrimary && rec {
				np = i
				return true
			}
		}
		return false
	}) {
		t.Fatal("no standby was promoted and recovered after the upgrade")
	}
	q, _, _ := h.node(np).n.JobState()
	jobs := q.Export().Jobs
	if len(jobs) != 150 {
		t.Fatalf("n%d recovered %d jobs, want 150", np, len(jobs))
	}
	for _, j := range jobs {
		if j.Queue != sm.LostAndFound {
			t.Fatalf("n%d recovered job %d in queue %q, removed by the upgrade: want it in %s", np, j.ID, j.Queue, sm.LostAndFound)
		}
	}
}

// ckptPromotion is a cluster whose standby s was promoted, its primary
// killed, while s's second checkpoint had an effect parked by hold: the
// old primary's state (want at wantLSN) and how many reads s had issued
// before (readsBefore).
type ckptPromotion struct {
	h           *harness
	s           int
	want        []queue.Job
	wantLSN     uint64
	readsBefore int
	id          uint64
}

// advanceShare is sm's: the kept state advances every
// MaxWALRecords/advanceShare records (compact.go).
const advanceShare = 8

// promoteDuringCheckpoint runs 70-job rounds until s's second checkpoint
// parks an effect that hold picks (the first left a snapshot on disk,
// which a recovery without a kept state would read and import; the
// advances between them run as they come), 30 more jobs (records after
// the checkpoint's position), then kills the primary and waits until s
// is primary.
func promoteDuringCheckpoint(t *testing.T, hold func(sm.Effect) bool) *ckptPromotion {
	t.Helper()
	h, p := threeNodesWith(t, func(o *sm.Options) { o.MaxWALRecords = 100 })
	s := (p + 1) % 3
	second := func() bool { // the second checkpoint began: no advance runs until it ends
		return len(h.node(s).logsWithKey("repl.compacting")) >= 2
	}
	h.hold = func(i int, e sm.Effect) bool { return i == s && hold(e) && second() }
	id := uint64(100)
	for round := 0; round < 8 && len(h.held) == 0; round++ {
		enqueueN(t, h, p, 70, id)
		id += 70
	}
	if len(h.held) == 0 {
		t.Fatalf("n%d's second checkpoint parked nothing:\n%s", s, h.node(s).logDump())
	}
	enqueueN(t, h, p, 30, id)
	want, wantLSN, _ := h.node(p).n.JobState()
	cp := &ckptPromotion{h: h, s: s, want: want.Export().Jobs, wantLSN: wantLSN, readsBefore: len(h.node(s).opsOf(sm.OpRead)), id: id + 30}
	h.kill(p)
	if !h.advanceUntil(20*time.Second, func() bool { return h.node(s).n.Role() == sm.RolePrimary }) {
		t.Fatalf("n%d was not promoted:\n%s", s, h.node(s).logDump())
	}
	return cp
}

// recovered waits for s's recovery and checks that it began from a state
// kept in memory (its wal.snapshot-loaded line says loaded), read no
// snapshot, and holds the old primary's jobs as it held them; then the
// parked effects run and s goes on serving.
func (cp *ckptPromotion) recovered(t *testing.T, loaded string) {
	t.Helper()
	h, s := cp.h, cp.s
	if !h.advanceUntil(20*time.Second, func() bool { _, _, rec := h.node(s).n.JobState(); return rec }) {
		t.Fatalf("n%d did not recover:\n%s", s, h.node(s).logDump())
	}
	if !slices.ContainsFunc(h.node(s).logsWithKey("wal.snapshot-loaded"), func(l sm.Log) bool { return strings.Contains(l.Text, loaded) }) {
		t.Errorf("n%d's recovery did not start from the state kept in memory (%q):\n%s", s, loaded, h.node(s).logDump())
	}
	for _, op := range h.node(s).opsOf(sm.OpRead)[cp.readsBefore:] {
		if strings.HasPrefix(op.Path, wal.SnapDir+"/") {
			t.Errorf("n%d's recovery read %s", s, op.Path)
		}
	}
	got, gotLSN, _ := h.node(s).n.JobState()
	if gotLSN < cp.wantLSN {
		t.Fatalf("n%d recovered to lsn %d, the old primary was at %d", s, gotLSN, cp.wantLSN)
	}
	if gs := got.Export(); !reflect.DeepEqual(gs.Jobs, cp.want) { // (a new term numbers its jobs anew: NextID differs)
		t.Fatalf("n%d recovered %d jobs, not the %d the old primary held as it held them", s, len(gs.Jobs), len(cp.want))
	}
	h.hold = nil
	h.releaseHeld()
	h.run()
	enqueueN(t, h, s, 10, cp.id+100)
}

// A promotion while a standby checkpoint's snapshot is being encoded and
// written (the encode held, as by an executor busy with a million jobs)
// starts from the state that checkpoint built (compactBuilt): it reads
// no snapshot and imports nothing, and so never waits for the encode
// still at work on the compute lane.
func TestPromotionDuringStandbyCheckpointWriteStartsFromItsState(t *testing.T) {
	cp := promoteDuringCheckpoint(t, func(e sm.Effect) bool {
		c, ok := e.(sm.Compute)
		return ok && c.Kind == sm.ComputeEncodeTo
	})
	cp.recovered(t, "past its newest snapshot")
}

// A promotion while a standby checkpoint still builds its state (the
// build held) waits for that build and recovers from its state: it reads
// no snapshot meanwhile, and recovers only once the build completes.
func TestPromotionDuringStandbyCheckpointBuildWaitsForIt(t *testing.T) {
	cp := promoteDuringCheckpoint(t, func(e sm.Effect) bool {
		c, ok := e.(sm.Compute)
		return ok && c.Kind == sm.ComputeBuild
	})
	h, s := cp.h, cp.s
	h.advance(time.Second)
	if _, _, rec := h.node(s).n.JobState(); rec {
		t.Fatalf("n%d recovered before the build it waits for completed", s)
	}
	if len(h.node(s).logsWithKey("wal.recovery-waits")) != 1 {
		t.Errorf("n%d did not say its recovery waits for the build:\n%s", s, h.node(s).logDump())
	}
	h.hold = nil
	h.releaseHeld()
	cp.recovered(t, "past its newest snapshot")
}

// A promotion while a standby checkpoint still reads its segments (held)
// takes back the state the checkpoint took to build on, which it has not
// changed yet: recovery reads no snapshot.
func TestPromotionDuringStandbyCheckpointReadsTakesItsBase(t *testing.T) {
	cp := promoteDuringCheckpoint(t, func(e sm.Effect) bool {
		op, ok := e.(sm.FileOp)
		return ok && op.Bulk && strings.HasPrefix(op.Path, wal.WALDir+"/")
	})
	cp.recovered(t, "kept")
}

// A standby resynced again and again (a link that loses a records
// message every few batches: each loss is a gap, a resync, a new sync)
// still checkpoints once MaxWALRecords records have been appended since
// its last checkpoint: the count is its log's, not each sync's. Counted per
// sync it never reached one, and its log grew in small segments, one per
// sync, that a promotion then replayed one by one.
func TestStandbyResyncedOftenStillCheckpoints(t *testing.T) {
	resyncedOften(t, 100, 60, 5)
}

// With MaxWALRecords far off, a standby resynced every other batch still
// checkpoints once it has begun 64 segments (maxCkptSegments), a
// segment a sync: a promotion reads and fsyncs every segment past its
// last checkpoint before it serves.
func TestStandbyResyncedOftenBoundsItsSegments(t *testing.T) {
	resyncedOften(t, 10000, 400, 1)
}

// resyncedOften writes rounds x per jobs through the primary of three
// nodes, MaxWALRecords max, losing every fourth records message to a
// standby, which must have resynced often and checkpointed.
func resyncedOften(t *testing.T, max, rounds, per int) {
	t.Helper()
	h, p := threeNodesWith(t, func(o *sm.Options) { o.MaxWALRecords = max })
	s := (p + 1) % 3
	batches := 0
	h.onStep = func(i int, _ sm.Input, _ []sm.Effect) {
		if i != p {
			return
		}
		for k, q := range h.queue {
			if r, ok := q.in.(sm.Recv); ok && q.node == s && r.From == p && r.Msg.Type == sm.MsgReplRecords && !r.Msg.CatchUp {
				if batches++; batches%4 == 0 { // lost on the way: the next batch shows a gap
					h.queue = slices.Delete(h.queue, k, k+1)
				}
				return
			}
		}
	}
	id := uint64(100)
	for range rounds {
		enqueueN(t, h, p, per, id)
		id += uint64(per)
	}
	h.onStep = nil
	syncs := len(h.node(s).logsWithKey("repl.catching-up"))
	if syncs < rounds/8 {
		t.Fatalf("n%d resynced %d times: the losses did not make it resync often", s, syncs)
	}
	if len(h.node(s).logsWithKey("repl.compacting")) == 0 {
		t.Fatalf("n%d appended %d records over %d syncs, MaxWALRecords %d, and never checkpointed:\n%s", s, rounds*per, syncs, max, h.node(s).logDump())
	}
}
