package wal

import (
	"errors"
	"fmt"

	"xce/schema"
)

// ErrUnknownBatch: Done was called with a batch id that is not in flight
// (never flushed, or already done) — a bug in the caller.
var ErrUnknownBatch = errors.New("wal: unknown batch")

// Batcher is group commit, as pure bookkeeping. Appends accumulate in the
// open batch; Flush seals it and hands out its bytes as one write; the node
// writes and fsyncs them and calls Done when the fsync completion arrives.
// Only then are the batch's appends acknowledged — and never ahead of an
// earlier batch: acknowledgements are released in batch order, so the
// acknowledged appends are always a prefix of the log even if completions
// arrive out of order.
//
// Typical use: Add each record's frame and remember its batch id with the
// request; call Flush when no write is in flight (or on a timer), issue
// write+fsync of data; on the completion call Done and release every
// request whose batch id is <= Acked(). A failed fsync is fatal (DESIGN
// §3.1): the node exits, and nothing in flight is ever acknowledged.
//
// The zero value is ready to use; batch ids start at 1.
type Batcher struct {
	open     []byte // frames of the open batch
	openN    int    // appends in the open batch
	openID   uint64 // id of the open batch; 0 = not yet assigned
	inflight []batch
	acked    uint64 // every batch with id <= acked is acknowledged
}

type batch struct {
	id   uint64
	n    int
	done bool
}

func (b *Batcher) openBatch() uint64 {
	if b.openID == 0 {
		b.openID = b.acked + 1
		if k := len(b.inflight); k > 0 {
			b.openID = b.inflight[k-1].id + 1
		}
	}
	return b.openID
}

// Add appends one encoded frame (from AppendFrame) to the open batch and
// returns that batch's id. The frame is copied.
func (b *Batcher) Add(frame []byte) (batchID uint64) {
	id := b.openBatch()
	b.open = append(b.open, frame...)
	b.openN++
	return id
}

// AddRecord frames rec straight into the open batch (no copy). On error
// nothing is added.
func (b *Batcher) AddRecord(rec *schema.WalRecord) (batchID uint64, err error) {
	out, err := AppendFrame(b.open, rec)
	if err != nil {
		return 0, err
	}
	id := b.openBatch()
	b.open = out
	b.openN++
	return id, nil
}

// Flush seals the open batch and returns its bytes (one write), its id and
// its number of appends. With nothing open it returns nil, 0, 0 and uses no
// id. The returned slice is the caller's: the Batcher never touches it again.
func (b *Batcher) Flush() (data []byte, batchID uint64, n int) {
	if b.openN == 0 {
		return nil, 0, 0
	}
	data, batchID, n = b.open, b.openID, b.openN
	b.inflight = append(b.inflight, batch{id: batchID, n: n})
	b.open, b.openN, b.openID = nil, 0, 0
	return data, batchID, n
}

// Done records that the write and fsync of flushed batch batchID completed
// and returns the number of appends this call acknowledges: those of the
// longest run of completed batches at the head of the in-flight list
// (so 0 if an earlier batch is still in flight). A batch id that is not in
// flight returns ErrUnknownBatch and changes nothing.
func (b *Batcher) Done(batchID uint64) (acked int, err error) {
	i := -1
	for k := range b.inflight {
		if b.inflight[k].id == batchID && !b.inflight[k].done {
			i = k
			break
		}
	}
	if i < 0 {
		return 0, fmt.Errorf("%w: %d is not in flight", ErrUnknownBatch, batchID)
	}
	b.inflight[i].done = true
	k := 0
	for k < len(b.inflight) && b.inflight[k].done {
		acked += b.inflight[k].n
		b.acked = b.inflight[k].id
		k++
	}
	b.inflight = append(b.inflight[:0], b.inflight[k:]...)
	return acked, nil
}

// Acked is the highest batch id such that it and every earlier batch are
// acknowledged (0 = none yet).
func (b *Batcher) Acked() uint64 { return b.acked }

// Pending is the number of appends in the open batch, not yet flushed.
func (b *Batcher) Pending() int { return b.openN }

// PendingBytes is the size of the open batch.
func (b *Batcher) PendingBytes() int { return len(b.open) }

// InFlight is the number of flushed batches not yet acknowledged.
func (b *Batcher) InFlight() int { return len(b.inflight) }
