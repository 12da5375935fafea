package fileio

import (
	"os"

	"golang.org/x/sys/unix"
)

// writeBack starts the kernel's writeback of the bytes a large write just
// dirtied, piece by piece, and waits for the piece writeBackLag behind, so
// a snapshot of tens of MB never sits dirty in the page cache until its
// fsync: flushed at once, it stalls every other fsync on the disk (the WAL's
// of this node and of any other on the device) for as long as it takes
// (measured: a 60 MB file's fsync held 2 ms WAL fsyncs up to 96 ms; paced,
// 31 ms). Durability is unchanged: the fsync the node asks for follows.
// Errors are ignored: the writeback is advice, the fsync reports failure.
// A write of writeBackMin bytes or more is also paced to rate (pacer).
func writeBack(f *os.File, off int64, data []byte, rate int64) (int, error) {
	if len(data) < writeBackMin {
		return f.Write(data)
	}
	return newBackWriter(f, off, rate).Write(data)
}

// backWriter is writeBack over a stream of writes (a snapshot written as
// it is encoded, WriteStream): the lag counts from start.
type backWriter struct {
	f                  *os.File
	fd                 int
	start, off, waited int64 // waited: bytes from start whose writeback was waited for
	pace               pacer
}

func newBackWriter(f *os.File, off int64, rate int64) *backWriter {
	return &backWriter{f: f, fd: int(f.Fd()), start: off, off: off, pace: newPacer(rate)}
}

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
			}
			w.pace.wrote(k)
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
