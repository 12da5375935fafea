package sm_test

import (
	"strings"
	"testing"

	"github.com/xce-hpc/xce/sm"
)

// A WAL write in flight says what resumes when it completes: the rest of
// its durable sequence and then the journal's step, with the batch's LSNs
// and segment (the continuation is data, not a closure printed "func").
func TestPendingWALWriteNamesItsContinuation(t *testing.T) {
	h, p := threeNodes(t)
	pn := h.node(p)
	seg := writeInFlight(t, h, p, 701)
	for _, line := range pn.n.PendingOps() {
		if strings.Contains(line, " "+seg+" (jobs/") {
			if want := "then journal: batch written (lsn "; !strings.Contains(line, want) || !strings.Contains(line, "to "+seg+"): release its replies") {
				t.Fatalf("pending append: %q; want its continuation %q... to %s", line, want, seg)
			}
			return
		}
	}
	t.Fatalf("no pending operation on %s among %q", seg, pn.n.PendingOps())
}

// writeInFlight steps one enqueue into primary p and returns the WAL
// segment its append was issued to (its completion is still queued).
func writeInFlight(t *testing.T, h *harness, p int, id uint64) string {
	t.Helper()
	h.step(p, sm.ClientOp{ID: id, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("z")}})
	seg := ""
	for _, op := range h.node(p).ops {
		if op.Op == sm.OpAppend {
			seg = op.Path
		}
	}
	if seg == "" {
		t.Fatal("the write issued no WAL append")
	}
	return seg
}
