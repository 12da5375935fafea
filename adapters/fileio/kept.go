package fileio

import (
	"io"
	"os"
	"strings"
	"sync"
)

// kept holds the file last appended to (the WAL's open segment) open
// between operations: an append and the fsync after it then cost no open
// and close each, which on this machine's disk was a fifth of a durable
// write's latency (BenchmarkSharedDiskFsync). The semantics of every op
// are unchanged: an append writes through the kept descriptor exactly as
// through a fresh one, an fsync of the kept path syncs the same inode, and
// any op that could make the path name another file (a truncating write,
// a rename or removal of it or of a directory above it) closes it first.
type kept struct {
	mu  sync.Mutex
	rel string // "" when none is kept
	f   *os.File
	// bw writes the kept file's large appends back (writeBack) as one
	// stream: a snapshot received from the primary arrives as hundreds of
	// chunk appends, and a writer per append never waited for any of its
	// writeback, so the whole transfer (300 MB at 1M jobs) could sit in
	// the disk's queue ahead of every other fsync on the device.
	bw *backWriter
}

// closeLocked drops the kept file.
func (k *kept) closeLocked() error {
	if k.f == nil {
		return nil
	}
	err := k.f.Close()
	k.f, k.rel, k.bw = nil, "", nil
	return err
}

// forget closes the kept file if rel is it or a directory holding it.
func (k *kept) forget(rel string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.f == nil || k.rel != rel && !strings.HasPrefix(k.rel, rel+"/") && rel != "" {
		return nil
	}
	return k.closeLocked()
}

// appendTo appends data to the file at p (rel under the base), keeping it
// open for the next append or fsync.
func (k *kept) appendTo(rel, p string, data []byte, rate int64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.rel != rel {
		if err := k.closeLocked(); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		k.f, k.rel = f, rel
	}
	var err error
	if len(data) < writeBackMin {
		_, err = k.f.Write(data) // os.File.Write loops until all is written or fails
	} else {
		var off int64
		if off, err = k.f.Seek(0, io.SeekEnd); err == nil {
			if k.bw == nil {
				k.bw = newBackWriter(k.f, off, rate)
			}
			k.bw.at(off) // small appends may have come between
			_, err = k.bw.Write(data)
		}
	}
	if err != nil {
		_ = k.closeLocked() // reopened by the next op: its offset is the file's end again
		return err
	}
	return nil
}

// sync fsyncs the kept file if it is rel; ok false if it is not kept.
func (k *kept) sync(rel string) (ok bool, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.f == nil || k.rel != rel {
		return false, nil
	}
	return true, k.f.Sync()
}

// Close closes the file an Executor keeps open (none is kept afterwards
// until the next append) and stops the background deletion of removed
// large files (what is left is deleted after the next removal, by this
// executor or the next). Safe to call more than once.
func (e *Executor) Close() error {
	e.trash.close()
	e.kept.mu.Lock()
	defer e.kept.mu.Unlock()
	return e.kept.closeLocked()
}
