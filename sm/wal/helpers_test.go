package wal

import (
	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
)

func stamps() *schema.WalStamps {
	return &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 5, BackoffBaseS: 2, DeadLetterRetentionS: 86400}
}

func enqueueRec(lsn uint64) *schema.WalRecord {
	return &schema.WalRecord{Lsn: lsn, Now: 1_700_000_000 + int64(lsn), Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{
		Queue: "default", QueueId: 1, Payload: []byte("job payload"), Stamps: stamps(),
		Priority: 3, Delay: 10, Expires: 1_700_003_600, Resource: 2, Host: "node-a",
	}}}
}

// sampleRecs covers every op, LSNs 1..13.
func sampleRecs() []*schema.WalRecord {
	h := &schema.WalHandle{Id: 1, Attempt: 1}
	recs := []*schema.WalRecord{
		enqueueRec(0),
		{Op: &schema.WalRecord_ClaimBatch{ClaimBatch: &schema.WalClaimBatch{Queue: "default", QueueId: 1, Host: "node-a", Max: 8}}},
		{Op: &schema.WalRecord_Heartbeat{Heartbeat: &schema.WalHeartbeat{Handle: h}}},
		{Op: &schema.WalRecord_Retry{Retry: &schema.WalRetry{Handle: h, Error: "boom"}}},
		{Op: &schema.WalRecord_Ack{Ack: &schema.WalAck{Handle: h}}},
		{Op: &schema.WalRecord_AckBatch{AckBatch: &schema.WalAckBatch{Handles: []*schema.WalHandle{h, {Id: 2, Attempt: 3}}}}},
		{Op: &schema.WalRecord_Fail{Fail: &schema.WalFail{Handle: h, Error: "fatal"}}},
		{Op: &schema.WalRecord_Cancel{Cancel: &schema.WalCancel{Id: 7}}},
		{Op: &schema.WalRecord_SweepExpired{SweepExpired: &schema.WalSweepExpired{}}},
		{Op: &schema.WalRecord_Redrive{Redrive: &schema.WalRedrive{Id: 7}}},
		{Op: &schema.WalRecord_Register{Register: &schema.WalRegister{Name: "nightly", Spec: "@every 1d", Queue: "default", QueueId: 1,
			Payload: []byte("x"), Stamps: stamps(), Fire: &schema.WalFireOpts{Priority: 1, ExpiresS: 3600}}}},
		{Op: &schema.WalRecord_Tick{Tick: &schema.WalTick{}}},
		{Op: &schema.WalRecord_Unregister{Unregister: &schema.WalUnregister{Name: "nightly"}}},
	}
	for i, r := range recs {
		r.Lsn, r.Now = uint64(i+1), 1_700_000_000+int64(i)
	}
	return recs
}

// tb is what the helpers need of *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// segment frames recs and returns the bytes and each frame's offset, plus
// the end offset as a final element.
func segment(t tb, recs []*schema.WalRecord) ([]byte, []int) {
	t.Helper()
	var data []byte
	offs := []int{0}
	for _, r := range recs {
		var err error
		if data, err = AppendFrame(data, r); err != nil {
			t.Fatal(err)
		}
		offs = append(offs, len(data))
	}
	return data, offs
}

func sameRecs(t tb, got, want []*schema.WalRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("record %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
}
