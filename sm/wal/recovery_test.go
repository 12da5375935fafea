package wal

import (
	"errors"
	"slices"
	"testing"
)

func TestPlanRecovery(t *testing.T) {
	seg := SegmentName
	snap := SnapshotName
	for _, tc := range []struct {
		name  string
		snaps []string
		segs  []string
		plan  Plan
		gap   bool
	}{
		{name: "fresh", plan: Plan{FirstLSN: 1}},
		{name: "wal only", segs: []string{seg(1)}, plan: Plan{Segments: []string{seg(1)}, FirstLSN: 1}},
		{name: "wal only, several, unsorted + junk", segs: []string{seg(200), "x.tmp", seg(1), seg(90)},
			plan: Plan{Segments: []string{seg(1), seg(90), seg(200)}, FirstLSN: 1}},
		{name: "wal only, first segment missing", segs: []string{seg(90), seg(200)},
			plan: Plan{Segments: []string{seg(90), seg(200)}, FirstLSN: 1}, gap: true},
		{name: "snapshot only", snaps: []string{snap(50)}, plan: Plan{Snapshot: snap(50), SnapshotLSN: 50, FirstLSN: 51}},
		{name: "newest snapshot wins", snaps: []string{snap(50), snap(150), snap(100), snap(120) + ".tmp"},
			segs: []string{seg(1), seg(101), seg(151), seg(160)},
			plan: Plan{Snapshot: snap(150), SnapshotLSN: 150, Segments: []string{seg(151), seg(160)}, FirstLSN: 151}},
		{name: "segment starting right after the snapshot", snaps: []string{snap(100)}, segs: []string{seg(1), seg(101)},
			plan: Plan{Snapshot: snap(100), SnapshotLSN: 100, Segments: []string{seg(101)}, FirstLSN: 101}},
		{name: "snapshot mid-segment", snaps: []string{snap(100)}, segs: []string{seg(1), seg(60), seg(120)},
			plan: Plan{Snapshot: snap(100), SnapshotLSN: 100, Segments: []string{seg(60), seg(120)}, FirstLSN: 101}},
		{name: "snapshot past every segment start: the last one may continue it", snaps: []string{snap(500)},
			segs: []string{seg(1), seg(300)},
			plan: Plan{Snapshot: snap(500), SnapshotLSN: 500, Segments: []string{seg(300)}, FirstLSN: 501}},
		{name: "old segments removed after the snapshot", snaps: []string{snap(100)}, segs: []string{seg(101), seg(250)},
			plan: Plan{Snapshot: snap(100), SnapshotLSN: 100, Segments: []string{seg(101), seg(250)}, FirstLSN: 101}},
		{name: "gap after the snapshot", snaps: []string{snap(100)}, segs: []string{seg(150)},
			plan: Plan{Snapshot: snap(100), SnapshotLSN: 100, Segments: []string{seg(150)}, FirstLSN: 101}, gap: true},
		{name: "fallback to an older snapshot whose segments are gone", snaps: []string{snap(50)}, segs: []string{seg(101)},
			plan: Plan{Snapshot: snap(50), SnapshotLSN: 50, Segments: []string{seg(101)}, FirstLSN: 51}, gap: true},
		{name: "max lsn snapshot", snaps: []string{snap(1<<64 - 1)}, segs: []string{seg(5)},
			plan: Plan{Snapshot: snap(1<<64 - 1), SnapshotLSN: 1<<64 - 1, Segments: []string{seg(5)}, FirstLSN: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanRecovery(tc.snaps, tc.segs)
			if tc.gap != errors.Is(err, ErrGap) || !tc.gap && err != nil {
				t.Fatalf("err %v, gap %v", err, tc.gap)
			}
			if p.Snapshot != tc.plan.Snapshot || p.SnapshotLSN != tc.plan.SnapshotLSN || p.FirstLSN != tc.plan.FirstLSN ||
				!slices.Equal(p.Segments, tc.plan.Segments) && len(p.Segments)+len(tc.plan.Segments) > 0 {
				t.Fatalf("plan %+v\nwant %+v", p, tc.plan)
			}
		})
	}
}

func TestObsolete(t *testing.T) {
	seg := SegmentName
	segs := []string{seg(300), seg(1), seg(101), seg(201), "junk"}
	for _, tc := range []struct {
		lsn  uint64
		want []string
	}{
		{0, nil},
		{99, nil},
		{100, []string{seg(1)}},
		{150, []string{seg(1)}},
		{200, []string{seg(1), seg(101)}},
		{299, []string{seg(1), seg(101), seg(201)}},
		{1000, []string{seg(1), seg(101), seg(201)}}, // never the last
		{1<<64 - 1, []string{seg(1), seg(101), seg(201)}},
	} {
		if got := Obsolete(segs, tc.lsn); !slices.Equal(got, tc.want) {
			t.Errorf("Obsolete(%d) = %v, want %v", tc.lsn, got, tc.want)
		}
		// What remains is exactly what a recovery from that snapshot plans.
		p, err := PlanRecovery([]string{SnapshotName(tc.lsn)}, segs)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Segments)+len(tc.want) != 4 {
			t.Errorf("lsn %d: plan keeps %v, obsolete %v", tc.lsn, p.Segments, tc.want)
		}
	}
	if got := Obsolete(nil, 10); got != nil {
		t.Fatal(got)
	}
}

func TestObsoleteSnapshots(t *testing.T) {
	snaps := []string{SnapshotName(30), SnapshotName(10), "x", SnapshotName(20)}
	for _, tc := range []struct {
		keep int
		want []string
	}{
		{0, []string{SnapshotName(10), SnapshotName(20)}},
		{1, []string{SnapshotName(10), SnapshotName(20)}},
		{2, []string{SnapshotName(10)}},
		{3, nil},
		{9, nil},
	} {
		if got := ObsoleteSnapshots(snaps, tc.keep); !slices.Equal(got, tc.want) {
			t.Errorf("keep %d: %v, want %v", tc.keep, got, tc.want)
		}
	}
}
