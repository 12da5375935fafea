package queue

import (
	"iter"
	"slices"
)

// pageBits sets the table's page: 2^pageBits consecutive ids, one pointer
// each (2 KiB).
const pageBits = 8

const pageSlots = 1 << pageBits

// table maps job ids to *T, for ids handed out in increasing order (the
// job table; docs/performance.md, "Memory per job"). Ids are dense within
// a term and leap between terms (sm's TermIDFloor), so the table is a map
// of pages of consecutive ids: a lookup is a small map's (one entry per
// 256 ids, so it stays in cache) and one slot of a page, and consecutive
// ids share a page instead of each costing a map slot of its own (8 bytes
// a job when its page is full, where a map[uint64]*T costs 24 and more
// while it grows). A page is freed with its last job, so ids that leap,
// or old jobs left alive among many acked, cost at most one page per live
// job and never the span between them.
//
// A frozen copy (freeze) shares every page with the table until the table
// writes to it: the table copies a page (2 KiB) before its first change
// after a freeze, so a copy costs one map entry per page (a checkpoint's
// View of 1M jobs: 3,907 entries, not 1M pointers, inside Step).
type table[T any] struct {
	pages map[uint64]*page[T] // by id >> pageBits
	n     int
	gen   uint64 // pages of an older gen may be a frozen copy's: copy on write
}

type page[T any] struct {
	n     int // occupied slots
	gen   uint64
	slots *[pageSlots]*T
}

func newTable[T any]() table[T] { return table[T]{pages: make(map[uint64]*page[T])} }

func (t *table[T]) len() int { return t.n }

// get is the value of id, nil if none.
func (t *table[T]) get(id uint64) *T {
	if p := t.pages[id>>pageBits]; p != nil {
		return p.slots[id&(pageSlots-1)]
	}
	return nil
}

// put sets id's value to v (not nil).
func (t *table[T]) put(id uint64, v *T) {
	p := t.writable(id >> pageBits)
	if p == nil {
		p = &page[T]{gen: t.gen, slots: new([pageSlots]*T)}
		t.pages[id>>pageBits] = p
	}
	s := &p.slots[id&(pageSlots-1)]
	if *s == nil {
		p.n++
		t.n++
	}
	*s = v
}

// delete removes id, freeing its page if it was the page's last.
func (t *table[T]) delete(id uint64) {
	p := t.pages[id>>pageBits]
	if p == nil || p.slots[id&(pageSlots-1)] == nil {
		return
	}
	p = t.writable(id >> pageBits)
	s := &p.slots[id&(pageSlots-1)]
	*s = nil
	p.n--
	t.n--
	if p.n == 0 {
		delete(t.pages, id>>pageBits)
	}
}

// writable is page k, copied first if a frozen copy may share it; nil if
// there is none.
func (t *table[T]) writable(k uint64) *page[T] {
	p := t.pages[k]
	if p == nil || p.gen == t.gen {
		return p
	}
	c := &page[T]{n: p.n, gen: t.gen, slots: new([pageSlots]*T)}
	*c.slots = *p.slots
	t.pages[k] = c
	return c
}

// freeze returns a read-only copy of t, as it is now, that t's later
// changes do not reach. The copy may be read on another goroutine.
func (t *table[T]) freeze() table[T] {
	f := table[T]{pages: make(map[uint64]*page[T], len(t.pages)), n: t.n, gen: t.gen}
	for k, p := range t.pages { // unordered: a copy of the map
		f.pages[k] = p
	}
	t.gen++
	return f
}

// all yields every id and its value in id order. The table must not
// change during the iteration.
func (t *table[T]) all() iter.Seq2[uint64, *T] {
	return func(yield func(uint64, *T) bool) {
		keys := make([]uint64, 0, len(t.pages))
		for k := range t.pages {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			for i, v := range t.pages[k].slots {
				if v != nil && !yield(k<<pageBits|uint64(i), v) {
					return
				}
			}
		}
	}
}
