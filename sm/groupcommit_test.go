package sm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// walAppends lists the primary's appends to its job log.
func walAppends(hn *hnode) []sm.FileOp {
	var out []sm.FileOp
	for _, op := range hn.opsOf(sm.OpAppend) {
		if strings.HasPrefix(op.Path, "data/wal/") {
			out = append(out, op)
		}
	}
	return out
}

func submit(h *harness, p int, id uint64) {
	h.enqueue(p, sm.ClientOp{ID: id, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("x")}})
}

// A small batch waits for its group (sm/groupcommit.go): clients a write
// answered are expected back, and their requests share one write with
// those that waited meanwhile; a client that does not come back costs one
// wait of at most groupWait; a lone client is written at once.
func TestGroupCommitWaitsForItsWriters(t *testing.T) {
	h, p := threeNodes(t)
	pn := h.node(p)
	// Four clients at once: the first request is written alone (no write
	// before it), the other three wait for it and then for its client.
	for id := uint64(1); id <= 4; id++ {
		submit(h, p, id)
	}
	h.run()
	before := len(walAppends(pn))
	if got := len(pn.replies); got != 1 {
		t.Fatalf("%d replies before the first client sent again, want 1 (the first write's)", got)
	}
	submit(h, p, 5) // the first client again: its group is complete
	h.run()
	as := walAppends(pn)[before:]
	if len(as) != 1 {
		t.Fatalf("the group of four took %d writes, want 1", len(as))
	}
	if got := len(pn.replies); got != 5 {
		t.Fatalf("%d replies after the group's write, want 5", got)
	}
	// Only one of the four comes back: it waits for the others, then for
	// groupWait, and is written then.
	before = len(walAppends(pn))
	submit(h, p, 6)
	h.run()
	if n := len(walAppends(pn)) - before; n != 0 {
		t.Fatalf("a request of a group of four written after %d writes without waiting", n)
	}
	h.advance(time.Millisecond)
	if n := len(walAppends(pn)) - before; n != 1 || len(pn.replies) != 6 {
		t.Fatalf("after the wait: %d writes, %d replies; want 1 write and 6 replies", n, len(pn.replies))
	}
	// From then on it is a lone client: each request is written at once.
	for id := uint64(7); id <= 9; id++ {
		before = len(walAppends(pn))
		submit(h, p, id)
		h.run()
		if n := len(walAppends(pn)) - before; n != 1 || len(pn.replies) != int(id) {
			t.Fatalf("lone request #%d: %d writes, %d replies without time passing; want 1 write, %d replies", id, n, len(pn.replies), id)
		}
	}
}
