package simdisk

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/xce-hpc/xce/sm"
)

// dataOpt is one possible surviving content of a file after a crash.
type dataOpt struct {
	data  []byte
	mtime int64
}

// plan is one crash outcome: the surviving entries of every candidate
// directory and the surviving data of every unsynced file that matters.
// Files absent from data keep their durable data.
type plan struct {
	dirs map[*inode]map[string]*inode
	data map[*inode]dataOpt
}

func newPlan() *plan {
	return &plan{dirs: map[*inode]map[string]*inode{}, data: map[*inode]dataOpt{}}
}

func (p *plan) entries(dir *inode) map[string]*inode {
	if m, ok := p.dirs[dir]; ok {
		return m
	}
	return dir.durEntries
}

func (p *plan) file(f *inode) dataOpt {
	if o, ok := p.data[f]; ok {
		return o
	}
	return dataOpt{f.durable, f.durMtime}
}

// view abstracts which state of the tree a walk sees.
type view interface {
	entries(dir *inode) map[string]*inode
	file(f *inode) dataOpt
}

type currentView struct{}

func (currentView) entries(dir *inode) map[string]*inode { return dir.entries }
func (currentView) file(f *inode) dataOpt                { return dataOpt{f.data, f.mtime} }

type durableView struct{}

func (durableView) entries(dir *inode) map[string]*inode { return dir.durEntries }
func (durableView) file(f *inode) dataOpt                { return dataOpt{f.durable, f.durMtime} }

// maxDepth guards the recursive walks; valid paths cannot nest deeper.
const maxDepth = MaxPathLen/2 + 1

// walk visits every entry under dir in v, depth first, names sorted.
func walk(dir *inode, prefix string, v view, depth int, fn func(path string, n *inode)) {
	if depth > maxDepth {
		return
	}
	m := v.entries(dir)
	var buf [16]string // a directory's names, sorted (on the stack for most)
	names := buf[:0]
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		n := m[name]
		p := prefix + name
		fn(p, n)
		if n.isDir {
			walk(n, p+"/", v, depth+1, fn)
		}
	}
}

// candidateDirs lists, by inode id, every directory that may be visible
// after a crash: reachable from the root through durable entries or
// pending creates.
func (d *Disk) candidateDirs() []*inode {
	seen := map[*inode]bool{}
	var out []*inode
	stack := []*inode{d.rootDir()}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[dir] {
			continue
		}
		seen[dir] = true
		out = append(out, dir)
		for _, c := range dir.durEntries {
			if c.isDir {
				stack = append(stack, c)
			}
		}
		for _, op := range dir.pending {
			if op.ino.isDir {
				stack = append(stack, op.ino)
			}
		}
	}
	slices.SortFunc(out, func(a, b *inode) int { return cmp.Compare(a.id, b.id) })
	return out
}

// replay applies the kept pending ops of dir, in order, to its durable
// entries; an op that no longer applies (its name does not name its inode
// any more) is skipped.
func replay(dir *inode, keep []bool) map[string]*inode {
	m := cloneEntries(dir.durEntries)
	for i, op := range dir.pending {
		if !keep[i] {
			continue
		}
		switch op.kind {
		case dirLink:
			m[op.name] = op.ino
		case dirUnlink:
			if m[op.name] == op.ino {
				delete(m, op.name)
			}
		case dirRename:
			if m[op.name] == op.ino {
				delete(m, op.name)
				m[op.to] = op.ino
			}
		}
	}
	return m
}

// dirtyFiles lists, by inode id, the unsynced files visible under p.
func (d *Disk) dirtyFiles(p *plan) []*inode {
	seen := map[*inode]bool{}
	var out []*inode
	walk(d.rootDir(), "", p, 0, func(_ string, n *inode) {
		if !n.isDir && n.dirty && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	})
	slices.SortFunc(out, func(a, b *inode) int { return cmp.Compare(a.id, b.id) })
	return out
}

// tornBase is where a crash may start tearing or zeroing f: after the
// fsync'd prefix of an append-only file, else at 0.
func tornBase(f *inode) int {
	if !f.truncated && len(f.data) >= len(f.durable) && string(f.data[:len(f.durable)]) == string(f.durable) {
		return len(f.durable)
	}
	return 0
}

// zeroedFrom is f's data with bytes from base on zeroed.
func zeroedFrom(f *inode, base int) []byte {
	z := make([]byte, len(f.data))
	copy(z, f.data[:base])
	return z
}

// sector is the unit a crash tears at: a torn tail, garbage or a hole
// starts at a multiple of it (4 KiB pages are multiples too).
const sector = 512

// holeLen is the length of an enumerated hole: one 4 KiB page never
// written while later data was (Crash draws 512 B or 4 KiB).
const holeLen = sector

// garbageFrom is f's data up to n, then garbage to its end: the last
// sectors of an unsynced append held whatever the device had there.
// The garbage is a fixed function of (file, n) so states stay canonical.
func garbageFrom(f *inode, n int, r *rand.Rand) []byte {
	g := slices.Clone(f.data[:n:n])
	if r == nil {
		r = rand.New(rand.NewPCG(f.id, uint64(n)))
	}
	for len(g) < len(f.data) {
		g = append(g, byte(r.Uint32()))
	}
	return g
}

// holeAt is f's data with [n, n+size) zeroed (clipped to its length):
// later sectors persisted, these did not.
func holeAt(f *inode, n, size int) []byte {
	h := slices.Clone(f.data)
	clear(h[n:min(n+size, len(h))])
	return h
}

// firstSector is the first sector boundary at or after the torn base.
func firstSector(base int) int { return (base + sector - 1) / sector * sector }

// dataOptions lists the distinct contents an unsynced file may have after
// a crash, in a fixed order: durable, current, current torn at every 512 B
// boundary below its length (4 KiB boundaries included, 0 included),
// current zeroed, then, if the file only grew by appends since its fsync,
// for every 4 KiB boundary of the unsynced tail (and its first sector
// boundary): the tail ending in garbage from there, and a 4 KiB hole there
// with data after it.
func dataOptions(f *inode) []dataOpt {
	opts := []dataOpt{{f.durable, f.durMtime}, {f.data, f.mtime}}
	base := tornBase(f)
	for n := base - base%sector; n < len(f.data); n += sector {
		if n >= base {
			opts = append(opts, dataOpt{f.data[:n:n], f.mtime})
		}
	}
	if len(f.data) > 0 {
		opts = append(opts, dataOpt{zeroedFrom(f, base), f.mtime})
	}
	first := firstSector(base)
	if f.truncated {
		first = len(f.data) // garbage and holes are for appended tails
	}
	for n := first; n < len(f.data); n += holeLen {
		if n > first {
			n -= n % holeLen
		}
		opts = append(opts, dataOpt{garbageFrom(f, n, nil), f.mtime})
		if n+holeLen < len(f.data) {
			opts = append(opts, dataOpt{holeAt(f, n, holeLen), f.mtime})
		}
	}
	out := opts[:0]
	for _, o := range opts {
		if !slices.ContainsFunc(out, func(x dataOpt) bool { return string(x.data) == string(o.data) }) {
			out = append(out, o)
		}
	}
	return out
}

// randomOpt draws one crash outcome for an unsynced file and names it;
// with garbage, half the outcomes of an appended file are a tail ending in
// garbage or a hole before later data (where the tail spans a sector).
func randomOpt(f *inode, r *rand.Rand, garbage bool) (dataOpt, string) {
	kind := r.IntN(4)
	if garbage && !f.truncated && r.IntN(2) == 0 {
		kind = 4 // half the time: garbage or a hole
	}
	switch kind {
	case 1:
		return dataOpt{f.data, f.mtime}, "kept"
	case 2:
		base := tornBase(f)
		if len(f.data) > base {
			bs := sector
			if r.IntN(2) == 1 {
				bs = 4096
			}
			first := (base + bs - 1) / bs
			last := (len(f.data) - 1) / bs
			if last >= first {
				n := (first + r.IntN(last-first+1)) * bs
				return dataOpt{f.data[:n:n], f.mtime}, "torn"
			}
		}
	case 3:
		return dataOpt{zeroedFrom(f, tornBase(f)), f.mtime}, "zeroed"
	case 4:
		first := firstSector(tornBase(f))
		if first >= len(f.data) {
			break
		}
		n := first + r.IntN((len(f.data)-first+sector-1)/sector)*sector
		if r.IntN(2) == 0 {
			return dataOpt{garbageFrom(f, n, r), f.mtime}, "garbage"
		}
		size := sector << (3 * r.IntN(2)) // 512 B or 4 KiB
		if n+size >= len(f.data) {
			size = sector // a page does not fit before the end: a sector may
		}
		if n+size < len(f.data) {
			return dataOpt{holeAt(f, n, size), f.mtime}, "hole"
		}
		return dataOpt{garbageFrom(f, n, r), f.mtime}, "garbage"
	}
	return dataOpt{f.durable, f.durMtime}, "lost"
}

// materialize builds the fully durable tree p describes. Inode ids are
// kept (so hard links stay links); data slices are shared.
func materialize(root *inode, p *plan) *inode {
	made := map[*inode]*inode{}
	var build func(old *inode, depth int) *inode
	build = func(old *inode, depth int) *inode {
		if n, ok := made[old]; ok {
			return n
		}
		n := &inode{id: old.id, isDir: old.isDir}
		made[old] = n
		if !old.isDir {
			o := p.file(old)
			n.data, n.durable, n.mtime, n.durMtime = o.data, o.data, o.mtime, o.mtime
			return n
		}
		n.mtime, n.durMtime = old.mtime, old.mtime
		ents := p.entries(old)
		n.entries = make(map[string]*inode, len(ents))
		if depth <= maxDepth {
			for name, c := range ents {
				n.entries[name] = build(c, depth+1)
			}
		}
		n.durEntries = cloneEntries(n.entries)
		return n
	}
	return build(root, 0)
}

// Crash replaces the disk's state by one allowed crash state drawn from r
// (the disk's own source if r is nil; with neither, the unluckiest state:
// only what was durable survives). Each directory keeps a random subset of
// its pending operations; each visible unsynced file keeps its durable,
// current, torn or zeroed data (with Faults.TornGarbage also a tail ending
// in garbage or holding a hole before later data). The result is fully
// durable.
func (d *Disk) Crash(r *rand.Rand) {
	d.gen++
	if r == nil {
		r = d.rng
	}
	p := newPlan()
	if r != nil {
		keepP := r.Float64()
		for _, dir := range d.candidateDirs() {
			if len(dir.pending) == 0 {
				continue
			}
			keep := make([]bool, len(dir.pending))
			for i := range keep {
				keep[i] = r.Float64() < keepP
			}
			p.dirs[dir] = replay(dir, keep)
		}
		count := map[string]int{}
		for _, f := range d.dirtyFiles(p) {
			var kind string
			p.data[f], kind = randomOpt(f, r, d.faults.TornGarbage)
			count[kind]++
		}
		d.lastCrash = ""
		for _, k := range []string{"lost", "kept", "torn", "zeroed", "garbage", "hole"} {
			if count[k] > 0 {
				d.lastCrash += fmt.Sprintf(" %s=%d", k, count[k])
			}
		}
	}
	d.root = materialize(d.rootDir(), p)
}

// LastCrash summarises what the last Crash did to unsynced files: how
// many kept their durable data (lost), their new data (kept), were torn,
// zeroed, ended in garbage or got a hole; "" if none was unsynced.
func (d *Disk) LastCrash() string { return strings.TrimSpace(d.lastCrash) }

// Corrupt flips one bit, chosen by r (the disk's source if nil), of the
// current and the durable data of the file at path: silent at-rest bit rot.
// It reports false if there is no such non-empty file.
func (d *Disk) Corrupt(path string, r *rand.Rand) bool { return d.CorruptBefore(path, -1, r) }

// CorruptBefore is Corrupt with the flipped bit in the first limit bytes
// (limit < 0: anywhere); false if there are none.
func (d *Disk) CorruptBefore(path string, limit int, r *rand.Rand) bool {
	d.gen++
	if r == nil {
		r = d.rng
	}
	n, e, _ := d.lookup("open", path)
	if e != sm.IOOK || n.isDir || len(n.data) == 0 || r == nil {
		return false
	}
	size := len(n.data)
	if limit >= 0 {
		size = min(size, limit)
	}
	if size == 0 {
		return false
	}
	bit := r.IntN(size * 8)
	flip := func(b []byte) []byte {
		c := slices.Clone(b)
		c[bit/8] ^= 1 << (bit % 8)
		return c
	}
	same := string(n.data) == string(n.durable)
	n.data, n.grow = flip(n.data), false
	switch {
	case same:
		n.durable = n.data
	case bit/8 < len(n.durable):
		n.durable = flip(n.durable)
	}
	return true
}

// Wipe empties the disk: the machine was replaced.
func (d *Disk) Wipe() {
	d.gen++
	d.root = d.newDir(0)
}

// Clone returns an independent deep copy, pending operations and unsynced
// data included. The clone has the same fault rates but no random source.
func (d *Disk) Clone() *Disk {
	made := map[*inode]*inode{}
	var cp func(o *inode) *inode
	cp = func(o *inode) *inode {
		if n, ok := made[o]; ok {
			return n
		}
		n := new(inode)
		*n = *o
		n.grow = false // the original may still fill the spare capacity
		made[o] = n
		if o.isDir {
			n.entries = make(map[string]*inode, len(o.entries))
			for k, v := range o.entries {
				n.entries[k] = cp(v)
			}
			n.durEntries = make(map[string]*inode, len(o.durEntries))
			for k, v := range o.durEntries {
				n.durEntries[k] = cp(v)
			}
			n.pending = slices.Clone(o.pending)
			for i := range n.pending {
				n.pending[i].ino = cp(n.pending[i].ino)
			}
		}
		return n
	}
	return &Disk{root: cp(d.rootDir()), nextID: d.nextID, faults: d.faults}
}

func files(root *inode, v view) map[string][]byte {
	out := map[string][]byte{}
	walk(root, "", v, 0, func(p string, n *inode) {
		if !n.isDir {
			out[p] = append([]byte{}, v.file(n).data...)
		}
	})
	return out
}

// Files returns a copy of every file's current contents by path.
func (d *Disk) Files() map[string][]byte { return files(d.rootDir(), currentView{}) }

// DurableFiles returns what a crash with no luck keeps: the files reachable
// through durable directory entries, with their durable data.
func (d *Disk) DurableFiles() map[string][]byte { return files(d.rootDir(), durableView{}) }

// Paths returns the sorted paths of the current view's files.
func (d *Disk) Paths() []string { return d.paths(false) }

// Dirs returns the sorted paths of the current view's directories (the
// base directory "" excluded).
func (d *Disk) Dirs() []string { return d.paths(true) }

func (d *Disk) paths(dirs bool) []string {
	var out []string
	walk(d.rootDir(), "", currentView{}, 0, func(p string, n *inode) {
		if n.isDir == dirs {
			out = append(out, p)
		}
	})
	slices.Sort(out)
	return out
}

// Pending reports whether anything is not yet durable: a directory
// operation not followed by a directory fsync, or unsynced file data.
func (d *Disk) Pending() bool {
	for _, dir := range d.candidateDirs() {
		if len(dir.pending) > 0 {
			return true
		}
	}
	dirty := false
	walk(d.rootDir(), "", currentView{}, 0, func(_ string, n *inode) {
		dirty = dirty || (!n.isDir && n.dirty)
	})
	return dirty
}

// fingerprint hashes the tree root has in v: every path (directories
// marked) with its file data, in walk order.
func fingerprint(root *inode, v view) [32]byte {
	h := sha256.New()
	var buf [binary.MaxVarintLen64 + 1]byte
	walk(root, "", v, 0, func(p string, n *inode) {
		buf[0] = 'F'
		if n.isDir {
			buf[0] = 'D'
		}
		k := 1 + binary.PutUvarint(buf[1:], uint64(len(p)))
		h.Write(buf[:k])
		h.Write([]byte(p))
		if !n.isDir {
			data := v.file(n).data
			k = binary.PutUvarint(buf[:], uint64(len(data)))
			h.Write(buf[:k])
			h.Write(data)
		}
	})
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Fingerprint is a canonical hash of the current view: every directory and
// file path with each file's data (not mtimes). Equal trees, equal hashes.
func (d *Disk) Fingerprint() [32]byte { return fingerprint(d.rootDir(), currentView{}) }

// String renders the current view, marking unsynced data ("*") and listing
// each directory's pending operations, for test failure messages.
func (d *Disk) String() string {
	var b strings.Builder
	walk(d.rootDir(), "", currentView{}, 0, func(p string, n *inode) {
		if n.isDir {
			fmt.Fprintf(&b, "%s/\n", p)
			return
		}
		mark := ""
		if n.dirty {
			mark = fmt.Sprintf(" * (durable %d B)", len(n.durable))
		}
		fmt.Fprintf(&b, "%s %d B %q%s\n", p, len(n.data), abbrev(n.data), mark)
	})
	for _, dir := range d.candidateDirs() {
		for _, op := range dir.pending {
			switch op.kind {
			case dirLink:
				fmt.Fprintf(&b, "pending in dir#%d: create %s (#%d)\n", dir.id, op.name, op.ino.id)
			case dirUnlink:
				fmt.Fprintf(&b, "pending in dir#%d: unlink %s (#%d)\n", dir.id, op.name, op.ino.id)
			case dirRename:
				fmt.Fprintf(&b, "pending in dir#%d: rename %s -> %s (#%d)\n", dir.id, op.name, op.to, op.ino.id)
			}
		}
	}
	return b.String()
}

func abbrev(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// DurableFile returns what a crash with no luck keeps of one file: its
// durable data, if every directory entry on its path is durable.
func (d *Disk) DurableFile(path string) ([]byte, bool) {
	b, ok := d.DurableData(path)
	if !ok {
		return nil, false
	}
	return append([]byte{}, b...), true
}
