package sim

import (
	"testing"

	"xce/sim/simdisk"
	"xce/sm"
	"xce/sm/wal"
)

// TestMirrorSharesDurableBytes: the durable-log mirror and its frame cache
// keep the disk's own bytes of a segment (they never change) instead of a
// copy per fsync, which made every fsync of a segment cost its whole size,
// and the cache decodes only the appended frames.
func TestMirrorSharesDurableBytes(t *testing.T) {
	d := simdisk.New()
	p := wal.SegmentPath(1)
	appendSync := func(b []byte) {
		t.Helper()
		for _, op := range []sm.FileOp{{Op: sm.OpAppend, Path: p, Data: b}, {Op: sm.OpFsync, Path: p}, {Op: sm.OpFsyncDir, Path: wal.WALDir}} {
			if r := d.Exec(op, epoch); r.Err != sm.IOOK {
				t.Fatalf("%s %s: %v %s", op.Op, op.Path, r.Err, r.Detail)
			}
		}
	}
	if r := d.Exec(sm.FileOp{Op: sm.OpMkdir, Path: sm.DataDir}, epoch); r.Err != sm.IOOK {
		t.Fatal(r.Detail)
	}
	if r := d.Exec(sm.FileOp{Op: sm.OpMkdir, Path: wal.WALDir}, epoch); r.Err != sm.IOOK {
		t.Fatal(r.Detail)
	}
	d.Exec(sm.FileOp{Op: sm.OpFsyncDir, Path: ""}, epoch)
	d.Exec(sm.FileOp{Op: sm.OpFsyncDir, Path: sm.DataDir}, epoch)
	appendSync(frames(t, [2]uint64{1, 1}, [2]uint64{2, 1}))
	var m durMirror
	var c frameCache
	m.sync(d, nil)
	if v := m.read(&c); v.lastLSN() != 2 {
		t.Fatalf("mirror reads up to LSN %d, want 2", v.lastLSN())
	}
	for lsn := uint64(3); lsn < 6; lsn++ {
		appendSync(frames(t, [2]uint64{lsn, 1}))
		op := sm.FileOp{Op: sm.OpFsync, Path: p}
		m.sync(d, &op)
		v := m.read(&c)
		if v.lastLSN() != lsn {
			t.Fatalf("mirror reads up to LSN %d, want %d", v.lastLSN(), lsn)
		}
		disk, _ := d.DurableData(p)
		if f := m.files[p]; &f.data[0] != &disk[0] {
			t.Fatalf("after LSN %d: the mirror holds a copy of %s", lsn, p)
		}
		if sp := c.segs[wal.SegmentName(1)]; &sp.data[0] != &disk[0] || len(sp.recs) != int(lsn) {
			t.Fatalf("after LSN %d: the frame cache holds a copy, or %d records", lsn, len(sp.recs))
		}
	}
}
