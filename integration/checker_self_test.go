package integration

// The checker on hand-made histories (no processes): it must flag every
// kind of violation, and nothing in a history that is only uncertain.

import (
	"testing"
)

func TestHistoryCheckerFlagsViolations(t *testing.T) {
	h := newHistory()
	at := int64(0)
	next := func() int64 { at += 10; return at }
	enq := func(payload string, out outcome, id uint64) {
		c := next()
		h.add(op{kind: opEnqueue, payload: payload, out: out, id: id, call: c, ret: next(), peer: "n0"})
	}
	// Fine: acked and read back; unknown and absent; unknown and present;
	// failed and absent; acked, claimed and acked done by a worker.
	enq("ok", outOK, 1)
	enq("unknown-absent", outUnknown, 0)
	enq("unknown-present", outUnknown, 0)
	enq("failed", outFail, 0)
	enq("done", outOK, 2)
	c := next()
	h.add(op{kind: opClaim, call: c, ret: next(), out: outOK, jobs: []claimed{{id: 2, attempt: 1, payload: "done"}}})
	c = next()
	h.add(op{kind: opAck, call: c, ret: next(), out: outOK, payload: "done", id: 2, attempt: 1})
	rb := &readBack{jobs: map[string][]readJob{
		"ok":              {{id: 1, payload: "ok"}},
		"unknown-present": {{id: 3, payload: "unknown-present"}},
	}, call: next(), ret: next()}
	r := check(h, rb)
	if len(r.lost)+len(r.idChanged)+len(r.duplicated)+len(r.failedApplied)+len(r.idReuse)+len(r.handleReuse)+len(r.ackedTwice)+len(r.illegalWrites) != 0 {
		t.Fatalf("a clean history flagged:\n%s\n%s", r, r.examples(5))
	}
	if r.unknownApplied != 1 || r.unknownAbsent != 1 || r.acked != 2 {
		t.Fatalf("counts: %s", r)
	}

	// Violations: an acked job lost and its id given to another payload;
	// a failed enqueue applied; a handle handed out twice and acked ok
	// twice; a get that misses an acked job (a stale read).
	h = newHistory()
	at = 0
	enq("lost", outOK, 5)
	enq("thief", outOK, 5)
	enq("phantom", outFail, 0)
	enq("stale", outOK, 7)
	c = next()
	h.add(op{kind: opGet, call: c, ret: next(), out: outOK, id: 7, payload: "stale", found: false})
	for w := 0; w < 2; w++ {
		c = next()
		h.add(op{kind: opClaim, client: w, call: c, ret: next(), out: outOK, jobs: []claimed{{id: 5, attempt: 1, payload: []string{"lost", "thief"}[w]}}})
	}
	for w := 0; w < 2; w++ {
		c = next()
		h.add(op{kind: opAck, client: w, call: c, ret: next(), out: outOK, payload: []string{"lost", "thief"}[w], id: 5, attempt: 1})
	}
	rb = &readBack{jobs: map[string][]readJob{
		"phantom": {{id: 6, payload: "phantom"}},
		"stale":   {{id: 7, payload: "stale"}},
	}, call: next(), ret: next()}
	r = check(h, rb)
	t.Logf("%s\n%s", r, r.examples(5))
	switch {
	case len(r.idReuse) != 1:
		t.Errorf("id reuse not flagged")
	case len(r.failedApplied) != 1:
		t.Errorf("failed-but-applied not flagged")
	case len(r.handleReuse) != 1 || len(r.ackedTwice) != 1:
		t.Errorf("handle reuse / double ack not flagged")
	case len(r.illegalWrites) == 0:
		t.Errorf("porcupine found nothing")
	case len(r.illegalWithGets) != 1:
		t.Errorf("stale read not reported: %v", r.illegalWithGets)
	}
	// An acked job missing from the read-back, never claimed.
	h = newHistory()
	at = 0
	enq("gone", outOK, 9)
	r = check(h, &readBack{jobs: map[string][]readJob{}, call: next(), ret: next()})
	if len(r.lost) != 1 || len(r.illegalWrites) != 1 {
		t.Errorf("an acked job missing from the read-back: lost %d, non-linearizable %d", len(r.lost), len(r.illegalWrites))
	}
}
