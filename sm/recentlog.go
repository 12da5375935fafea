package sm

// recentLog is the records a primary wrote last, the batches themselves,
// at most a bound of bytes: a catch-up from a position among them sends
// them from memory instead of reading our segments. A standby that loses
// a few records (a full send queue drops the oldest, as after a snapshot
// install on a loaded machine) is caught up at once; before, the primary
// read whole segments (100 MB at 1M jobs) on its I/O lane, where its own
// WAL appends, and every reply, waited behind them (docs/performance.md,
// 2026-12-06).
//
// A promotion's recovery puts the last record of each segment it
// replays there (segmentRead; they stay while they follow one another):
// a standby that held the same log, the usual case after a failover, is
// caught up from the last and the new term's records
// without a read of the segment that holds it (60–110 ms at 1M jobs, on
// the I/O lane the new primary's first appends wait on).
type recentLog struct {
	batches []recentBatch // oldest first, contiguous LSNs
	bytes   int
}

// recentBatch is one written batch: its frames, the LSNs they run over,
// and their term (a primary writes only its own; a recovery's last
// record is one record).
type recentBatch struct {
	data        []byte
	first, last uint64
	term        uint64
}

// recentLogBytes bounds a primary's recent log (with
// Options.SyncBufferBytes, if lower): a second or so of a loaded
// primary's records, and a small share of a 1M-job node's memory.
const recentLogBytes = 8 << 20

// add keeps a written batch of records of term, dropping the oldest past
// recentLogBytes or syncBuffer bytes, whichever is lower; a batch that
// does not follow the last one, or of an older term, starts the log
// again.
func (rl *recentLog) add(data []byte, first, last, term uint64, syncBuffer int) {
	limit := min(recentLogBytes, syncBuffer)
	if n := len(rl.batches); n > 0 && (rl.batches[n-1].last+1 != first || rl.batches[n-1].term > term) {
		*rl = recentLog{}
	}
	if len(data) > limit {
		*rl = recentLog{}
		return
	}
	rl.batches = append(rl.batches, recentBatch{data: data, first: first, last: last, term: term})
	rl.bytes += len(data)
	k := 0
	for rl.bytes > limit {
		rl.bytes -= len(rl.batches[k].data)
		rl.batches[k] = recentBatch{}
		k++
	}
	rl.batches = rl.batches[k:]
}

// from is the frames of the batches from the one holding the record at
// pos to the last, if that record is here with pos's term (so the
// catch-up's check of it matches); else false, and the catch-up reads
// our segments, which may hold more.
func (rl *recentLog) from(pos logPos) ([][]byte, bool) {
	for i, b := range rl.batches {
		if b.first <= pos.lsn && pos.lsn <= b.last {
			if b.term != pos.term {
				return nil, false
			}
			out := make([][]byte, 0, len(rl.batches)-i)
			for _, c := range rl.batches[i:] {
				out = append(out, c.data)
			}
			return out, true
		}
	}
	return nil, false
}
