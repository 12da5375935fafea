// Package fileop is the one executor of sm's file operations: Exec checks
// an operation's path, runs it on a file system (FS) and classifies the
// result into the completion sm receives. A FileOp is plain data; the
// work on the job state (sm.Compute) is host/compute's. The daemon, the tools and the
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

	"github.com/xce-hpc/xce/sm"
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
// returns at offset 0 (a snapshot's header, known only at its end). A
// checkpoint is so written (host/compute, ComputeEncodeTo).
type StreamFS interface {
	WriteStream(path string, fill func(io.Writer) (head []byte, err error)) error
}

// ReadStreamFS is an FS that hands a file to a reader as it is on disk,
// never read whole (a received snapshot's check): read gets the open
// file and its size, at most max bytes (0: any; larger is an error of
// class IOTooBig before anything is read), and its error is returned.
type ReadStreamFS interface {
	ReadStream(path string, max int64, read func(r io.ReaderAt, size int64) error) error
}

// ErrPathRefused is wrapped by the error of a refused path.
var ErrPathRefused = errors.New("path refused")

// Exec executes op on fsys and returns its completion (ID = op.ID). It
// never panics on a malformed op. A failed operation returns no data,
// entries or mtime.
func Exec(fsys FS, op sm.FileOp) sm.IODone {
	r := sm.IODone{ID: op.ID}
	err := CheckPath(op.Path, op.Op == sm.OpRead || op.Op == sm.OpFsync || op.Op == sm.OpFsyncDir || op.Op == sm.OpList)
	if err == nil {
		switch op.Op {
		case sm.OpWrite, sm.OpAppend:
			err = fsys.Write(op.Path, op.Data, op.Op == sm.OpAppend)
		case sm.OpFsync, sm.OpFsyncDir:
			// fsync(2) on any descriptor syncs that inode: a file's data
			// or a directory's entries, whichever op kind names it.
			err = fsys.Sync(op.Path)
		case sm.OpRename:
			if err = CheckPath(op.To, false); err == nil {
				err = fsys.Rename(op.Path, op.To)
			}
		case sm.OpRemove:
			err = fsys.Remove(op.Path)
		case sm.OpMkdir:
			err = fsys.Mkdir(op.Path)
		case sm.OpRead:
			r.Data, r.ModTime, err = fsys.Read(op.Path, op.MaxSize)
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

// CheckPath applies sm.CheckPath; "" (the base directory) only if
// allowBase. Exec checks every op's paths with it, host/compute the file
// a Compute writes.
func CheckPath(p string, allowBase bool) error {
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
