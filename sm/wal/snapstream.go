package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// streamWindow is how much of a snapshot file ReadSnapshotAt holds at a
// time (more only for a field longer than that).
const streamWindow = 1 << 20

// ErrSnapshotRead is wrapped by ReadSnapshotAt's errors that come from
// reading the file, not from its contents.
var ErrSnapshotRead = errors.New("wal: cannot read the snapshot")

// ReadSnapshotAt is ReadSnapshot of a file of size bytes read through r a
// window at a time, never whole: a received snapshot is hundreds of MB at
// a million jobs, and a fresh buffer that size cost its reader a second
// of page faults. The same checks in the same order, with the same
// errors; the file is read twice (the scalars first, as ReadSnapshot's
// first pass finds them, then the jobs), and a second pass whose bytes'
// CRC32C is not the first's fails as a changed file. Errors reading r
// wrap ErrSnapshotRead. Nothing a visitor receives outlives its call
// (the window is reused, and a job's payload is a slice of it): keep
// scalars and copies only.
func ReadSnapshotAt(r io.ReaderAt, size int64, v SnapshotVisitor) error {
	return readSnapshotAt(r, size, streamWindow, v)
}

// readSnapshotAt is ReadSnapshotAt with a window of window bytes.
func readSnapshotAt(r io.ReaderAt, size int64, window int, v SnapshotVisitor) error {
	var head [SnapshotHeaderSize]byte
	if size >= SnapshotHeaderSize {
		if _, err := r.ReadAt(head[:], 0); err != nil {
			return fmt.Errorf("%w: header: %w", ErrSnapshotRead, err)
		}
	}
	if err := checkFrame(head[:], size); err != nil {
		return err
	}
	first := fileFields{r: r, n: size - SnapshotHeaderSize, window: window}
	herr := first.each(first.head)
	if errors.Is(herr, ErrSnapshotRead) {
		return herr
	}
	if want := binary.LittleEndian.Uint32(head[8:]); want != first.crc {
		return badSnap("checksum mismatch (stored %08x, computed %08x)", want, first.crc)
	}
	if herr != nil {
		return badSnap("payload does not decode: %v", herr)
	}
	again := fileFields{r: r, n: first.n, window: window}
	err := readFieldsWith(again.each, first.h, v, true) // nothing outlives a visit
	if err == nil && again.crc != first.crc {
		return badSnap("the file changed while it was read (checksum %08x, then %08x)", first.crc, again.crc)
	}
	return err
}

// fileFields walks a snapshot file's payload (the n bytes after its
// header) a window at a time, and checksums every byte it reads; its
// first pass also finds the payload's scalars (h).
type fileFields struct {
	r      io.ReaderAt
	n      int64
	window int
	crc    uint32
	h      SnapshotHead
}

// each is eachFieldFrom over the payload, from its start.
func (f *fileFields) each(fn fieldFunc) error {
	return eachFieldFrom(io.NewSectionReader(f.r, SnapshotHeaderSize, f.n), f.n, f.window, f.sum, fn)
}

func (f *fileFields) sum(b []byte) { f.crc = crc32.Update(f.crc, castagnoli, b) }

// head takes one top-level field into h (the first pass).
func (f *fileFields) head(num protowire.Number, typ protowire.Type, v []byte) error {
	f.h.field(num, typ, v)
	return nil
}

// eachFieldFrom is eachField over the n bytes r yields, read window
// bytes at a time: fn sees each top-level field's value as eachField would, valid
// until it returns. read, if not nil, sees every byte read, in order,
// all n of them even when the walk stops early (the walk's error is
// returned once they are read). Errors reading r wrap ErrSnapshotRead.
func eachFieldFrom(r io.Reader, n int64, window int, read func([]byte), fn fieldFunc) error {
	buf := make([]byte, 0, min(n, int64(window)))
	off := 0       // the walk's position in buf
	left := n      // bytes not yet read
	var werr error // the walk's error: from then on the bytes are only read
	for {
		for werr == nil && off < len(buf) {
			b := buf[off:]
			num, typ, tn := protowire.ConsumeTag(b)
			vn := 0
			if tn >= 0 {
				vn = protowire.ConsumeFieldValue(num, typ, b[tn:])
			}
			if code := min(tn, vn); code < 0 {
				if left > 0 && errors.Is(protowire.ParseError(code), io.ErrUnexpectedEOF) {
					break // the field goes on in the bytes still to read
				}
				werr = protowire.ParseError(code)
				break
			}
			if err := fn(num, typ, b[tn:tn+vn]); err != nil {
				werr = err
				break
			}
			off += tn + vn
		}
		if left == 0 {
			return werr
		}
		if werr != nil || off == len(buf) {
			buf, off = buf[:0], 0
		}
		// The rest of a field the window cut, moved to the front; a field
		// longer than the window grows it.
		k := copy(buf[:cap(buf)], buf[off:])
		buf, off = buf[:k], 0
		if k == cap(buf) {
			grown := make([]byte, k, min(int64(max(2*cap(buf), 1)), int64(k)+left))
			copy(grown, buf)
			buf = grown
		}
		m := int(min(int64(cap(buf)-k), left))
		got, err := io.ReadFull(r, buf[k:k+m])
		if read != nil {
			read(buf[k : k+got])
		}
		buf, left = buf[:k+got], left-int64(got)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrSnapshotRead, err)
		}
	}
}
