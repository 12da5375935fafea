package wal

import (
	"slices"
	"testing"
)

func TestNames(t *testing.T) {
	if got := SegmentName(0x1a2b); got != "0000000000001a2b.wal" {
		t.Fatal(got)
	}
	if got := SegmentPath(1); got != "data/wal/0000000000000001.wal" {
		t.Fatal(got)
	}
	if got := SnapshotName(255); got != "00000000000000ff.snap" {
		t.Fatal(got)
	}
	if got := SnapshotPath(255); got != "data/snap/00000000000000ff.snap" {
		t.Fatal(got)
	}
	if got := SnapshotTempName(255); got != "00000000000000ff.snap.tmp" {
		t.Fatal(got)
	}
	// A received snapshot and a checkpoint at one LSN never share a file,
	// and neither temporary name passes for a snapshot.
	if got := ReceivedSnapshotTempName(255); got != "00000000000000ff.recv.snap.tmp" || got == SnapshotTempName(255) {
		t.Fatal(got)
	}
	if _, ok := ParseSnapshotName(ReceivedSnapshotTempName(255)); ok {
		t.Fatal("a received snapshot's temporary name parses as a snapshot")
	}
	for _, lsn := range []uint64{0, 1, 0xdeadbeef, 1<<64 - 1} {
		if v, ok := ParseSegmentName(SegmentName(lsn)); !ok || v != lsn {
			t.Fatalf("segment %d: %d %v", lsn, v, ok)
		}
		if v, ok := ParseSnapshotName(SnapshotName(lsn)); !ok || v != lsn {
			t.Fatalf("snapshot %d: %d %v", lsn, v, ok)
		}
	}
	for _, bad := range []string{
		"", ".wal", "1.wal", "000000000000001A.wal", "000000000000001g.wal", "00000000000000001.wal",
		"0000000000000001.wal.tmp", "0000000000000001.snap", "+000000000000001.wal", "0000000000000001.WAL",
	} {
		if _, ok := ParseSegmentName(bad); ok {
			t.Errorf("ParseSegmentName(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"0000000000000001.snap.tmp", "0000000000000001.wal", "x000000000000001.snap"} {
		if _, ok := ParseSnapshotName(bad); ok {
			t.Errorf("ParseSnapshotName(%q) accepted", bad)
		}
	}
}

func TestSortNames(t *testing.T) {
	in := []string{SegmentName(300), "junk", SegmentName(2), SnapshotName(5), SegmentName(10), SegmentName(2)}
	want := []string{SegmentName(2), SegmentName(10), SegmentName(300)}
	if got := SortSegments(in); !slices.Equal(got, want) {
		t.Fatalf("SortSegments = %v", got)
	}
	if got := SortSnapshots(in); !slices.Equal(got, []string{SnapshotName(5)}) {
		t.Fatalf("SortSnapshots = %v", got)
	}
}
