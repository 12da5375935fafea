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
//
// Its nodes are kept in a slice while they are few, then in chunks of
// chunkLen: a heap of a few jobs costs a few nodes, and a large one grows
// by a chunk at a time, never copying what it holds. One slice grown by
// append copied the whole heap at each growth (by 1.25x past a few
// hundred nodes) into fresh pages: 40% of a primary's Step while it
// enqueued 400,000 jobs into a new queue, and of a standby checkpoint's
// replay (docs/performance.md).
type jobHeap struct {
	kind   heapKind
	small  []node            // the nodes while chunks is nil
	chunks []*[chunkLen]node // the nodes once there were chunkLen
	n      int
}

const (
	chunkBits = 10
	chunkLen  = 1 << chunkBits // 32 KiB of nodes
)

func (h *jobHeap) pos(e *job) *int32 {
	if h.kind >= hExpiry {
		return &e.gslot
	}
	return &e.slot
}

// at is the node at index i < h.n.
func (h *jobHeap) at(i int) *node {
	if h.chunks == nil {
		return &h.small[i]
	}
	return &h.chunks[i>>chunkBits][i&(chunkLen-1)]
}

func (h *jobHeap) len() int { return h.n }

func (h *jobHeap) top() *job {
	if h.n == 0 {
		return nil
	}
	return h.at(0).e
}

// grow makes room for one more node at index h.n.
func (h *jobHeap) grow() {
	switch {
	case h.chunks == nil && h.n < chunkLen:
		if h.n == len(h.small) {
			s := append(h.small, node{})
			h.small = s[:min(cap(s), chunkLen)]
		}
	case h.chunks == nil: // the slice is full: it becomes the first chunk
		first := new([chunkLen]node)
		copy(first[:], h.small)
		h.chunks, h.small = []*[chunkLen]node{first}, nil
		fallthrough
	default:
		if c := h.n >> chunkBits; c == len(h.chunks) {
			h.chunks = append(h.chunks, new([chunkLen]node))
		}
	}
}

func (h *jobHeap) push(e *job) {
	n := node{e: e}
	n.a, n.b, n.c = key(h.kind, e)
	if h.kind < hExpiry {
		e.lh = h.kind
	}
	h.grow()
	h.n++
	h.up(h.n-1, n)
}

func (h *jobHeap) pop() *job {
	e := h.at(0).e
	h.remove(e)
	return e
}

// remove takes e out of h; e must be in h.
func (h *jobHeap) remove(e *job) {
	p := h.pos(e)
	i, n := int(*p), h.n-1
	lp := h.at(n)
	last := *lp
	*lp = node{}
	h.n = n
	if c := len(h.chunks) - 1; c > 0 && n>>chunkBits < c-1 {
		// Two chunks past the last node: let the spare one go (one is
		// kept, so that a heap at a chunk's edge does not churn).
		h.chunks[c] = nil
		h.chunks = h.chunks[:c]
	}
	if i != n {
		// Refill the hole at i with the last node, sifting it either way.
		if i > 0 && last.less(h.at((i-1)/4)) {
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
	*h.at(i) = n
	*h.pos(n.e) = int32(i)
}

// up places n at hole i or above.
func (h *jobHeap) up(i int, n node) {
	for i > 0 {
		p := (i - 1) / 4
		pn := h.at(p)
		if !n.less(pn) {
			break
		}
		h.set(i, *pn)
		i = p
	}
	h.set(i, n)
}

// down places n at hole i or below.
func (h *jobHeap) down(i int, n node) {
	m := h.n
	for {
		first := 4*i + 1
		if first >= m {
			break
		}
		// The four children of a node start at a multiple of four plus
		// one, so they may straddle two chunks: each is found by at.
		c, cn := first, h.at(first)
		for r := first + 1; r < first+4 && r < m; r++ {
			if rn := h.at(r); rn.less(cn) {
				c, cn = r, rn
			}
		}
		if !cn.less(&n) {
			break
		}
		h.set(i, *cn)
		i = c
	}
	h.set(i, n)
}
