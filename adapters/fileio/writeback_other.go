//go:build !linux

package fileio

import "os"

// backWriter: off Linux, a plain write (no sync_file_range), paced as on
// Linux.
type backWriter struct {
	f    *os.File
	pace pacer
}

func newBackWriter(f *os.File, _ int64, rate int64) *backWriter {
	return &backWriter{f: f, pace: newPacer(rate)}
}

// at: off Linux the writes follow the file's offset; the next Write is
// paced on its own.
func (w *backWriter) at(int64) { w.pace = newPacer(w.pace.rate) }

func (w *backWriter) Write(data []byte) (int, error) {
	n := 0
	for n < len(data) {
		end := min(n+writeBackPiece, len(data))
		k, err := w.f.Write(data[n:end])
		n += k
		w.pace.wrote(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
