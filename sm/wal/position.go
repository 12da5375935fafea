package wal

import (
	"encoding/binary"
	"hash/crc32"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/xce-hpc/xce/schema"
)

// The field numbers the stream readers pick out of an encoding, taken from
// the generated descriptors so that they cannot drift from the schema.
var (
	recLSNField      = fieldNumber(&schema.WalRecord{}, "lsn")
	recTermField     = fieldNumber(&schema.WalRecord{}, "term")
	snapLSNField     = fieldNumber(&schema.Snapshot{}, "lsn")
	snapTermFld      = fieldNumber(&schema.Snapshot{}, "term")
	snapNextIDField  = fieldNumber(&schema.Snapshot{}, "next_id")
	snapNextSeqField = fieldNumber(&schema.Snapshot{}, "next_seq")
	snapJobsField    = fieldNumber(&schema.Snapshot{}, "jobs")
	snapSchedField   = fieldNumber(&schema.Snapshot{}, "schedules")
	snapKeysField    = fieldNumber(&schema.Snapshot{}, "keys")
)

func fieldNumber(m interface {
	ProtoReflect() protoreflect.Message
}, name protoreflect.Name) protowire.Number {
	return m.ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// eachField walks the top-level fields of one encoded message, calling fn
// with each field's number, wire type and value (exactly the value's
// bytes, a length-delimited one with its length prefix), without parsing
// inside any value: a nested message, or a snapshot's million jobs, is one
// length to jump over. It fails where the top level's wire format is
// broken.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, value []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return protowire.ParseError(n)
		}
		if err := fn(num, typ, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// recordPosition reads a WalRecord payload's LSN and term only. Like
// proto.Unmarshal it keeps a field's last occurrence and ignores one of
// the wrong wire type (an unknown field). A record of varint and
// length-delimited fields only (every record a writer makes) is read
// with the record decoder's field reader; any other is left to
// eachField, which also names the error.
func recordPosition(p []byte) (lsn, term uint64, err error) {
	for b := p; len(b) > 0; {
		num, typ, v, _, n, ok := field(b)
		if !ok {
			return recordPositionSlow(p)
		}
		b = b[n:]
		if typ == protowire.VarintType {
			switch num {
			case recLSNField:
				lsn = v
			case recTermField:
				term = v
			}
		}
	}
	return lsn, term, nil
}

// recordPositionSlow is recordPosition of any payload.
func recordPositionSlow(p []byte) (lsn, term uint64, err error) {
	err = eachField(p, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case typ != protowire.VarintType:
		case num == recLSNField:
			lsn, _ = protowire.ConsumeVarint(v)
		case num == recTermField:
			term, _ = protowire.ConsumeVarint(v)
		}
		return nil
	})
	return lsn, term, err
}

// snapshotPayload checks a snapshot file's header (magic, length: the file
// is exactly header + payload) and CRC32C, and returns its payload.
func snapshotPayload(data []byte) ([]byte, error) {
	p, err := snapshotFramed(data)
	if err != nil {
		return nil, err
	}
	if want, got := binary.LittleEndian.Uint32(data[8:]), Checksum(p); want != got {
		return nil, badSnap("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	return p, nil
}

// snapshotFramed is snapshotPayload without the CRC32C.
func snapshotFramed(data []byte) ([]byte, error) {
	if err := checkFrame(data, int64(len(data))); err != nil {
		return nil, err
	}
	return data[SnapshotHeaderSize:], nil
}

// checkFrame checks a snapshot file's header, its first bytes (at least
// SnapshotHeaderSize of them unless the file is shorter), against the
// file's size.
func checkFrame(head []byte, size int64) error {
	if size < SnapshotHeaderSize {
		return badSnap("%d bytes, shorter than the %d-byte header", size, SnapshotHeaderSize)
	}
	if string(head[:8]) != SnapshotMagic {
		return badSnap("magic %q, want %q", head[:8], SnapshotMagic)
	}
	n := binary.LittleEndian.Uint64(head[12:])
	if have := uint64(size - SnapshotHeaderSize); n != have {
		return badSnap("header says %d payload bytes, file has %d", n, have)
	}
	return nil
}

// SnapshotPosition checks a snapshot file as DecodeSnapshot does up to the
// CRC32C (header, length, checksum) and reads only its scalars (LSN,
// term, counters) and counts its jobs and schedules, jumping over them:
// the boot scan's view of a snapshot. A snapshot that verifies here yet
// fails DecodeSnapshot's checks of its contents can only come from a
// writer bug (damage fails the CRC); recovery, which decodes it, then
// falls back to an older one. Errors wrap ErrBadSnapshot.
func SnapshotPosition(data []byte) (SnapshotHead, error) {
	_, h, err := snapshotChecked(data)
	return h, err
}

// crcWindow is how far ahead of the head's walk snapshotChecked
// checksums the payload.
const crcWindow = 64 << 10

// snapshotChecked is snapshotPayload and snapshotHead in one pass: each
// window of the payload is checksummed just before the walk reads the
// fields in it, while it is in cache (a snapshot of hundreds of MB read
// twice came from memory twice: the walk's pass cost twice the CRC's).
// Its errors are theirs, in their order: the header's, the checksum's,
// then the walk's.
func snapshotChecked(data []byte) ([]byte, SnapshotHead, error) {
	p, err := snapshotFramed(data)
	if err != nil {
		return nil, SnapshotHead{}, err
	}
	var crc uint32
	done := 0
	ahead := func(end int) { // the walk is at end: checksum past it
		if end+crcWindow/2 > done && done < len(p) {
			n := min(len(p), end+crcWindow)
			crc = crc32.Update(crc, castagnoli, p[done:n])
			done = n
		}
	}
	ahead(0)
	h, herr := snapshotHead(p, ahead)
	crc = crc32.Update(crc, castagnoli, p[done:])
	if want := binary.LittleEndian.Uint32(data[8:]); want != crc {
		return nil, SnapshotHead{}, badSnap("checksum mismatch (stored %08x, computed %08x)", want, crc)
	}
	if herr != nil {
		return nil, SnapshotHead{}, herr
	}
	return p, h, nil
}

// snapshotHead is the pass over a snapshot payload's top level that finds
// its scalars and counts its jobs and schedules (proto's rules: the last
// occurrence wins, a field of the wrong wire type is an ignored unknown).
// ahead, if not nil, is told where the walk is (the offset in p past each
// field).
func snapshotHead(p []byte, ahead func(end int)) (SnapshotHead, error) {
	var h SnapshotHead
	err := eachField(p, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if ahead != nil {
			ahead(cap(p) - cap(v) + len(v)) // v is a slice of p
		}
		h.field(num, typ, v)
		return nil
	})
	if err != nil {
		return h, badSnap("payload does not decode: %v", err)
	}
	return h, nil
}

// field takes one top-level field of a snapshot payload into h.
func (h *SnapshotHead) field(num protowire.Number, typ protowire.Type, v []byte) {
	switch {
	case typ == protowire.BytesType && num == snapJobsField:
		h.Jobs++
	case typ == protowire.BytesType && num == snapSchedField:
		h.Schedules++
	case typ == protowire.BytesType && num == snapKeysField:
		h.Keys++
	case typ != protowire.VarintType:
	case num == snapLSNField:
		h.LSN, _ = protowire.ConsumeVarint(v)
	case num == snapTermFld:
		h.Term, _ = protowire.ConsumeVarint(v)
	case num == snapNextIDField:
		h.NextID, _ = protowire.ConsumeVarint(v)
	case num == snapNextSeqField:
		h.NextSeq, _ = protowire.ConsumeVarint(v)
	}
}
