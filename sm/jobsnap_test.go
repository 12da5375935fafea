package sm

import (
	"bytes"
	"testing"

	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// snapshotQueue is a state of n pending 200-byte jobs, some claimed, and a
// schedule.
func snapshotQueue(tb testing.TB, n int) *queue.Queues {
	tb.Helper()
	q := queue.New()
	st := queue.Stamps{VisibilityTimeoutS: 300, MaxAttempts: 3}
	payload := make([]byte, 200)
	for i := range n {
		payload[0], payload[1], payload[2] = byte(i), byte(i>>8), byte(i>>16)
		if _, err := q.Enqueue(1000, "q0", payload, st, queue.EnqueueOpts{Priority: int32(i % 3)}); err != nil {
			tb.Fatal(err)
		}
	}
	if got := q.ClaimBatch(1001, "q0", "h1", n/10, queue.ClaimStamp{Term: 1, LSN: 2}); len(got) != n/10 {
		tb.Fatalf("claimed %d of %d", len(got), n/10)
	}
	if err := q.Register(1001, "s", "@every 60s", "q0", []byte("x"), st, queue.FireOpts{}); err != nil {
		tb.Fatal(err)
	}
	return q
}

// The streamed encoding of a view is the whole message's encoding.
func TestEncodeViewIsEncodeSnapshot(t *testing.T) {
	q := snapshotQueue(t, 3000)
	want, err := wal.EncodeSnapshot(SnapshotOf(q, 77, 3))
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&SnapshotData{view: q.View(), lsn: 77, term: 3}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("streamed snapshot of %d bytes differs from the message's %d", len(got), len(want))
	}
	if cap(got) > len(got)+4096 {
		t.Errorf("file buffer of cap %d for %d bytes: not sized by the first pass (grown)", cap(got), len(got))
	}
}

// pieces records each Write.
type pieces struct {
	sizes []int
	all   []byte
}

func (p *pieces) Write(b []byte) (int, error) {
	p.sizes = append(p.sizes, len(b))
	p.all = append(p.all, b...)
	return len(b), nil
}

// A checkpoint streamed to its file (EncodeTo) is Encode's file once its
// header is written at offset 0, and no piece is much more than
// SnapshotPiece: the file is never held whole.
func TestEncodeToIsEncode(t *testing.T) {
	q := snapshotQueue(t, 10000)
	want, err := (&SnapshotData{view: q.View(), lsn: 77, term: 3}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	var w pieces
	head, err := (&SnapshotData{view: q.View(), lsn: 77, term: 3}).EncodeTo(&w)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.all) != len(want) || len(head) != wal.SnapshotHeaderSize {
		t.Fatalf("streamed %d bytes and a header of %d, want %d and %d", len(w.all), len(head), len(want), wal.SnapshotHeaderSize)
	}
	copy(w.all, head)
	if !bytes.Equal(w.all, want) {
		t.Fatal("streamed file differs from Encode's")
	}
	if len(w.sizes) < 2 {
		t.Fatalf("%d bytes in %d writes: not streamed in pieces", len(want), len(w.sizes))
	}
	for i, n := range w.sizes {
		if n > SnapshotPiece+4096 {
			t.Errorf("write %d of %d bytes, over a piece (%d)", i, n, SnapshotPiece)
		}
	}
}

// BenchmarkCheckpointEncode is the executor's encode of a checkpoint of
// 100,000 jobs (SnapshotData.Encode of a View).
func BenchmarkCheckpointEncode(b *testing.B) {
	q := snapshotQueue(b, 100_000)
	for b.Loop() {
		if _, err := (&SnapshotData{view: q.View(), lsn: 77, term: 3}).Encode(); err != nil {
			b.Fatal(err)
		}
	}
}
