package wal

import (
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/xce-hpc/xce/schema"
)

func genStamps(t *rapid.T) *schema.WalStamps {
	if rapid.Bool().Draw(t, "nilStamps") {
		return nil
	}
	return &schema.WalStamps{
		VisibilityTimeoutS:   rapid.Uint32().Draw(t, "vis"),
		MaxAttempts:          rapid.Uint32().Draw(t, "max"),
		BackoffBaseS:         rapid.Uint32().Draw(t, "backoff"),
		DeadLetterRetentionS: rapid.Uint32().Draw(t, "retention"),
	}
}

func genHandle(t *rapid.T) *schema.WalHandle {
	return &schema.WalHandle{Id: rapid.Uint64().Draw(t, "id"), Attempt: rapid.Uint32().Draw(t, "attempt")}
}

var (
	genName  = rapid.StringN(0, 20, -1)
	genBytes = rapid.SliceOfN(rapid.Byte(), 0, 300)
)

// genOp draws one queue operation with arbitrary fields.
func genOp(t *rapid.T, r *schema.WalRecord) {
	switch rapid.IntRange(0, 13).Draw(t, "op") {
	case 0:
		r.Op = &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{
			Queue: genName.Draw(t, "queue"), QueueId: rapid.Uint32().Draw(t, "qid"), Payload: genBytes.Draw(t, "payload"),
			Stamps: genStamps(t), Priority: rapid.Int32().Draw(t, "prio"), Delay: rapid.Int64().Draw(t, "delay"),
			RunAt: rapid.Int64().Draw(t, "runAt"), Expires: rapid.Int64().Draw(t, "expires"),
			Resource: rapid.Uint32().Draw(t, "res"), Host: genName.Draw(t, "host"),
		}}
	case 1:
		r.Op = &schema.WalRecord_ClaimBatch{ClaimBatch: &schema.WalClaimBatch{Queue: genName.Draw(t, "queue"),
			QueueId: rapid.Uint32().Draw(t, "qid"), Host: genName.Draw(t, "host"), Max: rapid.Uint32().Draw(t, "max"),
			Json: rapid.Bool().Draw(t, "json")}}
	case 2:
		r.Op = &schema.WalRecord_Ack{Ack: &schema.WalAck{Handle: genHandle(t)}}
	case 3:
		hs := rapid.SliceOfN(rapid.Custom(genHandle), 0, 10).Draw(t, "handles")
		r.Op = &schema.WalRecord_AckBatch{AckBatch: &schema.WalAckBatch{Handles: hs}}
	case 4:
		r.Op = &schema.WalRecord_Heartbeat{Heartbeat: &schema.WalHeartbeat{Handle: genHandle(t)}}
	case 5:
		r.Op = &schema.WalRecord_Retry{Retry: &schema.WalRetry{Handle: genHandle(t), Error: genName.Draw(t, "err")}}
	case 6:
		r.Op = &schema.WalRecord_Fail{Fail: &schema.WalFail{Handle: genHandle(t), Error: genName.Draw(t, "err")}}
	case 7:
		r.Op = &schema.WalRecord_Cancel{Cancel: &schema.WalCancel{Id: rapid.Uint64().Draw(t, "id")}}
	case 8:
		r.Op = &schema.WalRecord_SweepExpired{SweepExpired: &schema.WalSweepExpired{}}
	case 9:
		r.Op = &schema.WalRecord_Redrive{Redrive: &schema.WalRedrive{Id: rapid.Uint64().Draw(t, "id")}}
	case 10:
		r.Op = &schema.WalRecord_Register{Register: &schema.WalRegister{Name: genName.Draw(t, "name"), Spec: genName.Draw(t, "spec"),
			Queue: genName.Draw(t, "queue"), QueueId: rapid.Uint32().Draw(t, "qid"), Payload: genBytes.Draw(t, "payload"),
			Stamps: genStamps(t), Fire: &schema.WalFireOpts{Priority: rapid.Int32().Draw(t, "prio"), ExpiresS: rapid.Int64().Draw(t, "exp")}}}
	case 11:
		r.Op = &schema.WalRecord_Unregister{Unregister: &schema.WalUnregister{Name: genName.Draw(t, "name")}}
	case 12:
		r.Op = &schema.WalRecord_Tick{Tick: &schema.WalTick{}}
	case 13: // no op (as an unknown future op decodes)
	}
}

// genRecs draws 0..40 records with strictly increasing LSNs (gaps allowed).
func genRecs(t *rapid.T) []*schema.WalRecord {
	n := rapid.IntRange(0, 40).Draw(t, "n")
	lsn := rapid.Uint64Range(0, 1<<40).Draw(t, "lsn0")
	recs := make([]*schema.WalRecord, n)
	for i := range recs {
		lsn += rapid.Uint64Range(1, 1000).Draw(t, "step")
		recs[i] = &schema.WalRecord{Lsn: lsn, Now: rapid.Int64().Draw(t, "now")}
		genOp(t, recs[i])
	}
	return recs
}

func TestPropScanReturnsAll(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := genRecs(t)
		data, _ := segment(t, want)
		got, n, err := Scan(data)
		if err != nil || n != len(data) {
			t.Fatalf("Scan: n=%d/%d err=%v", n, len(data), err)
		}
		sameRecs(t, got, want)
	})
}

func TestPropTruncationGivesPrefix(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := genRecs(t)
		data, offs := segment(t, want)
		cut := rapid.IntRange(0, len(data)).Draw(t, "cut")
		in := data[:cut]
		if rapid.Bool().Draw(t, "zeroFill") {
			in = append(append([]byte(nil), in...), make([]byte, rapid.IntRange(0, 5000).Draw(t, "zeros"))...)
		}
		// The bytes that survived: the cut, or more where a zero fill
		// happens to equal what was lost (an empty message ends in 0x00).
		intact := cut
		for intact < len(data) && intact < len(in) && in[intact] == data[intact] {
			intact++
		}
		got, n, err := Scan(in)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if n > intact || n != offs[len(got)] {
			t.Fatalf("cut %d: validLen %d with %d records (frame ends %v)", cut, n, len(got), offs)
		}
		// Every frame ending by the cut is returned.
		if len(got) < len(want) && offs[len(got)+1] <= intact {
			t.Fatalf("cut %d: only %d records, frame %d ends at %d", cut, len(got), len(got), offs[len(got)+1])
		}
		sameRecs(t, got, want[:len(got)])
	})
}

// Damaging any byte of a frame that has a valid frame after it is reported
// as corruption at that frame; records before it are returned.
func TestPropDamageBeforeTailIsCorruption(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := genRecs(t)
		if len(want) < 2 {
			want = append(want, enqueueRec(1<<50), enqueueRec(1<<50+1))
		}
		data, offs := segment(t, want)
		k := rapid.IntRange(0, len(want)-2).Draw(t, "frame")
		pos := rapid.IntRange(offs[k], offs[k+1]-1).Draw(t, "pos")
		data[pos] ^= rapid.ByteRange(1, 255).Draw(t, "xor")
		got, n, err := Scan(data)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Offset != offs[k] || n != offs[k] {
			t.Fatalf("damage at %d in frame %d (%d..%d): n=%d err=%v", pos, k, offs[k], offs[k+1], n, err)
		}
		sameRecs(t, got, want[:k])
	})
}
