package sm

import (
	"fmt"
	"strconv"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/tracker"
	"github.com/xce-hpc/xce/sm/wal"
)

// WAL replication (DESIGN §4.4). A standby that joins gets a snapshot of
// the primary's job state, then every WAL batch the primary writes; it
// appends and fsyncs them and acknowledges its durable LSN (also on every
// heartbeat, which doubles as liveness). A client reply waits for the
// primary's fsync and for the acks of SyncStandbys live, synced standbys
// (fewer if fewer are live: a standby that stops acknowledging for the
// failure timeout no longer holds writes up). Elections prefer the
// freshest log: (term of its last record, LSN).

// replPeer is the primary's view of one standby's copy of the log: its
// progress (sm/tracker) and the sync work under way for it.
type replPeer struct {
	*tracker.Progress
	catchUp *catchUpRead // reading our log to catch it up (catchup.go)
	snap    *snapSend    // the snapshot it is being sent (snapsync.go)
	// truncating: told its log diverges (catchup.go), it truncates and
	// joins again; nothing is streamed to it meanwhile.
	truncating bool
}

// standbyRepl is a standby's replicated log.
type standbyRepl struct {
	owner owner // its generation (setSync): its operations' owner
	// epoch names the sync, and with it the promotion it belongs to
	// (newSyncEpoch): a batch of another sync is not part of it.
	epoch      uint64
	expect     uint64 // next LSN to append
	seg        string
	segLimit   int // records since the last checkpoint that make one due (firstSegLimit, then MaxWALRecords)
	installing bool
	writing    bool
	queue      []Msg // records that arrived while installing or writing
	known      map[string]bool
	recv       *snapRecv   // the snapshot being received (snapsync.go)
	walker     *wal.Walker // reads each batch (drainRepl), one decoder for the sync
}

// logPos is a log's freshness: the term of its last record, then its LSN.
type logPos struct{ term, lsn uint64 }

func (a logPos) after(b logPos) bool { return a.term > b.term || a.term == b.term && a.lsn > b.lsn }

// startSync syncs standby s: from its log position when it asked for that
// and our log still holds the records after it (catchup.go), else with a
// snapshot of the current state followed by what we write next (its log
// is then rebuilt from ours, so a stepped-down primary's unreplicated
// suffix can never survive).
func (jp *joinedPeers) startSync(s int) {
	j := jp.journal.jobs
	if jp.role != RolePrimary || j == nil || !j.recovered {
		return // finishRecovery syncs every joined standby
	}
	if rp := j.repl[s]; rp != nil && rp.snap != nil && rp.snap.data == nil {
		// Its snapshot is being encoded (sendSnapshot): a join meanwhile is
		// the standby's timeout for a first chunk; another encode of the
		// whole state would only queue behind this one.
		delete(jp.joinPos, s)
		return
	}
	if jp.tryCatchUp(s) {
		return
	}
	jp.sendSnapshot(s)
}

// streamBatch sends a written batch to every standby whose snapshot is
// older than it, split so that no message exceeds the frame limit.
func (jp *joinedPeers) streamBatch(b walBatch) {
	j := jp.journal.jobs
	j.recent.add(b.data, b.firstLSN, b.lastLSN, j.lastTerm, jp.opt.SyncBufferBytes)
	for _, p := range sortedKeys(j.repl) {
		rp := j.repl[p]
		if b.lastLSN <= rp.StartLSN || rp.truncating {
			continue // all in its snapshot, or it is not in a sync
		}
		data := b.data
		if b.firstLSN <= rp.StartLSN {
			data = framesAfter(data, rp.StartLSN) // the batch straddles its snapshot
		}
		switch {
		case rp.catchUp != nil:
			rp.catchUp.held.hold(data, jp.opt.SyncBufferBytes) // sent after the records read from the log
		case rp.snap != nil && rp.snap.data == nil:
			rp.snap.early.hold(data, jp.opt.SyncBufferBytes) // sent after the snapshot's first chunk
		default:
			jp.sendRecords(p, rp, data)
		}
	}
}

// heldBatches are batches written while a sync cannot take them yet (its
// snapshot being encoded, its records being read from our log), at most
// a bound of bytes (Options.SyncBufferBytes); past it none (overflow):
// the standby gets them from the log.
type heldBatches struct {
	batches  [][]byte
	bytes    int
	overflow bool
}

// hold keeps a batch, within limit bytes.
func (h *heldBatches) hold(data []byte, limit int) {
	if h.overflow || h.bytes+len(data) > limit {
		*h = heldBatches{overflow: true}
		return
	}
	h.batches = append(h.batches, data)
	h.bytes += len(data)
}

// heldRun is the records written while a standby's snapshot is encoded,
// packed as they come into messages of up to the frame limit, at most a
// bound of bytes (Options.SyncBufferBytes); past it none (overflow): the
// standby gets them from the log. Packed at once after the encode, up to
// 32 MiB copied into fresh memory in one step, they held the primary's
// step for 98–123 ms at 1M jobs (docs/performance.md, 2026-12-06).
type heldRun struct {
	msgs     [][]byte // complete messages
	open     []byte   // the message being filled (ours: batches are copied in)
	bytes    int
	overflow bool
}

// hold packs a batch, within limit bytes. A batch over the frame limit
// goes as its own messages (split at frames, not copied).
func (h *heldRun) hold(data []byte, limit int) {
	if h.overflow || h.bytes+len(data) > limit {
		*h = heldRun{overflow: true}
		return
	}
	h.bytes += len(data)
	if len(h.open) > 0 && len(h.open)+len(data) > MaxConfigSize {
		h.msgs, h.open = append(h.msgs, h.open), nil
	}
	if len(data) > MaxConfigSize {
		h.msgs = append(h.msgs, splitFrames(data, MaxConfigSize)...)
		return
	}
	if h.open == nil {
		h.open = make([]byte, 0, min(MaxConfigSize, max(len(data), 64<<10)))
	}
	h.open = append(h.open, data...)
}

// messages is the run in messages, in order.
func (h *heldRun) messages() [][]byte {
	if len(h.open) > 0 {
		return append(h.msgs, h.open)
	}
	return h.msgs
}

// sendRecords streams written records to standby s, split so that no
// message exceeds the frame limit.
func (jp *joinedPeers) sendRecords(s int, rp *replPeer, data []byte) {
	for _, chunk := range splitFrames(data, MaxConfigSize) {
		jp.el.send(s, Msg{Type: MsgReplRecords, ReqID: rp.Epoch, Bytes: chunk})
	}
}

// framesAfter returns the frames of data with LSN > lsn.
func framesAfter(data []byte, lsn uint64) []byte {
	cut := len(data)
	_, _ = wal.WalkPositions(data, func(off int, l, _ uint64) error {
		if l > lsn && off < cut {
			cut = off
		}
		return nil
	})
	return data[cut:]
}

// splitFrames cuts WAL frames into chunks of at most limit bytes at frame
// boundaries (a single larger frame travels alone).
func splitFrames(data []byte, limit int) [][]byte {
	if len(data) <= limit {
		return [][]byte{data} // the common case: no need to walk the frames
	}
	var out [][]byte
	start, last := 0, 0
	_, _ = wal.WalkPositions(data, func(off int, _, _ uint64) error {
		if off-start > limit && last > start {
			out = append(out, data[start:last])
			start = last
		}
		last = off
		return nil
	})
	if len(data)-start > limit && last > start {
		out = append(out, data[start:last])
		start = last
	}
	return append(out, data[start:])
}

func (jp *joinedPeers) onReplAck(from int, m Msg) {
	j := jp.journal.jobs
	if jp.role != RolePrimary || j == nil {
		return
	}
	if m.Term < jp.el.viewTerm() {
		// Sent in an older term, when the standby followed an earlier
		// primary (this node's earlier promotion, say): a late message.
		// Its epoch names no sync of ours (newSyncEpoch), and it is no
		// sign that the standby follows us now, so it starts no sync
		// either.
		return
	}
	rp := j.repl[from]
	if rp == nil {
		// A standby that follows us but whose join we never got (a lost
		// message): start its sync now, so it counts, and holds writes up,
		// from here on.
		if j.recovered {
			jp.standbys[from] = true
			jp.startSync(from)
		}
		return
	}
	rp.Heard(int64(jp.now.Mono), m.Error) // alive, synced or not: an unsynced live standby holds writes up
	if rp.Epoch != m.ReqID || rp.truncating {
		return
	}
	if m.Offset > 0 { // snapshot transfer progress: send what follows
		if rp.snap != nil {
			jp.sendChunk(from, rp, m.Offset)
		}
		return
	}
	rp.snap = nil
	rp.Ack(m.WALPos, int64(jp.now.Mono))
	jp.catchUpAcked(from, rp, m.WALPos)
	jp.journal.releaseWaiting()
	jp.journal.resumeWAL()
}

// --- standby side ---

// ackRepl tells the primary our durable position (epoch 0 when not
// synced: then it only says we are alive); a standby without a sync asks
// for one again after a failure timeout (the snapshot may have been lost).
func (sl *standbyLog) ackRepl() {
	if sl.role != RoleStandby || sl.el.primary < 0 {
		return
	}
	sr := sl.srepl
	if sr == nil && sl.conf.fetch == nil && int64(sl.now.Mono)-sl.syncAsked > int64(sl.opt.FailureTimeout) {
		sl.resync()
		return
	}
	var epoch uint64
	if sr != nil && !sr.installing {
		epoch = sr.epoch
	}
	m := Msg{Type: MsgReplAck, ReqID: epoch}
	if sr != nil && sr.recv != nil && sr.recv.written > 0 {
		m.ReqID, m.Offset = sr.epoch, sr.recv.written // send me what follows
	}
	if sl.replFailure != "" {
		m.Status, m.Error = 1, sl.replFailure // the primary's status shows why
	}
	sl.el.send(sl.el.primary, m)
}

func (sl *standbyLog) onReplRecords(from int, m Msg) {
	if sl.quorumMode() && m.Term < sl.el.ha.term {
		return // a deposed primary's (or a late) sync: not ours to write
	}
	if m.CatchUp {
		sl.onCatchUp(from, m)
		return
	}
	sr := sl.srepl
	if sl.role == RoleStandby && from == sl.el.primary && m.ReqID > sl.epochSeen {
		// Records of a sync our primary began with us whose first
		// message (the catch-up's start) never came: it counts only
		// that sync's acks, and ours carry the older one's. Neither
		// side would move again, and where the primary needs our acks
		// for a majority its writes would wait for good. The next
		// heartbeat asks for a sync again (missedSyncStart).
		sl.missedSync = max(sl.missedSync, m.ReqID)
		return
	}
	if sl.role != RoleStandby || from != sl.el.primary || sr == nil || m.ReqID != sr.epoch {
		return
	}
	sr.queue = append(sr.queue, m)
	sl.drainRepl()
}

// missedSyncStart runs at each heartbeat of our primary: if records of a
// sync we never saw start came, ask for a sync again, at most once a
// failure timeout (a start merely overtaken by a later message costs one
// more sync).
func (sl *standbyLog) missedSyncStart() {
	if sl.missedSync <= sl.epochSeen {
		sl.missedSync = 0
		return
	}
	if sl.syncAsked != 0 && int64(sl.now.Mono)-sl.syncAsked < int64(sl.opt.FailureTimeout) {
		return
	}
	sl.log(Info, "repl.missed-sync", fmt.Sprintf("records of sync %s, which %s began with us but we never saw start: asking to be caught up again", SyncName(sl.missedSync), sl.peerName(sl.el.primary)))
	sl.missedSync = 0
	sl.resync()
}

// batchSpan is what drainRepl reads of a batch: its first and last
// records' positions and how many records it holds.
type batchSpan struct {
	first, last logPos
	count       int
}

// add is the Walk callback that takes each record in turn.
func (b *batchSpan) add(_ int, r *schema.WalRecord) error {
	if b.count == 0 {
		b.first = logPos{term: r.GetTerm(), lsn: r.GetLsn()}
	}
	b.last = logPos{term: r.GetTerm(), lsn: r.GetLsn()}
	b.count++
	return nil
}

// drainRepl appends queued record batches one at a time.
func (sl *standbyLog) drainRepl() {
	sr := sl.srepl
	if sr == nil || sr.installing || sr.writing || len(sr.queue) == 0 {
		return
	}
	m := sr.queue[0]
	sr.queue = sr.queue[1:]
	// The batch's first and last positions and its length: a Walker
	// accepts what Scan accepts (its decoder is proto.Unmarshal's),
	// without a record made per frame.
	if sr.walker == nil {
		sr.walker = new(wal.Walker)
	}
	var span batchSpan
	valid, err := sr.walker.Walk(m.Bytes, span.add)
	first, last, count := span.first, span.last, span.count
	if err != nil || count == 0 || valid != len(m.Bytes) {
		sl.log(Warn, "repl.bad-records", fmt.Sprintf("unusable WAL records from the primary (%v): resyncing", err))
		sl.resync()
		return
	}
	switch {
	case last.lsn < sr.expect: // already have them
		sl.drainRepl()
		return
	case first.lsn != sr.expect:
		sl.log(Warn, "repl.gap", fmt.Sprintf("WAL records from lsn %d where %d was expected: resyncing", first.lsn, sr.expect))
		sl.resync()
		return
	}
	sr.writing = true
	sl.replWriting++
	seg, newSeg := sr.seg, !sr.known[sr.seg]
	// The append is the log's (it lands whatever sync asked for it; a
	// promotion drops its completion: pending.go); the sync goes on only if
	// it is still the standby's.
	prev := sl.ops.own(sl.ops.logOwner())
	sl.run(appendOps(seg, m.Bytes, newSeg, wal.WALDir), standbyStep{kind: standbyAppended, sr: sr, seg: seg, end: last, count: count})
	sl.ops.cur = prev
}

// standbyStep is what resumes when a replicated batch is durable: the
// standby's log goes on from its end.
type standbyStep struct {
	kind  standbyKind
	sr    *standbyRepl
	seg   string
	end   logPos // the batch's last record
	count int    // records in the batch
}

type standbyKind uint8

const (
	standbyAppended standbyKind = iota // append → fsync → [fsync dir] done: advance, ack, drain
)

var standbyKindNames = [...]string{"appended"}

func (s standbyStep) String() string {
	return fmt.Sprintf("standby: %s %d records to %s, up to lsn %d (term %d)", standbyKindNames[s.kind], s.count, s.seg, s.end.lsn, s.end.term)
}

func (s standbyStep) resume(n *Node, r result) {
	switch s.kind {
	case standbyAppended:
		n.sb.appendedRepl(s, r)
	}
}

// appendedRepl: a batch of s.count records ending at s.end is durable in
// s.seg (appendOps), or its append failed, which stops the node.
func (sl *standbyLog) appendedRepl(s standbyStep, r result) {
	if r.failed != "" {
		sl.node.die("fatal.wal-append", fmt.Sprintf("replicated WAL append to %s failed: %s %s", s.seg, r.Err, r.Detail))
		return
	}
	sl.replWriting--
	if !sl.disk.logUnknown {
		// On disk whoever asked: a later catch-up starts here.
		sl.disk.logPos = s.end
	}
	sr := s.sr
	if !sl.ops.syncLive(sr) {
		return
	}
	if !sr.known[s.seg] {
		sl.sinceCkpt.segments++
	}
	sr.known[s.seg] = true
	sr.writing = false
	sr.expect = s.end.lsn + 1
	sl.sinceCkpt.records += s.count
	sl.sinceCkpt.unkept += s.count
	sl.ackRepl()
	sl.maybeCompact(sr)
	sl.drainRepl()
}

// behindMark is where a standby's log stood when it was first seen behind
// its primary's with nothing arriving, and when; during a snapshot
// transfer, how much of the snapshot had arrived.
type behindMark struct {
	lsn     uint64
	written uint64 // snapshot bytes received
	since   int64  // Mono; 0: not behind
}

// checkBehind runs at each heartbeat of our primary, which carries the
// primary's durable position. A standby in a sync whose log stays behind
// it with nothing arriving or being written lost the message that carried
// the records (a lost batch shows as a gap only when a later one comes):
// with no later write it would wait forever, and in quorum mode the
// primary's last records could never commit (L5). A snapshot transfer
// waiting for its next chunk stalls the same way when the primary has
// started a newer sync whose first message was lost: the primary ignores
// the old sync's acks and the standby the new sync's records. After a
// failure timeout without progress it asks to be caught up from its
// position.
func (sl *standbyLog) checkBehind(m Msg) {
	sr := sl.srepl
	if sr == nil || sr.writing || len(sr.queue) > 0 || sl.disk.logUnknown || m.WALPos <= sl.disk.logPos.lsn || (sr.installing && !sr.recv.awaitingChunk()) {
		sl.behind = behindMark{}
		return
	}
	now := int64(sl.now.Mono)
	var written uint64
	if sr.recv != nil {
		written = sr.recv.written
	}
	if sl.behind.since == 0 || sl.behind.lsn != sl.disk.logPos.lsn || sl.behind.written != written {
		sl.behind = behindMark{lsn: sl.disk.logPos.lsn, written: written, since: now}
		return
	}
	if now-sl.behind.since < int64(sl.opt.FailureTimeout) {
		return
	}
	sl.behind = behindMark{}
	stalled := ""
	if written > 0 {
		stalled = fmt.Sprintf(" and its snapshot transfer at %d of %d bytes", written, sr.recv.total)
	}
	sl.log(Info, "repl.behind", fmt.Sprintf("our job log has stayed at lsn %d%s for %v while %s's is at lsn %d, with nothing arriving: asking to be caught up", sl.disk.logPos.lsn, stalled, sl.opt.FailureTimeout, sl.peerName(sl.el.primary), m.WALPos))
	sl.resync()
}

// resync asks the primary for a fresh snapshot (a Join restarts the sync).
func (sl *standbyLog) resync() {
	sl.setSync(nil)
	if sl.role == RoleStandby && sl.el.primary >= 0 {
		sl.syncAsked = int64(sl.now.Mono)
		sl.el.send(sl.el.primary, sl.joinMsg(sl.ops.id()))
	}
}

// --- freshness ---

// fresherPeer reports why this candidate should not declare yet: a peer
// that answered during this election has a fresher log (it, not we,
// should become primary: Patroni's rule, freshness beats priority), or a
// peer has not answered since the election began (it may be fresher).
// The caller bounds the deferrals, so a dead peer cannot stall it.
func (el *election) fresherPeer() (int, string) {
	for p := range el.opt.Peers {
		if p == el.opt.Self || p == el.failedP {
			continue
		}
		v, ok := el.views[p]
		switch {
		case !ok || v.at < el.cand.start:
			// In a failover, a silent peer may hold the freshest log; at
			// boot the seed's deadline stands (a peer not up yet is no
			// contender).
			if el.failover && el.cand.deferrals < maxUnheardDeferrals {
				return p, "has not answered yet"
			}
		case v.role != RolePrimary && v.pos.after(el.disk.logPos):
			return p, fmt.Sprintf("has a fresher job log (term %d, lsn %d > term %d, lsn %d)", v.pos.term, v.pos.lsn, el.disk.logPos.term, el.disk.logPos.lsn)
		}
	}
	return -1, ""
}

// peerView is what the last message from a peer said about it.
type peerView struct {
	role Role
	pos  logPos
	tag  uint64 // its config tag (0: none)
	at   int64
}

func (el *election) noteView(from int, m Msg) {
	if el.views == nil {
		el.views = map[int]peerView{}
	}
	el.views[from] = peerView{role: m.Role, pos: logPos{term: m.LogTerm, lsn: m.WALPos}, tag: m.ConfigTag, at: int64(el.now.Mono)}
}

// bestCandidate: in a failover election, every peer but the failed
// primary has answered since it began, and none has a fresher log or an
// equally fresh one with a higher priority.
func (el *election) bestCandidate() bool {
	for p := range el.opt.Peers {
		if p == el.opt.Self || p == el.failedP {
			continue
		}
		v, ok := el.views[p]
		if !ok || v.at < el.cand.start || v.role == RolePrimary || v.pos.after(el.disk.logPos) || v.pos == el.disk.logPos && p < el.opt.Self {
			return false
		}
	}
	return true
}

// newSyncEpoch numbers a sync this promotion starts. The term of the
// promotion is the epoch's upper half, so a node promoted again numbers
// its syncs above every epoch its earlier promotions used: a late message
// of an older sync (an ack on the primary's side, a sync's start, records
// or chunks on the standby's) never names a newer one, in either mode. A
// term past 2^32, which elections one at a time never reach, shares the
// top half, and its promotions number their syncs from there.
func (j *jobState) newSyncEpoch(term uint64) uint64 {
	j.replEpoch = max(j.replEpoch+1, min(term, 1<<32-1)<<32|1)
	return j.replEpoch
}

// SyncName writes a sync epoch as the term of its promotion and the
// sync's number in it: "3.2" is the second sync a primary of term 3
// started.
func SyncName(epoch uint64) string { return string(AppendSyncName(nil, epoch)) }

// AppendSyncName appends SyncName(epoch) to b (the simulator's traces
// write one per replication message).
func AppendSyncName(b []byte, epoch uint64) []byte {
	b = strconv.AppendUint(b, epoch>>32, 10)
	b = append(b, '.')
	return strconv.AppendUint(b, epoch&(1<<32-1), 10)
}

// setPeer makes rp standby s's sync; dropPeer ends it.
func (j *jobState) setPeer(s int, rp *replPeer) { j.repl[s], j.prog[s] = rp, rp.Progress }

func (j *jobState) dropPeer(s int) { delete(j.repl, s); delete(j.prog, s) }
