package wal

import (
	"fmt"
	"slices"
	"strconv"
)

const (
	// WALDir holds the segments, relative to the node's base directory.
	WALDir = "data/wal"
	// SnapDir holds the snapshots, relative to the node's base directory.
	SnapDir = "data/snap"

	segmentExt  = ".wal"
	snapshotExt = ".snap"
	// TempExt is appended to a snapshot's name while it is written; the
	// node renames it into place after the fsync (crash-safe snapshot).
	// Parsers reject temp names, so leftovers are never loaded.
	TempExt = ".tmp"
	hexLen  = 16
)

// SegmentName is the file name of the segment whose first record has LSN
// firstLSN: 16 lowercase hex digits + ".wal". Names sort by LSN.
func SegmentName(firstLSN uint64) string { return fmt.Sprintf("%016x%s", firstLSN, segmentExt) }

// SegmentPath is WALDir/SegmentName(firstLSN).
func SegmentPath(firstLSN uint64) string { return WALDir + "/" + SegmentName(firstLSN) }

// ParseSegmentName returns the first LSN named by a segment file name, or
// ok false for any other name (exactly 16 lowercase hex digits + ".wal").
func ParseSegmentName(name string) (firstLSN uint64, ok bool) {
	return parseName(name, segmentExt)
}

// SnapshotName is the file name of the snapshot taken at lsn: 16 lowercase
// hex digits + ".snap".
func SnapshotName(lsn uint64) string { return fmt.Sprintf("%016x%s", lsn, snapshotExt) }

// SnapshotPath is SnapDir/SnapshotName(lsn).
func SnapshotPath(lsn uint64) string { return SnapDir + "/" + SnapshotName(lsn) }

// SnapshotTempName is the name a snapshot is written under before the
// rename into SnapshotName(lsn).
func SnapshotTempName(lsn uint64) string { return SnapshotName(lsn) + TempExt }

// ReceivedSnapshotTempName is the name a snapshot received from the
// primary is written under before its rename into SnapshotName(lsn): not
// SnapshotTempName's, so a standby's own checkpoint at the same LSN, which
// may still be writing its temporary file, never shares a file with it.
func ReceivedSnapshotTempName(lsn uint64) string {
	return fmt.Sprintf("%016x.recv%s", lsn, snapshotExt) + TempExt
}

// ParseSnapshotName returns the LSN named by a snapshot file name, or ok
// false for any other name (temp files included).
func ParseSnapshotName(name string) (lsn uint64, ok bool) { return parseName(name, snapshotExt) }

func parseName(name, ext string) (uint64, bool) {
	if len(name) != hexLen+len(ext) || name[hexLen:] != ext {
		return 0, false
	}
	for i := 0; i < hexLen; i++ {
		if c := name[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(name[:hexLen], 16, 64)
	return v, err == nil
}

// named is a parsed file name.
type named struct {
	name string
	lsn  uint64
}

// parseAll keeps the names parse accepts, sorted by LSN ascending.
func parseAll(names []string, parse func(string) (uint64, bool)) []named {
	var out []named
	for _, n := range names {
		if lsn, ok := parse(n); ok {
			out = append(out, named{n, lsn})
		}
	}
	slices.SortFunc(out, func(a, b named) int {
		switch {
		case a.lsn < b.lsn:
			return -1
		case a.lsn > b.lsn:
			return 1
		}
		return 0
	})
	// One LSN has one name (the parsers are strict), so duplicates are
	// the same file listed twice.
	return slices.CompactFunc(out, func(a, b named) bool { return a.lsn == b.lsn })
}

func namesOf(ns []named) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.name
	}
	return out
}

// SortSegments returns the valid segment names among names, by first LSN
// ascending, without duplicates; other names are dropped.
func SortSegments(names []string) []string { return namesOf(parseAll(names, ParseSegmentName)) }

// SortSnapshots returns the valid snapshot names among names, by LSN
// ascending, without duplicates; other names are dropped.
func SortSnapshots(names []string) []string { return namesOf(parseAll(names, ParseSnapshotName)) }
