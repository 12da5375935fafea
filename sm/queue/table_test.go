package queue

import (
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestTableIsMap drives the job table and a plain map with the same puts,
// gets, deletes and iterations, over ids dense (consecutive, as one term
// hands them out), leaping (a term's floor, 2^40 apart, and across page
// boundaries) and already used, and checks after every step that they
// agree, that iteration is in id order, and that no page is kept empty;
// and that every frozen copy still holds exactly the map as it was when
// it was frozen, whatever the table did since.
func TestTableIsMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tab, m := newTable[int](), map[uint64]*int{}
		type frozen struct {
			tab table[int]
			m   map[uint64]*int
		}
		var copies []frozen
		next := rapid.Uint64Range(1, 3*pageSlots).Draw(t, "first")
		id := func(t *rapid.T) uint64 {
			switch rapid.IntRange(0, 3).Draw(t, "kind") {
			case 0: // the next id of the term
				next++
				return next - 1
			case 1: // a new term's floor, or a page boundary
				term := rapid.Uint64Range(0, 1<<24-1).Draw(t, "term")
				next = term<<40 | rapid.SampledFrom([]uint64{1, pageSlots - 1, pageSlots}).Draw(t, "off")
				return next
			case 2: // one in use
				if len(m) > 0 {
					ids := make([]uint64, 0, len(m))
					for k := range m {
						ids = append(ids, k)
					}
					slices.Sort(ids)
					return rapid.SampledFrom(ids).Draw(t, "used")
				}
				return next
			default: // near the last
				return next - min(next, rapid.Uint64Range(0, 2*pageSlots).Draw(t, "back"))
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				k, v := id(t), new(int)
				tab.put(k, v)
				m[k] = v
			},
			"putRun": func(t *rapid.T) { // a batch: many ids of one or two pages
				for range rapid.IntRange(1, 2*pageSlots).Draw(t, "n") {
					k, v := id(t), new(int)
					tab.put(k, v)
					m[k] = v
				}
			},
			"get": func(t *rapid.T) {
				if k := id(t); tab.get(k) != m[k] {
					t.Fatalf("get(%d) = %p, map %p", k, tab.get(k), m[k])
				}
			},
			"delete": func(t *rapid.T) {
				k := id(t)
				tab.delete(k)
				delete(m, k)
			},
			"deleteMost": func(t *rapid.T) { // acks leaving a few old jobs alive
				keep := rapid.IntRange(1, 300).Draw(t, "keep")
				var ids []uint64
				for k := range tab.all() {
					ids = append(ids, k)
				}
				for i, k := range ids {
					if i%keep != 0 {
						tab.delete(k)
						delete(m, k)
					}
				}
			},
			"freeze": func(t *rapid.T) {
				copies = append(copies, frozen{tab.freeze(), maps.Clone(m)})
			},
			"": func(t *rapid.T) {
				for i, c := range copies {
					n := 0
					for k, v := range c.tab.all() {
						if c.m[k] != v {
							t.Fatalf("frozen copy %d yields %d: %p, then %p", i, k, v, c.m[k])
						}
						n++
					}
					if n != len(c.m) || c.tab.len() != len(c.m) {
						t.Fatalf("frozen copy %d yields %d ids (len %d), held %d", i, n, c.tab.len(), len(c.m))
					}
				}
				if tab.len() != len(m) {
					t.Fatalf("len %d, map %d", tab.len(), len(m))
				}
				var got []uint64
				for k, v := range tab.all() {
					if m[k] != v {
						t.Fatalf("all yields %d: %p, map %p", k, v, m[k])
					}
					got = append(got, k)
				}
				if !slices.IsSorted(got) || len(got) != len(m) {
					t.Fatalf("all yields %d ids, map has %d (sorted: %v)", len(got), len(m), slices.IsSorted(got))
				}
				for k, p := range tab.pages {
					if p.n == 0 {
						t.Fatalf("page %d kept empty", k)
					}
				}
			},
		})
	})
}
