package fileio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// TrashDir, under an Executor's base, holds large files the node removed
// while they are deleted in the background.
const TrashDir = "trash"

// A removal of a large file (an old checkpoint, an old WAL segment) is a
// rename into TrashDir; a goroutine then shrinks the file in steps and
// unlinks it. Unlinked at once, the filesystem frees all its blocks in
// one journal transaction, and every fsync on the disk waits for it: a
// 240 MB snapshot's unlink held this machine's WAL fsyncs 160–180 ms
// (BenchmarkFsyncDuringSnapshotWrite). The removal's semantics are
// unchanged: once it completes, the path names nothing, and the fsync of
// its directory the node issues next makes that durable. A file left in
// TrashDir by a crash is deleted at the next removal.
const (
	trashStep  = 16 << 20 // bytes freed per truncation
	trashPause = 10 * time.Millisecond
)

// trashMin: smaller files are unlinked at once (a variable for the
// benchmark that compares both).
var trashMin int64 = 8 << 20

type trash struct {
	mu      sync.Mutex
	seq     uint64
	running bool
	closed  bool
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	// onErr receives a failure of the background deletion (the file
	// stays in TrashDir and is tried again at the next removal).
	onErr func(path string, err error)
}

// take moves p (under base) into base's TrashDir if it is a regular file
// of trashMin bytes or more and starts its deletion; moved false: p is
// left for the caller to unlink (small, not a regular file, missing, or
// the rename failed: another filesystem).
func (t *trash) take(base, p string, onErr func(path string, err error)) (moved bool) {
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() || st.Size() < trashMin {
		return false
	}
	dir := filepath.Join(base, TrashDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.onErr = onErr
	t.seq++
	to := filepath.Join(dir, fmt.Sprintf("%d.%d-%s", time.Now().UnixNano(), t.seq, filepath.Base(p)))
	if err := syscall.Rename(p, to); err != nil {
		return false
	}
	if !t.running {
		t.running = true
		t.wake, t.stop, t.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go t.run(dir)
	}
	select {
	case t.wake <- struct{}{}:
	default: // a wake is pending: the loop lists the directory anew
	}
	return true
}

func (t *trash) run(dir string) {
	defer close(t.done)
	for {
		t.empty(dir)
		select {
		case <-t.wake:
		case <-t.stop:
			return
		}
	}
}

// empty deletes every file in dir, each in steps.
func (t *trash) empty(dir string) {
	des, err := os.ReadDir(dir)
	if err != nil {
		t.fail(dir, err)
		return
	}
	for _, de := range des {
		if t.stopped() {
			return
		}
		p := filepath.Join(dir, de.Name())
		if err := t.shrink(p); err != nil {
			t.fail(p, err)
		}
	}
}

// shrink truncates p trashStep at a time, from its end, then unlinks it.
func (t *trash) shrink(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	for err == nil && st.Size() > 0 && !t.stopped() {
		if err = f.Truncate(max(0, st.Size()-trashStep)); err == nil {
			time.Sleep(trashPause)
			st, err = f.Stat()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || t.stopped() {
		return err
	}
	return os.Remove(p)
}

func (t *trash) stopped() bool {
	select {
	case <-t.stop:
		return true
	default:
		return false
	}
}

func (t *trash) fail(p string, err error) {
	t.mu.Lock()
	onErr := t.onErr
	t.mu.Unlock()
	if onErr != nil {
		onErr(p, err)
	}
}

// close stops the deletion (what is left in TrashDir waits for the next
// run) and waits for its goroutine; no file is taken afterwards.
func (t *trash) close() {
	t.mu.Lock()
	t.closed = true
	running := t.running
	if running {
		t.running = false
		close(t.stop)
	}
	t.mu.Unlock()
	if running {
		<-t.done
	}
}
