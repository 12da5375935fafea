package simdisk

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// MaxEnumPending bounds the pending operations of one directory that
// CrashStates enumerates (it tries all 2^n subsets of them).
const MaxEnumPending = 20

// CrashStates enumerates every distinct state a crash may leave right now:
// every subset of every directory's pending operations (replayed in order,
// inapplicable ones skipped) times every allowed content of every visible
// unsynced file (see Crash), deduplicated by Fingerprint. The order is
// deterministic; the first state is the unluckiest one (only what was
// durable survives). Each state is fully durable, has the disk's fault
// rates and no random source. The cost is exponential in the number of
// pending operations: use it on short, targeted sequences. If a directory
// has more than MaxEnumPending pending operations it returns nil.
func (d *Disk) CrashStates() []*Disk {
	s, _ := d.CrashStatesLimit(0)
	return s
}

// CrashStatesLimit is CrashStates returning at most limit states (0: no
// limit); complete reports whether the enumeration finished.
func (d *Disk) CrashStatesLimit(limit int) (states []*Disk, complete bool) {
	dirs := d.candidateDirs()
	// Distinct surviving entries of each directory, in subset order
	// (nothing kept first).
	outcomes := make([][]map[string]*inode, len(dirs))
	for i, dir := range dirs {
		k := len(dir.pending)
		if k == 0 {
			outcomes[i] = []map[string]*inode{dir.durEntries}
			continue
		}
		if k > MaxEnumPending {
			return nil, false
		}
		seen := map[string]bool{}
		keep := make([]bool, k)
		for mask := uint32(0); mask < 1<<k; mask++ {
			for j := range keep {
				keep[j] = mask>>j&1 == 1
			}
			m := replay(dir, keep)
			if key := entriesKey(m); !seen[key] {
				seen[key] = true
				outcomes[i] = append(outcomes[i], m)
			}
		}
	}

	p := newPlan()
	seen := map[[32]byte]bool{}
	complete = true
	// emit records the state p describes; false stops the enumeration.
	emit := func() bool {
		fp := fingerprint(d.rootDir(), p)
		if seen[fp] {
			return true
		}
		if limit > 0 && len(states) >= limit {
			complete = false
			return false
		}
		seen[fp] = true
		states = append(states, &Disk{root: materialize(d.rootDir(), p), nextID: d.nextID, faults: d.faults})
		return true
	}
	var files []*inode
	var opts [][]dataOpt
	var dataRec func(i int) bool
	dataRec = func(i int) bool {
		if i == len(files) {
			return emit()
		}
		for _, o := range opts[i] {
			p.data[files[i]] = o
			if !dataRec(i + 1) {
				return false
			}
		}
		return true
	}
	var dirRec func(i int) bool
	dirRec = func(i int) bool {
		if i == len(dirs) {
			clear(p.data)
			files = d.dirtyFiles(p)
			opts = opts[:0]
			for _, f := range files {
				opts = append(opts, dataOptions(f))
			}
			return dataRec(0)
		}
		for _, m := range outcomes[i] {
			p.dirs[dirs[i]] = m
			if !dirRec(i + 1) {
				return false
			}
		}
		return true
	}
	dirRec(0)
	return states, complete
}

// entriesKey canonically names a directory's entries (names and inodes).
func entriesKey(m map[string]*inode) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(m)) {
		b.WriteString(strconv.Quote(name))
		b.WriteByte('=')
		b.WriteString(strconv.FormatUint(m[name].id, 10))
		b.WriteByte(';')
	}
	return b.String()
}
