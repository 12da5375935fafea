package sm_test

import (
	"strings"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// A received snapshot is verified by the executor (ComputeVerify): the
// whole file, streamed, and the position the sync announced.
func TestSnapshotCheckVerifies(t *testing.T) {
	snap := &schema.Snapshot{Lsn: 7, Term: 3, NextId: 3, NextSeq: 3, Jobs: []*schema.SnapshotJob{
		{Id: 1, Seq: 1, Queue: "q0", Payload: []byte("a")},
		{Id: 2, Seq: 2, Queue: "q0", Payload: []byte("b")},
	}}
	data, err := wal.EncodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&sm.SnapshotCheck{LSN: 7, Term: 3}).Verify(data); err != nil {
		t.Fatalf("a valid snapshot at the announced position: %v", err)
	}
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)-2] ^= 0x40 // in the last job's payload
	for _, tc := range []struct {
		name  string
		check sm.SnapshotCheck
		data  []byte
		want  string
	}{
		{"another lsn", sm.SnapshotCheck{LSN: 8, Term: 3}, data, "the sync announced lsn 8 term 3"},
		{"another term", sm.SnapshotCheck{LSN: 7, Term: 4}, data, "it holds lsn 7 term 3"},
		{"a flipped bit", sm.SnapshotCheck{LSN: 7, Term: 3}, flipped, "checksum mismatch"},
		{"cut short", sm.SnapshotCheck{LSN: 7, Term: 3}, data[:len(data)-5], "snapshot"},
	} {
		err := tc.check.Verify(tc.data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
