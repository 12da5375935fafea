package queue

import "fmt"

// checkIndexes verifies the white-box invariants of q's indexes: every
// job sits where its state says, every heap is ordered and records true
// positions, the lane counts match, schedules are sorted.
func (q *Queues) checkIndexes() error {
	heapOK := func(name string, h *jobHeap) error {
		for i, n := range h.nodes() {
			e := n.e
			if p := int(*h.pos(e)); p != i {
				return fmt.Errorf("%s: job %d at %d records %d", name, e.ID, i, p)
			}
			if a, b, c := key(h.kind, e); n.a != a || n.b != b || n.c != c {
				return fmt.Errorf("%s: job %d has a stale key", name, e.ID)
			}
			if i > 0 && n.less(h.at((i-1)/4)) {
				return fmt.Errorf("%s: job %d at %d sorts before its parent", name, e.ID, i)
			}
			if q.jobs.get(e.ID) != e {
				return fmt.Errorf("%s: job %d is not in the job table", name, e.ID)
			}
			if h.kind < hExpiry && q.laneHeap(e) != h || h.kind >= hExpiry && q.globalHeap(e) != h {
				return fmt.Errorf("%s: job %d does not point back to its heap", name, e.ID)
			}
		}
		return nil
	}
	if err := heapOK("expiry", &q.expiry); err != nil {
		return err
	}
	if err := heapOK("retain", &q.retain); err != nil {
		return err
	}
	inHeaps := 0
	for name, l := range q.lanes {
		if l.name != name {
			return fmt.Errorf("lane %q named %q", name, l.name)
		}
		if l.pending == 0 && l.processing == 0 && l.dead == 0 {
			return fmt.Errorf("lane %q is empty but kept", name)
		}
		hs := []*jobHeap{&l.waiting, &l.exhausted, &l.parked}
		for pin, h := range l.ready {
			for _, n := range h.nodes() {
				if e := n.e; e.pin() != pin {
					return fmt.Errorf("lane %q: job %d with pin %q in ready heap %q", name, e.ID, e.pin(), pin)
				}
			}
			hs = append(hs, h)
		}
		for _, h := range hs {
			if err := heapOK(fmt.Sprintf("lane %q heap %d", name, h.kind), h); err != nil {
				return err
			}
			for _, n := range h.nodes() {
				if e := n.e; e.lane != l {
					return fmt.Errorf("job %d of queue %q in lane %q", e.ID, e.Queue(), name)
				}
			}
			inHeaps += h.len()
		}
	}
	counts := map[string][3]int{}
	runAts := map[string]map[int64]int{} // pending jobs by queue and ready time
	live := 0
	for id, e := range q.jobs.all() {
		if e.ID != id {
			return fmt.Errorf("job %d stored under %d", e.ID, id)
		}
		if e.lane == nil || q.lanes[e.Queue()] != e.lane {
			return fmt.Errorf("job %d: lane of %q missing", id, e.Queue())
		}
		if p := q.stampTab[*e.st]; p != nil && p != e.st {
			return fmt.Errorf("job %d: stamps not interned", id)
		}
		c := counts[e.Queue()]
		c[e.State]++
		counts[e.Queue()] = c
		if e.State == Pending {
			if runAts[e.Queue()] == nil {
				runAts[e.Queue()] = map[int64]int{}
			}
			runAts[e.Queue()][e.RunAt]++
		}
		if e.State == Dead {
			if (e.gslot >= 0) != (e.st.DeadLetterRetentionS != 0) {
				return fmt.Errorf("dead job %d: retention index slot %d", id, e.gslot)
			}
			if e.lh != noHeap {
				return fmt.Errorf("dead job %d still indexed as live", id)
			}
			continue
		}
		live++
		if (e.gslot >= 0) != (e.ExpiresAt != 0) {
			return fmt.Errorf("job %d: expiry index slot %d with ExpiresAt %d", id, e.gslot, e.ExpiresAt)
		}
		exh := e.State == Processing && e.attempts() >= e.st.MaxAttempts
		h := q.laneHeap(e)
		switch {
		case h == nil:
			return fmt.Errorf("live job %d in no lane heap", id)
		case e.slot < 0 || int(e.slot) >= h.len() || h.at(int(e.slot)).e != e:
			return fmt.Errorf("job %d: lane heap %d holds another at its slot %d", id, h.kind, e.slot)
		case exh != (h == &e.lane.exhausted):
			return fmt.Errorf("job %d: exhausted=%v but heap %d", id, exh, h.kind)
		case h == &e.lane.parked && e.ExpiresAt == 0:
			return fmt.Errorf("job %d parked without an expiry", id)
		}
	}
	if inHeaps != live {
		return fmt.Errorf("%d jobs in lane heaps, %d live jobs", inHeaps, live)
	}
	for name, l := range q.lanes {
		if c := counts[name]; c != [3]int{l.pending, l.processing, l.dead} {
			return fmt.Errorf("lane %q counts %d/%d/%d, jobs say %v", name, l.pending, l.processing, l.dead, c)
		}
		if err := l.runAts.check(runAts[name]); err != nil {
			return fmt.Errorf("lane %q ready times: %v", name, err)
		}
		if l.through == nil || q.through[name] != l.through {
			return fmt.Errorf("lane %q does not count into the queue's counters", name)
		}
	}
	for i, s := range q.scheds {
		if i > 0 && q.scheds[i-1].Name >= s.Name {
			return fmt.Errorf("schedules out of order at %q", s.Name)
		}
		r, err := ParseSpec(s.Spec, s.Zone)
		if err != nil || r.every != s.rule.every || (r.cron == nil) != (s.rule.cron == nil) {
			return fmt.Errorf("schedule %q: rule %+v for %q (%v)", s.Name, s.rule, s.Spec, err)
		}
	}
	return nil
}

// check verifies that s holds exactly the ready times want (time: jobs),
// its heap ordered with true positions.
func (s *runAtSet) check(want map[int64]int) error {
	if len(s.by) != len(want) || len(s.h) != len(want) {
		return fmt.Errorf("%d times in the map, %d in the heap; the pending jobs have %d", len(s.by), len(s.h), len(want))
	}
	for at, n := range want {
		c := s.by[at]
		switch {
		case c == nil:
			return fmt.Errorf("time %d (%d jobs) missing", at, n)
		case c.n != n || c.at != at:
			return fmt.Errorf("time %d counts %d jobs (entry of %d), want %d", at, c.n, c.at, n)
		case c.i < 0 || c.i >= len(s.h) || s.h[c.i] != c:
			return fmt.Errorf("time %d records heap position %d", at, c.i)
		case c.i > 0 && s.h[c.i].at < s.h[(c.i-1)/2].at:
			return fmt.Errorf("time %d sorts before its parent", at)
		}
	}
	if c := s.last; c != nil && s.by[c.at] != c {
		return fmt.Errorf("the time found last (%d) is not in the set", c.at)
	}
	return nil
}

// nodes lists h's nodes in index order.
func (h *jobHeap) nodes() []node {
	out := make([]node, h.len())
	for i := range out {
		out[i] = *h.at(i)
	}
	return out
}
