package compute_test

import (
	"strings"
	"testing"

	"github.com/xce-hpc/xce/adapters/fileio"
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
		{sm.Compute{Kind: sm.ComputeVerify, Path: "data/snap/x.tmp"}, "verify without a snapshot check"},
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

// ComputeVerify reads its file and completes IOOK for the snapshot the
// check describes, IOCorrupt naming the file and the reason for any
// other, and the read's class when the file cannot be read: alike on the
// simulator's disk (which reads it whole) and on the daemon's executor
// (which streams it a window at a time).
func TestExecVerify(t *testing.T) {
	data, err := wal.EncodeSnapshot(&schema.Snapshot{Lsn: 7, Term: 3, NextId: 2, NextSeq: 1,
		Jobs: []*schema.SnapshotJob{{Id: 1, Queue: "q", QueueId: 1, Payload: []byte("payload"), Stamps: &schema.WalStamps{}}}})
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)-3] ^= 0x10
	disk := simdisk.New()
	dir := t.TempDir()
	real := &fileio.Executor{Base: dir}
	for _, op := range []sm.FileOp{
		{Op: sm.OpMkdir, Path: "data"}, {Op: sm.OpMkdir, Path: "data/snap"},
		{Op: sm.OpWrite, Path: "data/snap/7.tmp", Data: data}, {Op: sm.OpWrite, Path: "data/snap/bad.tmp", Data: flipped},
	} {
		if d := disk.Exec(op, 0); d.Err != sm.IOOK {
			t.Fatalf("simdisk %s %s: %+v", op.Op, op.Path, d)
		}
		if d := real.Exec(op); d.Err != sm.IOOK {
			t.Fatalf("fileio %s %s: %+v", op.Op, op.Path, d)
		}
	}
	for _, tc := range []struct {
		name  string
		path  string
		check sm.SnapshotCheck
		max   int64
		want  sm.IOErr
		says  string
	}{
		{"the announced snapshot", "data/snap/7.tmp", sm.SnapshotCheck{LSN: 7, Term: 3}, 1 << 20, sm.IOOK, ""},
		{"another position", "data/snap/7.tmp", sm.SnapshotCheck{LSN: 8, Term: 3}, 1 << 20, sm.IOCorrupt, "lsn 8"},
		{"a flipped bit", "data/snap/bad.tmp", sm.SnapshotCheck{LSN: 7, Term: 3}, 1 << 20, sm.IOCorrupt, "checksum mismatch"},
		{"no such file", "data/snap/none.tmp", sm.SnapshotCheck{LSN: 7, Term: 3}, 1 << 20, sm.IONotExist, ""},
		{"too big", "data/snap/7.tmp", sm.SnapshotCheck{LSN: 7, Term: 3}, 10, sm.IOTooBig, ""},
		{"a directory", "data/snap", sm.SnapshotCheck{LSN: 7, Term: 3}, 1 << 20, sm.IOFailed, ""},
	} {
		c := sm.Compute{ID: 3, Kind: sm.ComputeVerify, Path: tc.path, MaxSize: tc.max, Check: &tc.check}
		for name, got := range map[string]sm.Computed{"simdisk": disk.Compute(c, 0), "fileio": real.Compute(c)} {
			if got.ID != 3 || got.Err != tc.want || got.Data != nil || tc.want == sm.IOCorrupt && (!strings.Contains(got.Detail, tc.path) || !strings.Contains(got.Detail, tc.says)) {
				t.Errorf("%s, %s: %+v, want %s naming %q", tc.name, name, got, tc.want, tc.says)
			}
		}
	}
}
