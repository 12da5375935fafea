package queue

import (
	"container/heap"
	"sort"
)

// Throughput counts the operations applied to one queue's jobs: plain
// counters for the daemon's metrics, kept beside the state and never part
// of it (Export, View and Import ignore them, so a state rebuilt from a
// snapshot starts them at zero). Batches count each job.
type Throughput struct {
	Enqueued uint64 // jobs enqueued (Enqueue, and every job a schedule fires)
	Claimed  uint64 // jobs handed out by a claim, reclaims of lapsed claims included
	Acked    uint64 // claims completed by an ack
	Retried  uint64 // claims given up by a retry that put the job back to pending
	Dead     uint64 // jobs moved to dead, by every path: Fail, a retry or claim lapse with the attempts exhausted, expiry
}

// throughput is the counters of queue, made if there are none. They
// outlive the queue's lane (dropped once the queue holds no job), so a
// counter never goes back.
func (q *Queues) throughput(queue string) *Throughput {
	t := q.through[queue]
	if t == nil {
		t = new(Throughput)
		q.through[queue] = t
	}
	return t
}

// Throughput is the counters of queue since the state was made (New,
// Import) or ResetThroughput; zero for a queue it never saw.
func (q *Queues) Throughput(queue string) Throughput {
	if t := q.through[queue]; t != nil {
		return *t
	}
	return Throughput{}
}

// ThroughputQueues lists, sorted, every queue that has counters: each one
// that held a job since the state was made, even if it holds none now.
func (q *Queues) ThroughputQueues() []string {
	names := make([]string, 0, len(q.through))
	for name := range q.through {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ResetThroughput sets every counter to zero: the caller starts counting
// from here (sm, once recovery has replayed the log, so that a primary
// counts what it applies itself, not what an earlier process did).
func (q *Queues) ResetThroughput() {
	for _, t := range q.through { // unordered: every counter is set to zero
		*t = Throughput{}
	}
}

// OldestPending is the earliest ready time (RunAt) of the queue's pending
// jobs, false when it has none. Once that time has passed, it is when the
// job that has waited longest to be claimed became claimable: enqueued
// (or its delay or run_at reached), its retry backoff over, or redriven.
// If it has not passed, no pending job is claimable yet. O(1).
func (q *Queues) OldestPending(queue string) (runAt int64, ok bool) {
	l := q.findLane(queue)
	if l == nil {
		return 0, false
	}
	return l.runAts.min()
}

// runAtSet is the ready times of a lane's pending jobs: how many have each
// time, and the distinct times in a min-heap, so that the earliest is at
// hand (O(1)) and adding or removing a job costs O(log d), d the distinct
// times (a burst of jobs enqueued in the same second shares one entry).
type runAtSet struct {
	by   map[int64]*runAtCount
	h    runAtHeap
	last *runAtCount // found last: a batch adds many jobs at one time
}

type runAtCount struct {
	at int64
	n  int // pending jobs with this ready time, >= 1
	i  int // position in the heap
}

func (s *runAtSet) add(at int64) {
	if c := s.last; c != nil && c.at == at {
		c.n++
		return
	}
	if c := s.by[at]; c != nil {
		c.n++
		s.last = c
		return
	}
	if s.by == nil {
		s.by = make(map[int64]*runAtCount)
	}
	c := &runAtCount{at: at, n: 1}
	s.by[at] = c
	heap.Push(&s.h, c)
	s.last = c
}

// remove takes one job of ready time at out; one must be in the set.
func (s *runAtSet) remove(at int64) {
	c := s.last
	if c == nil || c.at != at {
		c = s.by[at]
	}
	c.n--
	if c.n > 0 {
		return
	}
	heap.Remove(&s.h, c.i)
	delete(s.by, at)
	if s.last == c {
		s.last = nil
	}
}

func (s *runAtSet) min() (int64, bool) {
	if len(s.h) == 0 {
		return 0, false
	}
	return s.h[0].at, true
}

// runAtHeap orders the distinct times ascending (container/heap).
type runAtHeap []*runAtCount

func (h runAtHeap) Len() int           { return len(h) }
func (h runAtHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h runAtHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}

func (h *runAtHeap) Push(x any) {
	c := x.(*runAtCount)
	c.i = len(*h)
	*h = append(*h, c)
}

func (h *runAtHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return c
}
