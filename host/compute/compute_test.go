package compute_test

import (
	"strings"
	"testing"

	"github.com/xce-hpc/xce/host/compute"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// Exec never panics on a malformed Compute: one without what its kind
// works on, or of no known kind, fails with IOFailed and says why; a
// checkpoint's file is written only where fileop's path rules allow.
func TestExecRefusesMalformed(t *testing.T) {
	fs := simdisk.New()
	for _, tc := range []struct {
		c    sm.Compute
		want string
	}{
		{sm.Compute{Kind: sm.ComputeEncode}, "encode without a snapshot"},
		{sm.Compute{Kind: sm.ComputeEncodeTo, Path: "data/snap/x.tmp"}, "encode-to without a snapshot"},
		{sm.Compute{Kind: sm.ComputeImport, Data: []byte("x")}, "import without a snapshot load"},
		{sm.Compute{Kind: sm.ComputeVerify, Data: []byte("x")}, "verify without a snapshot check"},
		{sm.Compute{Kind: sm.ComputeBuild}, "build without a snapshot"},
		{sm.Compute{Kind: 99}, "unknown compute"},
		{sm.Compute{Kind: sm.ComputeEncodeTo, Path: "../x", Snapshot: &sm.SnapshotData{}}, "path refused"},
		{sm.Compute{Kind: sm.ComputeEncodeTo, Path: "", Snapshot: &sm.SnapshotData{}}, "path refused"},
	} {
		c := tc.c
		c.ID = 7
		got := fs.Compute(c, 0)
		if got.ID != 7 || got.Err != sm.IOFailed || !strings.Contains(got.Detail, tc.want) {
			t.Errorf("%s %q: %+v, want IOFailed naming %q", tc.c.Kind, tc.c.Path, got, tc.want)
		}
	}
	if got := compute.Exec(nil, sm.Compute{Kind: sm.ComputeEncodeTo, Path: "s.tmp", Snapshot: &sm.SnapshotData{}}); got.Err != sm.IOFailed {
		t.Errorf("encode-to without a file system: %+v", got)
	}
}

// ComputeVerify completes IOOK for the snapshot the check describes and
// IOCorrupt, naming the file and the reason, for any other.
func TestExecVerify(t *testing.T) {
	data, err := wal.EncodeSnapshot(&schema.Snapshot{Lsn: 7, Term: 3, NextId: 1, NextSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	ok := compute.Exec(nil, sm.Compute{ID: 1, Kind: sm.ComputeVerify, Path: "data/snap/7.tmp", Data: data, Check: &sm.SnapshotCheck{LSN: 7, Term: 3}})
	if ok.Err != sm.IOOK || ok.ID != 1 || ok.Data != nil {
		t.Fatalf("the announced snapshot: %+v", ok)
	}
	bad := compute.Exec(nil, sm.Compute{ID: 2, Kind: sm.ComputeVerify, Path: "data/snap/7.tmp", Data: data, Check: &sm.SnapshotCheck{LSN: 8, Term: 3}})
	if bad.Err != sm.IOCorrupt || !strings.Contains(bad.Detail, "data/snap/7.tmp") || !strings.Contains(bad.Detail, "lsn 8") {
		t.Fatalf("another position: %+v", bad)
	}
}
