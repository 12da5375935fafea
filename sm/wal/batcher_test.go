package wal

import (
	"bytes"
	"errors"
	"testing"

	"xce/schema"
)

// A batcher script: each step is one call and what it must return.
type bstep struct {
	op    string // "add", "flush", "done"
	frame string // add
	id    uint64 // add: expected id; flush: expected id; done: argument
	data  string // flush: expected bytes
	n     int    // flush: appends; done: appends acknowledged
	err   bool   // done: ErrUnknownBatch
	acked uint64 // Acked() after the step
}

func TestBatcher(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []bstep
	}{
		{"flush of nothing", []bstep{
			{op: "flush"},
			{op: "done", id: 1, err: true},
		}},
		{"one batch", []bstep{
			{op: "add", frame: "a", id: 1},
			{op: "add", frame: "bb", id: 1},
			{op: "add", frame: "c", id: 1},
			{op: "flush", id: 1, data: "abbc", n: 3},
			{op: "flush"},
			{op: "done", id: 1, n: 3, acked: 1},
			{op: "done", id: 1, err: true, acked: 1},
		}},
		{"appends during the fsync go to the next batch", []bstep{
			{op: "add", frame: "a", id: 1},
			{op: "flush", id: 1, data: "a", n: 1},
			{op: "add", frame: "b", id: 2},
			{op: "add", frame: "c", id: 2},
			{op: "done", id: 1, n: 1, acked: 1},
			{op: "add", frame: "d", id: 2, acked: 1},
			{op: "flush", id: 2, data: "bcd", n: 3, acked: 1},
			{op: "done", id: 2, n: 3, acked: 2},
		}},
		{"nothing acknowledged before Done", []bstep{
			{op: "add", frame: "a", id: 1},
			{op: "add", frame: "b", id: 1},
			{op: "flush", id: 1, data: "ab", n: 2},
			{op: "add", frame: "c", id: 2},
			{op: "flush", id: 2, data: "c", n: 1},
		}},
		{"out-of-order completions release in order", []bstep{
			{op: "add", frame: "a", id: 1},
			{op: "flush", id: 1, data: "a", n: 1},
			{op: "add", frame: "b", id: 2},
			{op: "add", frame: "b", id: 2},
			{op: "flush", id: 2, data: "bb", n: 2},
			{op: "add", frame: "c", id: 3},
			{op: "flush", id: 3, data: "c", n: 1},
			{op: "done", id: 3, n: 0},
			{op: "done", id: 2, n: 0},
			{op: "done", id: 1, n: 4, acked: 3},
		}},
		{"unknown and future ids refused", []bstep{
			{op: "add", frame: "a", id: 1},
			{op: "done", id: 1, err: true}, // open, not flushed
			{op: "flush", id: 1, data: "a", n: 1},
			{op: "done", id: 0, err: true},
			{op: "done", id: 2, err: true},
			{op: "done", id: 1, n: 1, acked: 1},
		}},
		{"ids continue after an idle period", []bstep{
			{op: "add", frame: "a", id: 1},
			{op: "flush", id: 1, data: "a", n: 1},
			{op: "done", id: 1, n: 1, acked: 1},
			{op: "flush", acked: 1},
			{op: "add", frame: "z", id: 2, acked: 1},
			{op: "flush", id: 2, data: "z", n: 1, acked: 1},
			{op: "done", id: 2, n: 1, acked: 2},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Batcher
			for i, s := range tc.steps {
				switch s.op {
				case "add":
					if id := b.Add([]byte(s.frame)); id != s.id {
						t.Fatalf("step %d: Add id %d, want %d", i, id, s.id)
					}
				case "flush":
					data, id, n := b.Flush()
					if string(data) != s.data || id != s.id || n != s.n {
						t.Fatalf("step %d: Flush = %q, %d, %d; want %q, %d, %d", i, data, id, n, s.data, s.id, s.n)
					}
				case "done":
					n, err := b.Done(s.id)
					if n != s.n || s.err != errors.Is(err, ErrUnknownBatch) || !s.err && err != nil {
						t.Fatalf("step %d: Done(%d) = %d, %v; want %d, err %v", i, s.id, n, err, s.n, s.err)
					}
				}
				if b.Acked() != s.acked {
					t.Fatalf("step %d: Acked %d, want %d", i, b.Acked(), s.acked)
				}
			}
		})
	}
}

func TestBatcherAddRecordAndOwnership(t *testing.T) {
	var b Batcher
	want, _ := segment(t, sampleRecs()[:3])
	for _, r := range sampleRecs()[:3] {
		if id, err := b.AddRecord(r); err != nil || id != 1 {
			t.Fatal(id, err)
		}
	}
	if _, err := b.AddRecord(&schema.WalRecord{}); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("LSN 0 accepted: %v", err)
	}
	if b.Pending() != 3 || b.PendingBytes() != len(want) {
		t.Fatalf("pending %d / %d bytes", b.Pending(), b.PendingBytes())
	}
	data, id, n := b.Flush()
	if !bytes.Equal(data, want) || id != 1 || n != 3 || b.Pending() != 0 || b.InFlight() != 1 {
		t.Fatalf("flush: %d %d, in flight %d", id, n, b.InFlight())
	}
	keep := append([]byte(nil), data...)
	frame := []byte("next")
	b.Add(frame)
	frame[0] = 'X' // Add copied it
	if !bytes.Equal(data, keep) {
		t.Fatal("a later Add changed flushed bytes")
	}
	if d, _, _ := b.Flush(); string(d) != "next" {
		t.Fatalf("flushed %q", d)
	}
	recs, _, err := Scan(data)
	if err != nil || len(recs) != 3 {
		t.Fatal(len(recs), err)
	}
}
