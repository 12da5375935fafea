package fileio

import "time"

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
