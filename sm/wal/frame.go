// Package wal is the pure part of xce's write-ahead log: record framing,
// segment scanning with torn-tail detection, segment and snapshot names,
// snapshot encoding, the recovery plan and a group-commit batcher.
//
// It does no I/O. It works on byte slices and names; the node issues the
// file effects (write, fsync, rename, list, remove) and feeds the results
// back (DESIGN.md §3.1).
//
// # Frame format
//
// A segment is a sequence of frames. Each frame is
//
//	[4] payload length, little-endian, 1..MaxRecordSize
//	[4] CRC32C (Castagnoli) of the payload, little-endian
//	[n] payload: one protobuf schema.WalRecord, LSN >= 1
//
// LSNs strictly increase within a segment.
package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
)

const (
	// HeaderSize is the size of a frame header: length + CRC32C.
	HeaderSize = 8
	// MaxRecordSize bounds a frame's payload (1 MiB + 64 KiB): enforced
	// by AppendFrame and by Scan, so that a bogus length never makes a
	// reader wait for or allocate a huge record.
	MaxRecordSize = 1<<20 + 64<<10
)

var (
	// ErrCorrupt is wrapped by every *CorruptError.
	ErrCorrupt = errors.New("wal: corrupt segment")
	// ErrRecordTooBig: a record's encoding exceeds MaxRecordSize.
	ErrRecordTooBig = errors.New("wal: record too big")
	// ErrBadRecord: a record AppendFrame refuses to write (nil, LSN 0).
	ErrBadRecord = errors.New("wal: bad record")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC32C of b, as used in frames and snapshots.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// CorruptError reports corruption before the tail of a segment: the frame
// at Offset is bad, yet a valid frame follows it at ValidAt (so this is not
// a torn write), or a frame whose checksum verifies is unusable (does not
// decode, or its LSN does not increase). ValidAt is -1 when the frame at
// Offset itself verified. Truncating at Offset (an explicit repair) drops
// every record from Offset on.
type CorruptError struct {
	Offset  int
	Reason  string
	ValidAt int
}

func (e *CorruptError) Error() string {
	s := fmt.Sprintf("wal: corrupt record at offset %d: %s", e.Offset, e.Reason)
	if e.ValidAt >= 0 {
		s += fmt.Sprintf(" (a valid record follows at offset %d)", e.ValidAt)
	}
	return s
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

var marshalOpts = proto.MarshalOptions{Deterministic: true}

// sizedOpts marshals a message whose size marshalOpts.Size has just
// computed, unchanged since: the marshal reuses that size instead of
// walking the message for it again.
var sizedOpts = proto.MarshalOptions{Deterministic: true, UseCachedSize: true}

// AppendFrame appends the frame of rec to dst. It refuses a nil record, LSN
// 0 and a payload over MaxRecordSize; dst is returned unchanged on error.
func AppendFrame(dst []byte, rec *schema.WalRecord) ([]byte, error) {
	if rec == nil {
		return dst, fmt.Errorf("%w: nil record", ErrBadRecord)
	}
	if rec.GetLsn() == 0 {
		return dst, fmt.Errorf("%w: LSN 0", ErrBadRecord)
	}
	size := marshalOpts.Size(rec)
	if size > MaxRecordSize {
		return dst, fmt.Errorf("%w: %d bytes > %d", ErrRecordTooBig, size, MaxRecordSize)
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	out, err := sizedOpts.MarshalAppend(dst, rec)
	if err != nil {
		return dst[:start], fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	payload := out[start+HeaderSize:]
	if len(payload) == 0 || len(payload) > MaxRecordSize {
		// Cannot happen for LSN >= 1 and the size check above; kept so
		// the writer can never emit a frame the reader refuses.
		return out[:start], fmt.Errorf("%w: payload of %d bytes", ErrRecordTooBig, len(payload))
	}
	binary.LittleEndian.PutUint32(out[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(out[start+4:], Checksum(payload))
	return out, nil
}

// DecodeRecord decodes one frame payload (as streamed to a standby or
// read from a segment): at most MaxRecordSize bytes, a WalRecord with LSN
// >= 1. Errors wrap ErrBadRecord or ErrRecordTooBig.
func DecodeRecord(payload []byte) (*schema.WalRecord, error) {
	if len(payload) > MaxRecordSize {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrRecordTooBig, len(payload), MaxRecordSize)
	}
	rec := new(schema.WalRecord)
	if err := proto.Unmarshal(payload, rec); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	if rec.GetLsn() == 0 {
		return nil, fmt.Errorf("%w: LSN 0", ErrBadRecord)
	}
	return rec, nil
}

// frameAt checks the frame header at off: the length is in range, the
// payload fits in data and its CRC verifies. It returns the payload.
func frameAt(data []byte, off int) (payload []byte, reason string) {
	return frameAtChecked(data, off, 0)
}

// frameAtChecked is frameAt that trusts the CRC of a frame ending at or
// before checked (verified before on these bytes).
func frameAtChecked(data []byte, off, checked int) (payload []byte, reason string) {
	if len(data)-off < HeaderSize {
		return nil, fmt.Sprintf("truncated header (%d of %d bytes)", len(data)-off, HeaderSize)
	}
	n := binary.LittleEndian.Uint32(data[off:])
	if n == 0 {
		return nil, "zero length"
	}
	if n > MaxRecordSize {
		return nil, fmt.Sprintf("length %d exceeds the maximum %d", n, MaxRecordSize)
	}
	end := off + HeaderSize + int(n)
	if end > len(data) {
		return nil, fmt.Sprintf("truncated payload (length %d, %d bytes left)", n, len(data)-off-HeaderSize)
	}
	p := data[off+HeaderSize : end]
	if end <= checked {
		return p, ""
	}
	if want, got := binary.LittleEndian.Uint32(data[off+4:]), Checksum(p); want != got {
		return nil, fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	return p, ""
}

// Walk decodes the frames of one segment in order and calls fn with each
// record and the offset of its frame (for the WARN lines of seed 002 §6.5).
// rec is reused, and its bytes fields (payloads) alias data: fn must not
// keep it or any slice in it (proto.Clone it if needed). Each record is
// what proto.Unmarshal gives, decoded by hand for the hot operations
// (recordDecoder). An error
// from fn stops the walk and is returned as is, with validLen = the offset
// of the record fn refused.
//
// The end of the segment is classified as Scan documents: a torn or zeroed
// tail ends the walk with err nil and validLen where the tail starts;
// corruption before the tail returns a *CorruptError — after fn has seen
// the records before it, so a caller applying records must discard its
// state on error.
func Walk(data []byte, fn func(offset int, rec *schema.WalRecord) error) (validLen int, err error) {
	return walk(data, 0, false, fn)
}

// WalkChecked is Walk of data whose frames up to offset checked have
// passed their CRC32C check before, on these same bytes: a WalkPositions
// of data that returned a valid length of at least checked (the boot scan,
// which hands the files it read to recovery). It does not compute the
// checksum of a frame that ends at or before checked again; everything
// else — each frame's length, the decode of every record, the LSN order,
// the tail's classification — is Walk's, and so is the result
// (TestPropWalkCheckedIsWalk).
func WalkChecked(data []byte, checked int, fn func(offset int, rec *schema.WalRecord) error) (validLen int, err error) {
	return walk(data, checked, false, fn)
}

// Walker is Walk with one hand decoder for every walk: a reader walking
// many segments (or the new tail of one segment, again and again) does
// not allocate and clear a decoder each time. Its walks are Walk's, with
// the same results (a decoder keeps nothing between records that changes
// what a record decodes to). The zero Walker is ready; it is not safe for
// concurrent use.
type Walker struct {
	d recordDecoder
}

// Walk is Walk(data, fn) with w's decoder: rec is reused, by this walk
// and by the next one.
func (w *Walker) Walk(data []byte, fn func(offset int, rec *schema.WalRecord) error) (validLen int, err error) {
	return walkWith(data, 0, &w.d, fn)
}

// walk is Walk (WalkChecked); fresh gives fn a new record per frame
// (proto.Unmarshal's, sharing nothing) instead of reusing the hand
// decoder's.
func walk(data []byte, checked int, fresh bool, fn func(offset int, rec *schema.WalRecord) error) (validLen int, err error) {
	var d *recordDecoder
	if !fresh {
		d = new(recordDecoder)
	}
	return walkWith(data, checked, d, fn)
}

// walkWith is walk with decoder d (nil: fresh records).
func walkWith(data []byte, checked int, d *recordDecoder, fn func(offset int, rec *schema.WalRecord) error) (validLen int, err error) {
	var rec *schema.WalRecord
	return walkFrames(data, checked, func(off int, p []byte) (uint64, error) {
		if d != nil {
			var err error
			rec, err = d.decode(p)
			return rec.GetLsn(), err
		}
		rec = new(schema.WalRecord)
		if err := proto.Unmarshal(p, rec); err != nil {
			return 0, err
		}
		return rec.GetLsn(), nil
	}, func(off int) error { return fn(off, rec) })
}

// WalkPositions walks the frames of one segment as Walk does — the same
// frame checks (length, CRC32C), the same LSN order and the same
// classification of the tail — but reads only each record's LSN and term
// from the payload, skipping the rest of it unparsed. It is how the boot
// scan learns the log's position without decoding every record (recovery
// decodes them, once).
//
// What it cannot see is a payload whose CRC verifies and whose top-level
// fields parse but whose operation does not decode: only a writer bug makes
// one (a torn write, garbage or a flipped bit fails the CRC), and Walk
// reports it, at the same offset, as corruption.
func WalkPositions(data []byte, fn func(offset int, lsn, term uint64) error) (validLen int, err error) {
	var lsn, term uint64
	return walkFrames(data, 0, func(_ int, p []byte) (uint64, error) {
		var err error
		lsn, term, err = recordPosition(p)
		return lsn, err
	}, func(off int) error { return fn(off, lsn, term) })
}

// walkFrames is the one frame walker under Walk and WalkPositions: each
// frame's length and CRC (not the CRC of a frame ending at or before
// checked: see WalkChecked), the decode of its payload (decode returns the
// record's LSN), strictly increasing LSNs, and the tail's classification
// (see Scan). fn runs after each frame that passes.
func walkFrames(data []byte, checked int, decode func(off int, payload []byte) (uint64, error), fn func(off int) error) (validLen int, err error) {
	var (
		last uint64 // LSN of the previous record, 0 before the first
		off  int
	)
	for off < len(data) {
		p, reason := frameAtChecked(data, off, checked)
		if p == nil {
			if at := findValidFrame(data, off+1, last); at >= 0 && !zeroSector(data, off, at) {
				return off, &CorruptError{Offset: off, Reason: reason, ValidAt: at}
			}
			return off, nil // torn, zeroed or garbage tail, or a hole before later unsynced data
		}
		lsn, err := decode(off, p)
		if err != nil {
			return off, &CorruptError{Offset: off, Reason: "checksum verifies but the record does not decode: " + err.Error(), ValidAt: -1}
		}
		if lsn <= last {
			return off, &CorruptError{Offset: off, Reason: fmt.Sprintf("LSN %d does not increase (previous %d)", lsn, last), ValidAt: -1}
		}
		last = lsn
		if err := fn(off); err != nil {
			return off, err
		}
		off += HeaderSize + len(p)
	}
	return off, nil
}

// SectorSize is the unit a crash loses an unsynced append in.
const SectorSize = 512

// zeroSector reports whether data[from:to] contains a whole all-zero
// sector (SectorSize-aligned in the file): a hole an unsynced append left
// when a later sector reached the disk before it. A bit flip cannot make
// one, so a bad frame with such a hole before the next valid frame is a
// torn tail, not corruption.
func zeroSector(data []byte, from, to int) bool {
	for s := (from + SectorSize - 1) / SectorSize * SectorSize; s+SectorSize <= to; s += SectorSize {
		zero := true
		for _, b := range data[s : s+SectorSize] {
			if b != 0 {
				zero = false
				break
			}
		}
		if zero {
			return true
		}
	}
	return false
}

// findValidFrame returns the first offset >= from holding a frame that
// verifies (length, CRC), decodes and carries an LSN above last, or -1.
func findValidFrame(data []byte, from int, last uint64) int {
	var rec schema.WalRecord
	for at := from; at+HeaderSize < len(data); at++ {
		n := binary.LittleEndian.Uint32(data[at:])
		if n == 0 || n > MaxRecordSize || uint64(n) > uint64(len(data)-at-HeaderSize) {
			continue // cheap rejection before the CRC
		}
		p, _ := frameAt(data, at)
		if p == nil {
			continue
		}
		if proto.Unmarshal(p, &rec) == nil && rec.GetLsn() > last {
			return at
		}
	}
	return -1
}

// Scan decodes the frames of one segment in order.
//
//   - Every frame verifies: recs holds them all, validLen = len(data).
//   - A torn, zeroed or garbage tail — from the first bad frame on, the
//     bytes hold no further valid frame, or the next valid frame comes
//     after a whole zeroed sector (a hole: an unsynced append whose later
//     sectors reached the disk before that one) — ends the scan: recs is
//     the good prefix, validLen the offset where the tail starts, err nil.
//     The caller truncates the segment there. Garbage never verifies as a
//     record: every frame's CRC32C is checked.
//   - Corruption before the tail — a bad frame followed later by a valid
//     one with no zeroed sector between them (a frame whose length and CRC verify, that decodes and whose LSN
//     exceeds the last good one), a frame that verifies but does not
//     decode, or an LSN that does not increase — returns the good prefix,
//     validLen = the bad frame's offset and a *CorruptError (wrapping
//     ErrCorrupt).
//
// Scan never panics, never reads past data and never allocates by a
// frame's claimed length. Records are returned fresh (not shared).
func Scan(data []byte) (recs []*schema.WalRecord, validLen int, err error) {
	validLen, err = walk(data, 0, true, func(_ int, rec *schema.WalRecord) error {
		recs = append(recs, rec)
		return nil
	})
	return recs, validLen, err
}
