package fileio

import (
	"os"

	"golang.org/x/sys/unix"
)

// backWriter starts the kernel's writeback of the bytes a large write just
// dirtied (see writeBack) over a stream of writes (a snapshot written as
// it is encoded, WriteStream): the lag counts from start.
type backWriter struct {
	f                  *os.File
	fd                 int
	start, off, waited int64 // waited: bytes from start whose writeback was waited for
	flushed            int64 // bytes from start flushed to the device (flushPiece)
	pace               pacer
}

func newBackWriter(f *os.File, off int64, rate int64) *backWriter {
	return &backWriter{f: f, fd: int(f.Fd()), start: off, off: off, pace: newPacer(rate)}
}

// at starts the next Write at off (the file's end, for an append), paced
// on its own: the lag still counts from the first write, but the time
// between two appends is no budget for the next one.
func (w *backWriter) at(off int64) { w.off, w.pace = off, newPacer(w.pace.rate) }

func (w *backWriter) Write(data []byte) (int, error) {
	n := 0
	for n < len(data) {
		end := min(n+writeBackPiece, len(data))
		k, err := w.f.Write(data[n:end])
		n += k
		if k > 0 {
			_ = unix.SyncFileRange(w.fd, w.off, int64(k), unix.SYNC_FILE_RANGE_WRITE)
			w.off += int64(k)
			if lag := w.off - w.start - writeBackLag*writeBackPiece; lag > w.waited {
				_ = unix.SyncFileRange(w.fd, w.start+w.waited, lag-w.waited,
					unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
				w.waited = lag
				if w.waited-w.flushed >= flushPiece {
					if err := w.flush(); err != nil {
						return n, err
					}
				}
			}
			w.pace.wrote(k)
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// flush makes the bytes written back so far durable (fdatasync): the
// device's cache is flushed by the bulk writer, a piece at a time, rather
// than by the next WAL fsync on the same disk, which would wait for all
// of it (see flushPiece). Its failure fails the write: after a failed
// fdatasync the kernel may report the file's later fsync as a success,
// the lost pages marked clean (fsyncgate), so it is never ignored.
func (w *backWriter) flush() error {
	if err := unix.Fdatasync(w.fd); err != nil {
		return &os.PathError{Op: "fdatasync", Path: w.f.Name(), Err: err}
	}
	w.flushed = w.waited
	return nil
}
