// Package fileio executes the state machine's sm.FileOps on the real file
// system, under one node's base directory (${workdir}/${name}).
//
// Each op is exactly the system calls the seed's write procedure names
// (seed 002 §3.2): nothing is fsync'd unless an OpFsync / OpFsyncDir asks
// for it, so durability is decided by the state machine alone. The
// simulator's sim/simdisk executes the same ops in memory;
// conformance_test.go runs identical sequences against both.
//
// Behaviour per op (all paths relative to Base, '/'-separated):
//
//   - OpWrite: open(O_WRONLY|O_CREAT|O_TRUNC, 0600), write all, close. No
//     fsync. A failed write leaves whatever was written: cleanup is the
//     state machine's business.
//   - OpAppend: the same with O_APPEND instead of O_TRUNC.
//   - OpFsync, OpFsyncDir: open(O_RDONLY), fsync, close. Both work on files
//     and directories alike (as in simdisk: fsync(2) syncs whatever inode
//     the descriptor names). Path "" is Base itself.
//   - OpRename: rename(2) (not os.Rename, which refuses to replace an
//     empty directory). Cross-directory renames are performed (simdisk
//     refuses them; the state machine never issues one).
//   - OpRemove: unlink(2); an empty directory is removed with rmdir(2), as
//     simdisk does.
//   - OpMkdir: mkdir(2) 0700. On EEXIST the path must be a directory (a
//     symlink to one is accepted) and its permission bits are set to 0700
//     if they differ (seed 002 §3.2 step 0).
//   - OpRead: open, fstat; a directory fails with IOFailed; a file larger
//     than MaxSize (when > 0) fails with IOTooBig before anything is read;
//     otherwise the whole file and its mtime (Unix ns) are returned. A file
//     that grows past MaxSize between fstat and read also fails IOTooBig.
//   - OpList: every entry of the directory, sorted by name, subdirectories
//     included (Size 0, as simdisk reports them), with Size and ModTime
//     from lstat(2). An entry that vanishes between readdir and lstat is
//     skipped.
//
// Errors: ENOENT (and fs.ErrNotExist) -> IONotExist, ENOSPC and EDQUOT -> IONoSpace, anything
// else -> IOFailed; Detail is the error text. A path that is absolute,
// empty where a name is needed, or has an empty, "." or ".." component is
// refused with IOFailed before any system call, so no op can leave Base
// lexically (the same paths simdisk refuses). Symlinks inside Base are
// followed: an operator may link data/ elsewhere on a local file system.
package fileio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/xce-hpc/xce/host/compute"
	"github.com/xce-hpc/xce/host/fileop"
	"github.com/xce-hpc/xce/sm"
)

// MaxPathLen bounds a relative path (Linux PATH_MAX, as simdisk).
const MaxPathLen = sm.MaxPathLen

// Executor runs FileOps under Base, the node's ${workdir}/${name}. Base
// must exist (the daemon creates it, 0700, before booting the node). The
// zero value is not usable; an Executor must not be copied once used. It
// keeps the file it last appended to open (kept.go; Close closes it) and
// is safe for concurrent use, but the runner issues each lane's ops from
// one goroutine so they execute in order.
type Executor struct {
	Base string
	// ObserveSync, if set, receives how long each OpFsync (dir false) or
	// OpFsyncDir (dir true) took, failed ones included (the metrics).
	ObserveSync func(dir bool, took time.Duration)
	// WriteRate, if positive, paces every write of a large file (a
	// checkpoint, a received snapshot's chunk) to that many bytes a
	// second, so that the WAL's fsyncs on the same disk do not queue
	// behind it (writeback.go).
	WriteRate int64
	// TrashError, if set, receives a failure to delete a removed large
	// file in the background (trash.go); the file stays in TrashDir.
	TrashError func(path string, err error)
	// AroundLarge, if set, is called before a Compute that allocates in
	// proportion to the job state — ComputeEncode (a snapshot encoded
	// whole in memory for a standby) and ComputeImport (a snapshot's jobs
	// loaded at recovery) — and the function it returns after it: the
	// daemon's collector policy gives the heap room meanwhile.
	AroundLarge func() (after func())
	// AroundRead, if set, is called before a background read (a standby
	// checkpoint's segments: FileOp.Background)
	// and the function it returns after it: the read's buffer (tens to
	// hundreds of MB) is allocated at once, and under the daemon's
	// collector policy it put the heap past its goal, so that the
	// collection which followed charged its marking to every goroutine
	// that allocated, the event loop's included (docs/performance.md).
	AroundRead func() (after func())
	// BackgroundNice, if positive, runs the node's background work (a
	// checkpoint's encode, a standby's sync snapshot, a received
	// snapshot's check, which reads its file: background.go; and the
	// reads marked FileOp.Background: a standby checkpoint's)
	// on a thread of its own whose nice value is raised by it, so that on
	// a busy machine the goroutines that answer requests get the CPU
	// first.
	BackgroundNice int
	// BackgroundError, if set, receives the failure to lower background
	// work's priority; the work ran at the node's priority.
	BackgroundError func(error)

	kept  kept
	trash trash
}

// ErrPathRefused is wrapped by the error of a refused path (its text
// starts the IODone Detail).
var ErrPathRefused = fileop.ErrPathRefused

// Exec executes op and returns its completion (ID = op.ID), with the one
// executor every adapter and the simulator use (fileop.Exec) on the
// operating system's files under Base. It never panics on a malformed op.
func (e *Executor) Exec(op sm.FileOp) sm.IODone {
	if !op.Background || op.Op != sm.OpRead {
		return e.exec(op)
	}
	if e.AroundRead != nil {
		defer e.AroundRead()()
	}
	if e.BackgroundNice <= 0 {
		return e.exec(op)
	}
	// A background read (a standby checkpoint's) is background work too:
	// its copy into a fresh buffer, page faults and all, takes a CPU for
	// a tenth of a second per 100 MB.
	var d sm.IODone
	e.lowered(func() { d = e.exec(op) })
	return d
}

// lowered runs f at BackgroundNice (inBackground) and reports a failure
// to lower its priority to BackgroundError; f runs either way.
func (e *Executor) lowered(f func()) {
	if err := runInBackground(e.BackgroundNice, f); err != nil && e.BackgroundError != nil {
		e.BackgroundError(err)
	}
}

// exec is Exec's file operation itself, on the calling goroutine.
func (e *Executor) exec(op sm.FileOp) sm.IODone {
	fs := osFS{e.Base, &e.kept, e}
	if e.ObserveSync == nil || op.Op != sm.OpFsync && op.Op != sm.OpFsyncDir {
		return fileop.Exec(fs, op)
	}
	start := time.Now()
	d := fileop.Exec(fs, op)
	e.ObserveSync(op.Op == sm.OpFsyncDir, time.Since(start))
	return d
}

// Compute executes c and returns its completion (ID = c.ID), with the one
// executor of Computes (compute.Exec); a checkpoint (ComputeEncodeTo) is
// written to the operating system's files under Base as it is encoded.
// It never panics on a malformed Compute.
func (e *Executor) Compute(c sm.Compute) sm.Computed {
	if (c.Kind == sm.ComputeEncode || c.Kind == sm.ComputeImport) && e.AroundLarge != nil {
		defer e.AroundLarge()()
	}
	fs := osFS{e.Base, &e.kept, e}
	if e.BackgroundNice <= 0 || !background(c.Kind) {
		return compute.Exec(fs, c)
	}
	var d sm.Computed
	e.lowered(func() { d = compute.Exec(fs, c) })
	return d
}

// osFS is fileop.FS on the operating system, under base, with the
// executor's kept file, trash and settings.
type osFS struct {
	base string
	kept *kept
	e    *Executor
}

func (o osFS) path(rel string) (string, error) {
	if o.base == "" {
		return "", fmt.Errorf("%w: executor has no base directory", ErrPathRefused)
	}
	if rel == "" {
		return o.base, nil
	}
	return filepath.Join(o.base, filepath.FromSlash(rel)), nil
}

func (o osFS) Write(rel string, data []byte, appendTo bool) error {
	p, err := o.path(rel)
	if err != nil {
		return err
	}
	if appendTo {
		return o.kept.appendTo(rel, p, data, o.e.WriteRate)
	}
	if err := o.kept.forget(rel); err != nil {
		return err
	}
	return writeFile(p, data, o.e.WriteRate)
}

// WriteStream is fileop.StreamFS: path replaced by what fill writes as
// it produces it (written back as writeFile's large writes are), then
// fill's head written at offset 0.
func (o osFS) WriteStream(rel string, fill func(io.Writer) (head []byte, err error)) error {
	p, err := o.path(rel)
	if err != nil {
		return err
	}
	if err := o.kept.forget(rel); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	head, err := fill(newBackWriter(f, 0, o.e.WriteRate))
	if err == nil {
		_, err = f.WriteAt(head, 0)
	}
	cerr := f.Close()
	if err != nil {
		return err
	}
	return cerr
}

func (o osFS) Sync(rel string) error {
	p, err := o.path(rel)
	if err != nil {
		return err
	}
	if ok, err := o.kept.sync(rel); ok {
		return err
	}
	return fsyncPath(p)
}

func (o osFS) Rename(from, to string) error {
	pf, err := o.path(from)
	if err != nil {
		return err
	}
	pt, err := o.path(to)
	if err != nil {
		return err
	}
	if err := errors.Join(o.kept.forget(from), o.kept.forget(to)); err != nil {
		return err
	}
	return rename(pf, pt)
}

func (o osFS) Remove(rel string) error {
	p, err := o.path(rel)
	if err != nil {
		return err
	}
	if err := o.kept.forget(rel); err != nil {
		return err
	}
	if o.e.trash.take(o.base, p, o.e.TrashError) {
		return nil
	}
	return os.Remove(p)
}

func (o osFS) Mkdir(rel string) error {
	p, err := o.path(rel)
	if err != nil {
		return err
	}
	return mkdir(p)
}

func (o osFS) Read(rel string, max int64) ([]byte, int64, error) {
	p, err := o.path(rel)
	if err != nil {
		return nil, 0, err
	}
	return readFile(p, max)
}

func (o osFS) List(rel string) ([]sm.DirEntry, error) {
	p, err := o.path(rel)
	if err != nil {
		return nil, err
	}
	return list(p)
}

// CheckPath is sm.CheckPath: the rule the simulated disk applies too.
func CheckPath(p string) string { return sm.CheckPath(p) }

// MapErr classifies an error (fileop.Class): ENOENT or fs.ErrNotExist ->
// IONotExist, ENOSPC and EDQUOT -> IONoSpace, nil -> IOOK, anything else
// -> IOFailed.
func MapErr(err error) sm.IOErr { return fileop.Class(err) }

var errTooBig = fileop.ErrTooBig

// ErrNotRegular: a file the daemon reads is a FIFO, device or socket.
var ErrNotRegular = errors.New("not a regular file")

// ErrSymlink: a file the daemon reads is a symbolic link. Every file it
// reads it wrote itself, by rename, so a link there was put by hand (a
// conf/current pointing elsewhere, say): refused, not followed.
var ErrSymlink = errors.New("is a symbolic link (the controller reads only the files it wrote, never through a link)")

// Writes of writeBackMin bytes or more (a snapshot, a received snapshot's
// chunk) are written back as they go (writeBack), in pieces of
// writeBackPiece bytes, at most writeBackLag pieces ahead of the disk, and
// flushed to the device every flushPiece bytes: a WAL fsync on the same
// disk flushes the device's cache, and with nothing flushing it between,
// it waited for the tens of MB a checkpoint or a received snapshot had
// put there (fsyncs of 60-110 ms while a fresh standby wrote its 280 MB
// snapshot; docs/performance.md, "The two stalls").
const (
	writeBackMin   = 256 << 10
	writeBackPiece = 1 << 20
	writeBackLag   = 4
	flushPiece     = 16 << 20
)

// writeFile is open(O_WRONLY|O_CREAT|O_TRUNC, 0600) + write all + close
// (appends go through the kept file: kept.go).
func writeFile(path string, data []byte, rate int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, werr := writeBack(f, 0, data, rate) // os.File.Write loops until all is written or fails
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

// rename is rename(2) itself: unlike os.Rename it replaces an empty
// directory with a directory, as POSIX (and simdisk) allow.
func rename(from, to string) error {
	if err := syscall.Rename(from, to); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

func fsyncPath(path string) error {
	f, err := os.Open(path) // O_RDONLY: valid for files and directories
	if err != nil {
		return err
	}
	serr := f.Sync()
	cerr := f.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

func mkdir(path string) error {
	err := os.Mkdir(path, 0o700)
	if err == nil || !errors.Is(err, syscall.EEXIST) {
		return err
	}
	st, serr := os.Stat(path)
	if serr != nil {
		return serr
	}
	if !st.IsDir() {
		return fmt.Errorf("mkdir %s: file exists and is not a directory", path)
	}
	if st.Mode().Perm() != 0o700 {
		return os.Chmod(path, 0o700)
	}
	return nil
}

// readFile reads a regular file of at most maxSize bytes (0: any). It
// opens non-blocking, so a FIFO or device in its place is refused at once
// instead of hanging the reader (and with it SIGTERM handling), and
// without following a symbolic link (ErrSymlink).
func readFile(path string, maxSize int64) ([]byte, int64, error) {
	f, st, err := openRead(path, maxSize)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	var rd io.Reader = f
	if maxSize > 0 {
		rd = io.LimitReader(f, maxSize+1) // the file may grow after fstat
	}
	data, err := readSized(rd, st.Size())
	if err != nil {
		return nil, 0, err
	}
	if maxSize > 0 && int64(len(data)) > maxSize {
		return nil, 0, fmt.Errorf("read %s: %w (grew past %d bytes while reading)", path, errTooBig, maxSize)
	}
	return data, st.ModTime().UnixNano(), nil
}

// openRead opens a regular file to read (never through a symbolic link,
// never a FIFO or device) no larger than maxSize (0: any), and stats it.
func openRead(path string, maxSize int64) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, fmt.Errorf("read %s: %w", path, ErrSymlink)
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	switch {
	case err != nil:
	case st.IsDir():
		err = &os.PathError{Op: "read", Path: path, Err: syscall.EISDIR}
	case !st.Mode().IsRegular():
		err = fmt.Errorf("read %s: %w (%s)", path, ErrNotRegular, st.Mode().Type())
	case maxSize > 0 && st.Size() > maxSize:
		err = fmt.Errorf("read %s: %w (%d > %d bytes)", path, errTooBig, st.Size(), maxSize)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

var _ fileop.ReadStreamFS = osFS{} // a received snapshot is checked as it is read

// ReadStream hands rel to read as it is on disk, a window at a time at
// read's pace, never held whole (fileop.ReadStreamFS): its size is the
// fstat's, so a file that grows meanwhile is read as it was.
func (o osFS) ReadStream(rel string, max int64, read func(r io.ReaderAt, size int64) error) error {
	p, err := o.path(rel)
	if err != nil {
		return err
	}
	f, st, err := openRead(p, max)
	if err != nil {
		return err
	}
	err = read(f, st.Size())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readSized reads rd to its end into one buffer of size+1 bytes (the
// byte more sees the end without growing it), grown only if the file grew
// since its fstat: a snapshot of hundreds of MB read by io.ReadAll's
// doubling was copied and cleared several times over (most of a
// recovery's read time).
func readSized(rd io.Reader, size int64) ([]byte, error) {
	data := make([]byte, 0, max(size, 0)+1)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := rd.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func list(path string) ([]sm.DirEntry, error) {
	des, err := os.ReadDir(path) // sorted by name
	if err != nil {
		return nil, err
	}
	out := make([]sm.DirEntry, 0, len(des))
	for _, de := range des {
		info, err := de.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue // removed since readdir
		}
		if err != nil {
			return nil, err
		}
		e := sm.DirEntry{Name: de.Name(), ModTime: info.ModTime().UnixNano()}
		if !info.IsDir() {
			e.Size = info.Size()
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b sm.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
