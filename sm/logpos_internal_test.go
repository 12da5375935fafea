package sm

import (
	"testing"

	"github.com/xce-hpc/xce/sm/wal"
)

// The boot scan's hand-off to recovery survives only while nothing
// changes the job log's files: a write, append, rename or removal in
// data/wal or data/snap drops it; reads, fsyncs and other files do not.
func TestScannedDroppedOnLogChange(t *testing.T) {
	n, err := NewNode(DefaultOptions(0, []string{"n0", "n1"}))
	if err != nil {
		t.Fatal(err)
	}
	seg := wal.SegmentPath(1)
	for _, c := range []struct {
		op   FileOp
		kept bool
	}{
		{FileOp{Op: OpRead, Path: seg}, true},
		{FileOp{Op: OpFsync, Path: seg}, true},
		{FileOp{Op: OpFsyncDir, Path: wal.WALDir}, true},
		{FileOp{Op: OpList, Path: wal.SnapDir}, true},
		{FileOp{Op: OpWrite, Path: TermPath}, true},
		{FileOp{Op: OpRename, Path: termTmpPath, To: TermPath}, true},
		{FileOp{Op: OpAppend, Path: seg}, false},
		{FileOp{Op: OpWrite, Path: seg + ".tmp"}, false},
		{FileOp{Op: OpWrite, Path: wal.SnapDir + "/x.tmp"}, false},
		{FileOp{Op: OpRename, Path: DataDir + "/x", To: wal.SnapshotPath(9)}, false},
		{FileOp{Op: OpRemove, Path: seg}, false},
	} {
		n.disk.scanned = &scannedFiles{data: map[string][]byte{seg: []byte("x")}}
		n.disk.forgetScanned(c.op)
		if kept := n.disk.scanned != nil; kept != c.kept {
			t.Errorf("%v %s -> %s: kept %v, want %v", c.op.Op, c.op.Path, c.op.To, kept, c.kept)
		}
	}
	n.disk.scanned = &scannedFiles{data: map[string][]byte{seg: []byte("x")}}
	n.becomeStandby(1, 1, "standby of %s (my priority %d)")
	if n.disk.scanned != nil {
		t.Error("a standby keeps the boot scan's reads")
	}
}
