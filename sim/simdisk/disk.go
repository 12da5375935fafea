// Package simdisk is a deterministic, crashable in-memory file system for the
// simulator, modelled on pebble's crashable MemFS and the ALICE rules
// (Pillai et al., OSDI 2014).
//
// It executes the state machine's sm.FileOps against a volatile view and
// remembers, for every inode, what is durable: a file's data as of its last
// fsync, and a directory's entries as of its last fsync, plus the directory
// operations (create, rename, unlink, mkdir) issued on it since. A crash
// (Crash, or every state at once with CrashStates) keeps any subset of each
// directory's pending operations, replayed in their original order, and for
// every file whose data was not fsync'd any of: the durable data, the new
// data, the new data torn at a 512 B / 4 KiB boundary, the new data
// zeroed, or (after an append) the new data ending in garbage or with a
// zero-filled hole followed by later data. After a crash everything left
// is durable. Faults add EIO, ENOSPC and short writes, failed fsyncs that
// drop the dirty data (fsyncgate), and bit rot (Corrupt).
//
// Paths are relative to the node's base directory and '/'-separated; the
// base directory itself is "" (valid for OpList, OpFsync and OpFsyncDir).
// A rename must stay within one directory: a cross-directory rename fails
// with IOFailed (the state machine never issues one, and modelling it as
// atomic would couple two directories' pending operations).
//
// The bytes of a data slice stored in a Disk never change (an append may
// fill the spare capacity past the end of the inode's own latest slice,
// never a byte any slice covers), so clones, crash states and checkers
// share them freely. Nothing here reads a clock or the global
// random source: every random decision comes from the *rand.Rand the caller
// supplies, so the same seed gives the same result.
package simdisk

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/xce-hpc/xce/host/compute"
	"github.com/xce-hpc/xce/host/fileop"
	"github.com/xce-hpc/xce/sm"
)

// MaxPathLen bounds a path accepted by Exec (Linux PATH_MAX).
const MaxPathLen = sm.MaxPathLen

// Faults are per-disk fault-injection rates, each a probability in [0, 1]
// drawn per eligible operation from the disk's *rand.Rand (SetRand). Zero
// rates (the default) draw nothing.
type Faults struct {
	// WriteErr: OpWrite fails with IOFailed (EIO) before changing anything.
	WriteErr float64
	// NoSpace: OpWrite fails with IONoSpace (ENOSPC) before changing anything.
	NoSpace float64
	// FsyncErr: OpFsync / OpFsyncDir fail with IOFailed and make nothing durable.
	FsyncErr float64
	// ReadErr: OpRead of an existing file fails with IOFailed (bit rot
	// detected on read: the device's checksum caught it).
	ReadErr float64
	// NoSpace also fails OpMkdir and OpRename (a new directory, or a
	// directory entry that needs a new block), and, at a quarter of the
	// rate, the fsync of a file with unsynced data (the writeback of
	// delayed allocations).
	//
	// ShortWrite: when WriteErr or NoSpace fires on an OpWrite/OpAppend,
	// the chance that the write first stored a random non-empty proper
	// prefix of its data (a short write(2), then the error). The prefix
	// is unsynced page-cache data like any other write's.
	ShortWrite float64
	// FsyncGate: a failed fsync of a file drops the file's dirty data
	// (Linux's writeback error handling, "fsyncgate"): its contents revert
	// to what the disk durably holds, later reads return that, and a
	// retried fsync succeeds with nothing left to write.
	FsyncGate bool
	// TornGarbage: a crash (Crash) may also leave an unsynced appended
	// tail ending in random garbage, or with a zero-filled hole (whole
	// sectors never written) followed by data written after it.
	// CrashStates enumerates these states whatever the flag says.
	TornGarbage bool
}

// Disk is one node's simulated disk. It is not safe for concurrent use.
type Disk struct {
	root   *inode
	nextID uint64
	gen    uint64 // Gen
	faults Faults
	rng    *rand.Rand
	// lastCrash: what the last Crash did to unsynced files (LastCrash).
	lastCrash string
}

// inode is a file or a directory. Slices are immutable once stored.
type inode struct {
	id    uint64
	isDir bool

	// Files.
	data     []byte // current (volatile) contents
	mtime    int64
	durable  []byte // contents as of the last successful fsync
	durMtime int64
	dirty    bool // written since the last fsync
	// truncated: an O_TRUNC write happened since the last fsync. If not,
	// the file only grew by appends, and a crash can only tear or zero the
	// appended part (the fsync'd prefix is on disk).
	truncated bool
	// grow: the capacity of data's backing array past len(data) is this
	// inode's alone (its last write made data, and no slice of that array
	// reaches further), so an append may fill it in place. The bytes any
	// holder sees (data[:len] of some earlier state) never change; without
	// this, every append copied the whole file.
	grow bool

	// Directories.
	entries    map[string]*inode // current view
	durEntries map[string]*inode // as of the last successful fsync
	pending    []dirOp           // issued since the last fsync, in order
}

type opKind uint8

const (
	dirLink   opKind = iota + 1 // create or mkdir: name -> ino
	dirUnlink                   // remove name if it still names ino
	dirRename                   // name -> to, if name still names ino
)

// dirOp is a directory operation not yet made durable by an fsync of its
// directory. Ops refer to inodes, not only names, so that replaying a
// subset never moves or removes the wrong file.
type dirOp struct {
	kind opKind
	name string
	to   string
	ino  *inode
}

// New returns an empty disk (only the base directory, durable). The zero
// Disk is equivalent.
func New() *Disk {
	d := &Disk{}
	d.root = d.newDir(0)
	return d
}

// rootDir returns the base directory, creating it on a zero Disk.
func (d *Disk) rootDir() *inode {
	if d.root == nil {
		d.root = d.newDir(0)
	}
	return d.root
}

// SetFaults sets the fault-injection rates.
func (d *Disk) SetFaults(f Faults) { d.faults = f }

// SetRand sets the random source fault injection draws from, and Crash
// and Corrupt when they are given nil.
func (d *Disk) SetRand(r *rand.Rand) { d.rng = r }

func (d *Disk) newDir(wall int64) *inode {
	d.nextID++
	return &inode{
		id: d.nextID, isDir: true, mtime: wall, durMtime: wall,
		entries: map[string]*inode{}, durEntries: map[string]*inode{},
	}
}

func (d *Disk) newFile() *inode {
	d.nextID++
	return &inode{id: d.nextID}
}

func (n *inode) addOp(op dirOp) { n.pending = append(n.pending, op) }

// sync makes the inode's current state durable (fsync).
func (n *inode) sync() {
	if n.isDir {
		if len(n.pending) == 0 {
			return
		}
		n.durEntries = cloneEntries(n.entries)
		n.pending = nil
		return
	}
	n.durable, n.durMtime, n.dirty, n.truncated = n.data, n.mtime, false, false
}

func cloneEntries(m map[string]*inode) map[string]*inode {
	c := make(map[string]*inode, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// fault reports whether a fault of the given rate fires now.
func (d *Disk) fault(rate float64) bool {
	return rate > 0 && d.rng != nil && d.rng.Float64() < rate
}

// checkPath is sm.CheckPath, the rule the real file adapter applies too.
func checkPath(p string) string { return sm.CheckPath(p) }

// parentOf resolves all but the last component of p in the current view.
func (d *Disk) parentOf(verb, p string) (*inode, string, sm.IOErr, string) {
	if msg := checkPath(p); msg != "" {
		return nil, "", sm.IOFailed, verb + " " + quote(p) + ": " + msg
	}
	dir := d.rootDir()
	rest := p
	for {
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return dir, rest, sm.IOOK, ""
		}
		child := dir.entries[rest[:i]]
		if child == nil {
			return nil, "", sm.IONotExist, verb + " " + p + ": no such file or directory"
		}
		if !child.isDir {
			return nil, "", sm.IOFailed, verb + " " + p + ": not a directory"
		}
		dir, rest = child, rest[i+1:]
	}
}

// lookup resolves p ("" is the base directory) in the current view.
func (d *Disk) lookup(verb, p string) (*inode, sm.IOErr, string) {
	if p == "" {
		return d.rootDir(), sm.IOOK, ""
	}
	dir, name, e, detail := d.parentOf(verb, p)
	if e != sm.IOOK {
		return nil, e, detail
	}
	n := dir.entries[name]
	if n == nil {
		return nil, sm.IONotExist, verb + " " + p + ": no such file or directory"
	}
	return n, sm.IOOK, ""
}

func quote(p string) string {
	if p == "" || strings.ContainsAny(p, "\x00\n") {
		return strings.ReplaceAll(strings.ReplaceAll(`"`+p+`"`, "\x00", `\x00`), "\n", `\n`)
	}
	return p
}

// Exec executes op on the current (volatile) view at wall time wall (Unix
// ns, the new mtime of a written file) and returns its completion, with
// the one executor the daemon uses too (fileop.Exec). It never panics: a
// malformed path fails with IOFailed and a Detail.
func (d *Disk) Exec(op sm.FileOp, wall int64) sm.IODone {
	d.gen++
	return fileop.Exec(live{d, wall}, op)
}

// Gen counts the calls that may change the disk: every Exec, Compute,
// Crash, Corrupt(Before), Wipe and PutDurable. While it stays the same,
// so does everything the disk holds, in both views: a checker may keep
// what it read of the disk (Peek) until Gen changes.
func (d *Disk) Gen() uint64 { return d.gen }

// Compute executes c at wall time wall with the one executor of Computes
// the daemon uses too (compute.Exec): a ComputeEncodeTo writes its file
// on the volatile view, as an OpWrite does. It never panics.
func (d *Disk) Compute(c sm.Compute, wall int64) sm.Computed {
	d.gen++
	return compute.Exec(live{d, wall}, c)
}

// live is fileop.FS on the disk's volatile view at one wall time.
type live struct {
	d    *Disk
	wall int64
}

func fail(e sm.IOErr, detail string) error { return &fileop.Error{Class: e, Detail: detail} }

func (v live) Read(path string, max int64) ([]byte, int64, error) {
	d := v.d
	n, e, detail := d.lookup("open", path)
	if e != sm.IOOK {
		return nil, 0, fail(e, detail)
	}
	if n.isDir {
		return nil, 0, fail(sm.IOFailed, "read "+quote(path)+": is a directory")
	}
	if max > 0 && int64(len(n.data)) > max {
		return nil, 0, fail(sm.IOTooBig, "read "+path+": file larger than the size limit")
	}
	if d.fault(d.faults.ReadErr) {
		return nil, 0, fail(sm.IOFailed, "read "+path+": input/output error (bit rot detected on read)")
	}
	return append([]byte{}, n.data...), n.mtime, nil
}

func (v live) Write(path string, data []byte, appendTo bool) error {
	d := v.d
	dir, name, e, detail := d.parentOf("open", path)
	if e != sm.IOOK {
		return fail(e, detail)
	}
	n := dir.entries[name]
	if n != nil && n.isDir {
		return fail(sm.IOFailed, "open "+path+": is a directory")
	}
	var ferr *fileop.Error
	switch {
	case d.fault(d.faults.WriteErr):
		ferr = &fileop.Error{Class: sm.IOFailed, Detail: "write " + path + ": input/output error (injected)"}
	case d.fault(d.faults.NoSpace):
		ferr = &fileop.Error{Class: sm.IONoSpace, Detail: "write " + path + ": no space left on device (injected)"}
	}
	if ferr != nil {
		if len(data) < 2 || !d.fault(d.faults.ShortWrite) {
			return ferr
		}
		// A short write: a prefix reached the page cache first.
		data = data[:1+d.rng.IntN(len(data)-1)]
		ferr.Detail += " after a short write of " + strconv.Itoa(len(data)) + " bytes"
	}
	if n == nil {
		n = d.newFile()
		dir.entries[name] = n
		dir.addOp(dirOp{kind: dirLink, name: name, ino: n})
	}
	if !appendTo { // O_TRUNC
		n.data = slices.Clone(data)
		n.truncated = true
	} else if n.grow { // O_APPEND into the inode's own spare capacity
		n.data = append(n.data, data...)
	} else { // O_APPEND, the array shared: a new one
		n.data = append(slices.Clip(n.data), data...)
	}
	n.grow = true
	n.mtime = v.wall
	n.dirty = true
	if ferr != nil {
		return ferr
	}
	return nil
}

func (v live) Sync(path string) error {
	d := v.d
	n, e, detail := d.lookup("open", path)
	if e != sm.IOOK {
		return fail(e, detail)
	}
	e, what := sm.IOOK, ""
	switch {
	case d.fault(d.faults.FsyncErr):
		e, what = sm.IOFailed, "input/output error"
	case n.dirty && d.fault(d.faults.NoSpace/4):
		// Writeback of delayed allocations can fail with ENOSPC.
		e, what = sm.IONoSpace, "no space left on device"
	}
	if e != sm.IOOK {
		detail := "fsync " + quote(path) + ": " + what + " (injected)"
		if d.faults.FsyncGate && !n.isDir && n.dirty {
			// The kernel marks the failed pages clean: the new data is
			// gone from the cache, and nothing will write it.
			n.data, n.mtime, n.dirty, n.truncated, n.grow = n.durable, n.durMtime, false, false, false
			detail += "; the file's unsynced data was dropped"
		}
		return fail(e, detail)
	}
	n.sync()
	return nil
}

func (v live) List(path string) ([]sm.DirEntry, error) {
	n, e, detail := v.d.lookup("open", path)
	if e != sm.IOOK {
		return nil, fail(e, detail)
	}
	if !n.isDir {
		return nil, fail(sm.IOFailed, "readdir "+path+": not a directory")
	}
	out := make([]sm.DirEntry, 0, len(n.entries))
	for name, c := range n.entries {
		de := sm.DirEntry{Name: name, ModTime: c.mtime}
		if !c.isDir {
			de.Size = int64(len(c.data))
		}
		out = append(out, de)
	}
	slices.SortFunc(out, func(a, b sm.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (v live) Remove(path string) error {
	dir, name, e, detail := v.d.parentOf("remove", path)
	if e != sm.IOOK {
		return fail(e, detail)
	}
	n := dir.entries[name]
	if n == nil {
		return fail(sm.IONotExist, "remove "+path+": no such file or directory")
	}
	if n.isDir && len(n.entries) > 0 {
		return fail(sm.IOFailed, "remove "+path+": directory not empty")
	}
	delete(dir.entries, name)
	dir.addOp(dirOp{kind: dirUnlink, name: name, ino: n})
	return nil
}

func (v live) Mkdir(path string) error {
	d := v.d
	dir, name, e, detail := d.parentOf("mkdir", path)
	if e != sm.IOOK {
		return fail(e, detail)
	}
	if n := dir.entries[name]; n != nil {
		if n.isDir {
			return nil
		}
		return fail(sm.IOFailed, "mkdir "+path+": file exists and is not a directory")
	}
	if d.fault(d.faults.NoSpace) {
		return fail(sm.IONoSpace, "mkdir "+path+": no space left on device (injected)")
	}
	n := d.newDir(v.wall)
	dir.entries[name] = n
	dir.addOp(dirOp{kind: dirLink, name: name, ino: n})
	return nil
}

func (v live) Rename(from, to string) error {
	d := v.d
	verb := "rename " + quote(from) + " " + quote(to)
	sdir, sname, e, detail := d.parentOf("rename", from)
	if e != sm.IOOK {
		return fail(e, detail)
	}
	tdir, tname, e, detail := d.parentOf("rename", to)
	if e != sm.IOOK {
		return fail(e, detail)
	}
	src := sdir.entries[sname]
	if src == nil {
		return fail(sm.IONotExist, verb+": no such file or directory")
	}
	if sdir != tdir {
		return fail(sm.IOFailed, verb+": cross-directory rename is not modelled by simdisk")
	}
	if sname == tname {
		return nil // same entry: POSIX says do nothing
	}
	if d.fault(d.faults.NoSpace) {
		return fail(sm.IONoSpace, verb+": no space left on device (injected)")
	}
	if dst := tdir.entries[tname]; dst != nil {
		switch {
		case dst.isDir && !src.isDir:
			return fail(sm.IOFailed, verb+": target is a directory")
		case !dst.isDir && src.isDir:
			return fail(sm.IOFailed, verb+": target is not a directory")
		case dst.isDir && len(dst.entries) > 0:
			return fail(sm.IOFailed, verb+": target directory not empty")
		}
	}
	delete(sdir.entries, sname)
	sdir.entries[tname] = src
	sdir.addOp(dirOp{kind: dirRename, name: sname, to: tname, ino: src})
	return nil
}

// ErrNotDir reports a PutDurable path through an existing file.
var ErrNotDir = errors.New("simdisk: path component is not a directory")

// PutDurable provisions a file outside the simulated process: it creates
// the missing parent directories, writes data (mtime wall) and makes the
// file, its data and every directory on the way (with all of their pending
// operations) fully durable, as if the operator had installed it and the
// machine had synced. path must be valid for Exec.
func (d *Disk) PutDurable(path string, data []byte, wall int64) error {
	d.gen++
	if msg := checkPath(path); msg != "" {
		return errors.New("simdisk: " + msg)
	}
	dir := d.rootDir()
	comps := strings.Split(path, "/")
	for _, c := range comps[:len(comps)-1] {
		child := dir.entries[c]
		if child == nil {
			child = d.newDir(wall)
			dir.entries[c] = child
			dir.addOp(dirOp{kind: dirLink, name: c, ino: child})
		}
		if !child.isDir {
			return ErrNotDir
		}
		dir.sync()
		dir = child
	}
	name := comps[len(comps)-1]
	n := dir.entries[name]
	if n != nil && n.isDir {
		return errors.New("simdisk: " + path + " is a directory")
	}
	if n == nil {
		n = d.newFile()
		dir.entries[name] = n
		dir.addOp(dirOp{kind: dirLink, name: name, ino: n})
	}
	n.data, n.mtime, n.dirty, n.grow = slices.Clone(data), wall, true, false
	n.sync()
	dir.sync()
	return nil
}

// ReadFile returns a copy of the current contents of the file at path, for
// checkers; ok is false if there is no such file.
func (d *Disk) ReadFile(path string) (data []byte, ok bool) {
	n, e, _ := d.lookup("open", path)
	if e != sm.IOOK || n.isDir {
		return nil, false
	}
	return append([]byte{}, n.data...), true
}
