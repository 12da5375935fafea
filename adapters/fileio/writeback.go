package fileio

import (
	"os"
	"time"
)

// pacer holds a large write (a checkpoint, a snapshot received from the
// primary) to rate bytes a second on average: written as fast as the disk
// takes it, a 240 MB snapshot held this machine's WAL fsyncs on the same
// disk at 17 ms at the 99th percentile, and paced at 100 MiB/s at 1.4 ms
// (BenchmarkFsyncDuringSnapshotWrite). rate <= 0: no pacing.
type pacer struct {
	rate  int64
	start time.Time
	done  int64
}

func newPacer(rate int64) pacer { return pacer{rate: rate, start: time.Now()} }

// wrote counts n more bytes written and sleeps until they are due.
func (p *pacer) wrote(n int) {
	if p.rate <= 0 || n <= 0 {
		return
	}
	p.done += int64(n)
	due := p.start.Add(time.Duration(float64(p.done) / float64(p.rate) * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
}

// writeBack starts (on Linux) the kernel's writeback of the bytes a large write just
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
