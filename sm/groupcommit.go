package sm

import "time"

// Group commit that waits for its writers. A batch is written when the
// write before it lands; records arriving meanwhile share the next write.
// With concurrent clients that each wait for their answer before sending
// again, that splits them into two groups for good: the clients a write
// answers send again while the next write, started the moment the first
// landed, is already out, and so every request waits for two writes
// (16 clients on 3 nodes: five submits to an fsync; docs/performance.md).
// So a small batch waits for the write before it to be committed
// (replicated as its replies need), and then until as many client
// requests wait in it as that write answered plus those that waited with
// it (the clients it answered having sent again), or until groupWait has
// passed: one group, each request waiting for one write. A lone client
// never waits (the one request it sent is all that is expected), nor do
// records no client waits for (a sweep); a client that went away costs
// the others one wait, and is then no longer expected. A batch of
// groupBytes or more is written at once, as before: a heavy load keeps
// its writes overlapping their round trips.

// groupWait bounds how long a small batch waits for the writers of the
// last one (the time for a client answered to send again).
const groupWait = 500 * time.Microsecond

// groupBytes is the size from which a batch is written without waiting.
const groupBytes = 64 << 10

// groupCommit is the journal's wait state: the newest write not yet seen
// committed, and how many requests the next one waits for.
type groupCommit struct {
	last     uint64 // LSN of the newest write's last record; 0: it is committed
	expect   int    // client requests the next write waits for
	armedFor uint64 // first LSN of the batch a wait was armed for (0: none)
	// over: first LSN of the batch whose wait has ended. Not folded into
	// expect: a batch whose time ran out while the write before it was
	// still uncommitted goes once that commits, where the commit's new
	// expect would make it wait a second time (the golden "commit" file).
	over uint64
}

// holdBatch reports whether the oldest pending batch b (no write in
// flight) waits: for the write before it to commit, then for its group.
func (jl *journal) holdBatch(b *walBatch) bool {
	j := jl.jobs
	g := &j.group
	if len(j.batches) > 1 || len(b.data) >= groupBytes || b.seg != j.seg {
		// Large, or behind another, or the last of a segment a checkpoint
		// rolled away from: a checkpoint's removal skips a segment a batch
		// is still to be written to (removeSegments).
		return false
	}
	if g.last > 0 {
		return true // resumeWAL once it is committed (noteCommit)
	}
	// Every request still waiting has its record in b: the write before
	// it is committed, and its requests were answered (releaseWaiting).
	// A batch no client waits for (a sweep's) has nobody to group with.
	if len(j.waiting) == 0 || len(j.waiting) >= g.expect || g.over == b.firstLSN {
		return false
	}
	if g.armedFor != b.firstLSN {
		g.armedFor = b.firstLSN
		jl.setTimer(TimerGroupCommit, groupWait)
	}
	return true
}

// noteCommit runs where replies are released, before they are: once the
// newest write is committed, the next waits for as many requests as wait
// now, those it answers (whose clients, answered from here on, have not
// sent again) and those waiting in the batch after it.
func (jl *journal) noteCommit() {
	j := jl.jobs
	g := &j.group
	if g.last == 0 || !jl.answerable(g.last) {
		return
	}
	g.expect, g.last = len(j.waiting), 0
}

// wrote notes a batch's write starting: the next one waits for its
// commit.
func (g *groupCommit) wrote(b walBatch) {
	g.last, g.armedFor = b.lastLSN, 0
}

// groupWaitOver: the wait of the oldest batch has ended; write it.
func (jl *journal) groupWaitOver() {
	j := jl.jobs
	if j == nil || len(j.batches) == 0 || j.writing {
		return
	}
	j.group.over = j.batches[0].firstLSN
	jl.resumeWAL()
}

// resumeWAL writes the oldest batch if it may have waited for a commit or
// for its group that has come, unless records are being added for one
// write (jobState.hold).
func (jl *journal) resumeWAL() {
	if j := jl.jobs; j != nil && j.recovered && !j.hold {
		jl.flushWAL()
	}
}
