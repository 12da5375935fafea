package sm

import "testing"

// The recent log keeps the last batches within its bound, starts again
// at a batch that does not follow or is of an older term, and answers a
// position only when it holds that record with that term.
func TestRecentLog(t *testing.T) {
	batch := func(first, last uint64) []byte { return make([]byte, 10*(last-first+1)) }
	var rl recentLog
	rl.add(batch(1, 3), 1, 3, 2, 100)     // 30 bytes
	rl.add(batch(4, 4), 4, 4, 2, 100)     // 40
	rl.add(batch(5, 9), 5, 9, 2, 100)     // 90
	rl.add(batch(10, 11), 10, 11, 2, 100) // 110: 1..3 go
	for _, c := range []struct {
		pos     logPos
		batches int
		ok      bool
	}{
		{logPos{term: 2, lsn: 3}, 0, false}, // dropped
		{logPos{term: 2, lsn: 4}, 3, true},
		{logPos{term: 1, lsn: 4}, 0, false}, // another term there: our segments say where the logs agree
		{logPos{term: 2, lsn: 7}, 2, true},
		{logPos{term: 2, lsn: 11}, 1, true},
		{logPos{term: 2, lsn: 12}, 0, false}, // past our last
		{logPos{}, 0, false},
	} {
		got, ok := rl.from(c.pos)
		if ok != c.ok || len(got) != c.batches {
			t.Errorf("from %+v: %d batches, %v; want %d, %v", c.pos, len(got), ok, c.batches, c.ok)
		}
	}
	if rl.bytes != 80 {
		t.Errorf("holds %d bytes, want 80", rl.bytes)
	}
	rl.add(batch(12, 12), 12, 12, 3, 100) // a newer term: the log goes on (a promotion's after its recovery's last record)
	if got, ok := rl.from(logPos{term: 2, lsn: 11}); !ok || len(got) != 2 {
		t.Errorf("after a newer term's batch: lsn 11 of term 2 answered %v with %d batches, want 2", ok, len(got))
	}
	if _, ok := rl.from(logPos{term: 2, lsn: 12}); ok {
		t.Errorf("lsn 12 answered for term 2: it is term 3's")
	}
	if _, ok := rl.from(logPos{term: 3, lsn: 12}); !ok || rl.bytes != 90 {
		t.Errorf("after a newer term's batch: lsn 12 not held, or %d bytes held (want 90)", rl.bytes)
	}
	rl.add(batch(13, 13), 13, 13, 2, 100) // an older term: only the new batch
	if _, ok := rl.from(logPos{term: 3, lsn: 12}); ok {
		t.Errorf("after an older term's batch it still answered lsn 12 of term 3")
	}
	if _, ok := rl.from(logPos{term: 2, lsn: 13}); !ok || rl.bytes != 10 {
		t.Errorf("after an older term's batch: lsn 13 not held, or %d bytes held", rl.bytes)
	}
	rl.add(batch(14, 14), 14, 14, 3, 100)
	rl.add(batch(20, 20), 20, 20, 3, 100) // a gap: only the new batch
	if _, ok := rl.from(logPos{term: 3, lsn: 14}); ok {
		t.Errorf("after a gap it still answered lsn 14")
	}
	if _, ok := rl.from(logPos{term: 3, lsn: 20}); !ok || rl.bytes != 10 {
		t.Errorf("after a gap: lsn 20 not held, or %d bytes held", rl.bytes)
	}
	rl.add(batch(21, 40), 21, 40, 3, 100) // larger than the bound: nothing
	if len(rl.batches) != 0 || rl.bytes != 0 {
		t.Errorf("a batch over the bound left %d batches, %d bytes", len(rl.batches), rl.bytes)
	}
}
