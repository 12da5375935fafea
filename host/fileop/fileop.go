// Package fileop is the one executor of sm's file operations: Exec checks
// an operation's path, runs it on a file system (FS) and classifies the
// result into the completion sm receives. The daemon, the tools and the
// simulator share it: fileio's FS is the operating system's, simdisk's the
// simulator's crashable disk, so both execute effects with the same rules
// (which operations may name the base directory, what a failed read
// returns, how errors are classified).
package fileop

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"

	"xce/sm"
)

// FS is a file system under a base directory. Paths are relative, checked
// by Exec (sm.CheckPath) before they arrive; "" names the base directory
// (only for Read, Sync and List). Errors are classified by Class.
type FS interface {
	// Write replaces (append false) or extends (append true) path's data,
	// creating the file (0600) if needed.
	Write(path string, data []byte, append bool) error
	// Sync is fsync of a file or a directory.
	Sync(path string) error
	Rename(from, to string) error
	Remove(path string) error
	// Mkdir creates a directory (0700); an existing directory is fine.
	Mkdir(path string) error
	// Read returns a regular file's data (at most max bytes, 0 = any:
	// larger is an error of class IOTooBig) and its mtime (Unix ns).
	Read(path string, max int64) (data []byte, modTime int64, err error)
	// List returns a directory's entries sorted by name.
	List(path string) ([]sm.DirEntry, error)
}

// Error is an error of a known class with its text (an FS that is not the
// OS's reports its failures with it).
type Error struct {
	Class  sm.IOErr
	Detail string
}

func (e *Error) Error() string { return e.Detail }

// ErrTooBig: a read's file is larger than its MaxSize.
var ErrTooBig = errors.New("file larger than the size limit")

// Class classifies an error: an *Error's own class; ErrTooBig ->
// IOTooBig; ENOENT or fs.ErrNotExist -> IONotExist; ENOSPC, EDQUOT ->
// IONoSpace; nil -> IOOK; anything else -> IOFailed.
func Class(err error) sm.IOErr {
	var e *Error
	switch {
	case err == nil:
		return sm.IOOK
	case errors.As(err, &e):
		return e.Class
	case errors.Is(err, ErrTooBig):
		return sm.IOTooBig
	case errors.Is(err, syscall.ENOENT), errors.Is(err, fs.ErrNotExist):
		return sm.IONotExist
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return sm.IONoSpace
	default:
		return sm.IOFailed
	}
}

// StreamFS is an FS that writes a file as it is produced: WriteStream
// replaces path's data with what fill writes, then writes the head fill
// returns at offset 0 (a snapshot's header, known only at its end).
type StreamFS interface {
	WriteStream(path string, fill func(io.Writer) (head []byte, err error)) error
}

// ErrPathRefused is wrapped by the error of a refused path.
var ErrPathRefused = errors.New("path refused")

// Exec executes op on fsys and returns its completion (ID = op.ID). It
// never panics on a malformed op. A failed operation returns no data,
// entries or mtime. OpEncode and OpImport touch no file: they run sm's
// pure code on the op's data, off the node's Step.
func Exec(fsys FS, op sm.FileOp) sm.IODone {
	r := sm.IODone{ID: op.ID}
	if op.Op == sm.OpEncode { // no file: the bytes of a snapshot
		if op.Snapshot == nil {
			return sm.IODone{ID: op.ID, Err: sm.IOFailed, Detail: "encode without a snapshot"}
		}
		data, err := op.Snapshot.Encode()
		if err != nil {
			return sm.IODone{ID: op.ID, Err: sm.IOFailed, Detail: fmt.Sprintf("cannot encode the snapshot: %v", err)}
		}
		return sm.IODone{ID: op.ID, Data: data}
	}
	if op.Op == sm.OpImport { // no file: the job state of a snapshot's bytes
		if op.Load == nil {
			return sm.IODone{ID: op.ID, Err: sm.IOFailed, Detail: "import without a snapshot load"}
		}
		return sm.IODone{ID: op.ID, Loaded: importPiped(op.Load, op.Data)}
	}
	err := checkPath(op.Path, op.Op == sm.OpRead || op.Op == sm.OpFsync || op.Op == sm.OpFsyncDir || op.Op == sm.OpList)
	if err == nil {
		switch op.Op {
		case sm.OpWrite, sm.OpAppend:
			data := op.Data
			if sfs, ok := fsys.(StreamFS); ok && op.Snapshot != nil && op.Op == sm.OpWrite && data == nil {
				// A checkpoint, encoded here and written as it goes, off
				// the node's Step, never held whole (sm.SnapshotData.EncodeTo).
				if err = sfs.WriteStream(op.Path, op.Snapshot.EncodeTo); err != nil {
					err = fmt.Errorf("cannot write the snapshot: %w", err)
				}
				break
			}
			if op.Snapshot != nil && op.Op == sm.OpWrite && data == nil {
				// A checkpoint: encoded here, off the node's Step.
				if data, err = op.Snapshot.Encode(); err != nil {
					err = fmt.Errorf("cannot encode the snapshot: %w", err)
					break
				}
			}
			err = fsys.Write(op.Path, data, op.Op == sm.OpAppend)
		case sm.OpFsync, sm.OpFsyncDir:
			// fsync(2) on any descriptor syncs that inode: a file's data
			// or a directory's entries, whichever op kind names it.
			err = fsys.Sync(op.Path)
		case sm.OpRename:
			if err = checkPath(op.To, false); err == nil {
				err = fsys.Rename(op.Path, op.To)
			}
		case sm.OpRemove:
			err = fsys.Remove(op.Path)
		case sm.OpMkdir:
			err = fsys.Mkdir(op.Path)
		case sm.OpRead:
			r.Data, r.ModTime, err = fsys.Read(op.Path, op.MaxSize)
			if err == nil && op.Check != nil {
				// A received snapshot, verified here, off the node's Step.
				if verr := op.Check.Verify(r.Data); verr != nil {
					return sm.IODone{ID: op.ID, Err: sm.IOCorrupt, Detail: fmt.Sprintf("%s: %v", op.Path, verr)}
				}
				r.Data = nil
			}
		case sm.OpList:
			r.Entries, err = fsys.List(op.Path)
		default:
			err = fmt.Errorf("unknown file operation %s (%d)", op.Op, op.Op)
		}
	}
	if err != nil {
		r.Data, r.Entries, r.ModTime = nil, nil, 0
		r.Err, r.Detail = Class(err), err.Error()
	}
	return r
}

// checkPath applies sm.CheckPath; "" (the base directory) only if allowBase.
func checkPath(p string, allowBase bool) error {
	if p == "" {
		if allowBase {
			return nil
		}
		return fmt.Errorf("%w: empty path", ErrPathRefused)
	}
	if msg := sm.CheckPath(p); msg != "" {
		return fmt.Errorf("%w: %q: %s", ErrPathRefused, p, msg)
	}
	return nil
}

// importInFlight is how many batches an import's stages share.
const importInFlight = 4

// importPiped is l.Import(data) with its two stages (sm's Decode and
// ImportBuild) on two goroutines, batches of jobs handed from one to the
// other in file order: decoding the file and building the state are each
// about half of a large recovery's import. The result is Import's,
// however the goroutines are scheduled (the build stops at the first
// error in file order, and then the decoder is stopped).
func importPiped(l *sm.SnapshotLoad, data []byte) *sm.LoadedSnapshot {
	full := make(chan *sm.ImportBatch, importInFlight)
	free := make(chan *sm.ImportBatch, importInFlight)
	for range importInFlight - 1 {
		free <- sm.NewImportBatch()
	}
	stop := make(chan struct{})
	go func() {
		defer close(full)
		last := l.Decode(data, sm.NewImportBatch(), func(b *sm.ImportBatch) *sm.ImportBatch {
			select {
			case full <- b:
			case <-stop:
				return nil
			}
			select {
			case b = <-free:
				return b
			case <-stop:
				return nil
			}
		})
		if last != nil {
			select {
			case full <- last:
			case <-stop:
			}
		}
	}()
	b := l.NewBuild()
	for x := range full {
		if !b.Add(x) {
			close(stop)
			for range full { // until the decoder has stopped
			}
			break
		}
		free <- x // never blocks: there are importInFlight batches in all
	}
	return b.Done()
}
