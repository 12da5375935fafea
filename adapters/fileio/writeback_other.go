//go:build !linux

package fileio

import "os"

// writeBack: off Linux a write is a plain write (no sync_file_range).
func writeBack(f *os.File, _ int64, data []byte) (int, error) { return f.Write(data) }

// backWriter: off Linux, the file itself.
type backWriter struct{ *os.File }

func newBackWriter(f *os.File, _ int64) backWriter { return backWriter{f} }
