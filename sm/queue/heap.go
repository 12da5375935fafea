package queue

// heapKind names an ordered index. Every ordering is total (ties broken by
// Seq or ID, both unique), so the order in which a heap yields its entries
// depends only on which entries it holds, never on the history that built
// it: a state rebuilt by Import behaves exactly like the live one.
type heapKind uint8

const (
	// Lane heaps: a live job is in exactly one of them.
	hWaiting   heapKind = iota // pending not yet ready, and processing with budget left: readyAt ASC, Seq ASC
	hReady                     // claimable candidates: Priority DESC, readyAt ASC, Seq ASC
	hExhausted                 // processing on its last attempt: ClaimExpiresAt ASC, ID ASC
	hParked                    // candidates found expired by a claim: ExpiresAt DESC, ID ASC
	// Global heaps.
	hExpiry // live jobs with an expiry: ExpiresAt ASC, ID ASC
	hRetain // dead jobs with a retention: DiedAt+DeadLetterRetentionS ASC, ID ASC

	noHeap heapKind = 255 // job.lh of a job in no lane heap
)

// readyAt is when a live job becomes claimable: a pending job at RunAt, a
// processing one when its claim lapses.
func readyAt(e *job) int64 {
	if e.State == Processing {
		return e.claimExpiresAt()
	}
	return e.RunAt
}

// purgeAt is when retention deletes a dead job.
func purgeAt(e *job) int64 {
	return addSat(e.diedAt(), int64(e.st.DeadLetterRetentionS))
}

// key returns e's sort key in a heap of kind k: (a, b, c) compared
// lexicographically, all ascending. Keys live in the heap array next to the
// job pointer so that sifting reads contiguous memory instead of chasing
// jobs; a job's key fields never change while it is in a heap (every
// mutation takes it out first).
func key(k heapKind, e *job) (a, b int64, c uint64) {
	switch k {
	case hWaiting:
		return readyAt(e), 0, e.Seq
	case hReady:
		return -int64(e.Priority), readyAt(e), e.Seq
	case hExhausted:
		return e.claimExpiresAt(), 0, e.ID
	case hParked:
		return ^e.ExpiresAt, 0, e.ID // ^x = -x-1: descending, without overflow
	case hExpiry:
		return e.ExpiresAt, 0, e.ID
	default: // hRetain
		return purgeAt(e), 0, e.ID
	}
}

type node struct {
	a, b int64
	c    uint64
	e    *job
}

func (x *node) less(y *node) bool {
	if x.a != y.a {
		return x.a < y.a
	}
	if x.b != y.b {
		return x.b < y.b
	}
	return x.c < y.c
}

// less reports whether a sorts before b in a heap of kind k.
func less(k heapKind, a, b *job) bool {
	x, y := node{e: a}, node{e: b}
	x.a, x.b, x.c = key(k, a)
	y.a, y.b, y.c = key(k, b)
	return x.less(&y)
}

// jobHeap is a 4-ary heap (half the depth of a binary one: fewer position
// writes into scattered jobs) of jobs that records each job's position in
// the job itself, so a job can be removed in O(log n). Lane heaps use
// job.slot (a job is in at most one lane heap, which job.lh names), the
// expiry heap and the retention heap job.gslot (a job is in the first
// only while live, in the second only once dead); -1 = absent.
type jobHeap struct {
	kind heapKind
	xs   []node
}

func (h *jobHeap) pos(e *job) *int32 {
	if h.kind >= hExpiry {
		return &e.gslot
	}
	return &e.slot
}

func (h *jobHeap) len() int { return len(h.xs) }

func (h *jobHeap) top() *job {
	if len(h.xs) == 0 {
		return nil
	}
	return h.xs[0].e
}

func (h *jobHeap) push(e *job) {
	n := node{e: e}
	n.a, n.b, n.c = key(h.kind, e)
	if h.kind < hExpiry {
		e.lh = h.kind
	}
	h.xs = append(h.xs, n)
	h.up(len(h.xs)-1, n)
}

func (h *jobHeap) pop() *job {
	e := h.xs[0].e
	h.remove(e)
	return e
}

// remove takes e out of h; e must be in h.
func (h *jobHeap) remove(e *job) {
	p := h.pos(e)
	i, n := int(*p), len(h.xs)-1
	last := h.xs[n]
	h.xs[n] = node{}
	h.xs = h.xs[:n]
	if i != n {
		// Refill the hole at i with the last node, sifting it either way.
		if i > 0 && last.less(&h.xs[(i-1)/4]) {
			h.up(i, last)
		} else {
			h.down(i, last)
		}
	}
	*p = -1
	if h.kind < hExpiry {
		e.lh = noHeap
	}
}

func (h *jobHeap) set(i int, n node) {
	h.xs[i] = n
	*h.pos(n.e) = int32(i)
}

// up places n at hole i or above.
func (h *jobHeap) up(i int, n node) {
	for i > 0 {
		p := (i - 1) / 4
		if !n.less(&h.xs[p]) {
			break
		}
		h.set(i, h.xs[p])
		i = p
	}
	h.set(i, n)
}

// down places n at hole i or below.
func (h *jobHeap) down(i int, n node) {
	m := len(h.xs)
	for {
		first := 4*i + 1
		if first >= m {
			break
		}
		c := first
		for r := first + 1; r < first+4 && r < m; r++ {
			if h.xs[r].less(&h.xs[c]) {
				c = r
			}
		}
		if !h.xs[c].less(&n) {
			break
		}
		h.set(i, h.xs[c])
		i = c
	}
	h.set(i, n)
}
