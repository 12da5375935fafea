package api

import (
	"math"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
)

// A job's JSON (as the API's JSON codec writes it: protojson with every
// field, zero ones included) and its protobuf are within the bounds sm sizes replies by,
// queue.Job.SizeIn: for every number at its extremes and strings of
// control bytes (escaped six times over), quotes and backslashes.
func TestJobSizeBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		str := func(name string) string {
			return rapid.StringOfN(rapid.SampledFrom([]rune{'\x00', '\x1f', '"', '\\', 'a', '\u2028', '\U0001F600'}), 0, 50, -1).Draw(t, name)
		}
		i64 := rapid.SampledFrom([]int64{0, 1, -1, math.MinInt64, math.MaxInt64})
		u64 := rapid.SampledFrom([]uint64{0, 1, math.MaxUint64})
		u32 := rapid.SampledFrom([]uint32{0, 1, math.MaxUint32})
		j := queue.Job{ID: u64.Draw(t, "id"), Queue: str("queue"), Payload: rapid.SliceOfN(rapid.Byte(), 0, 100).Draw(t, "payload"),
			Priority: rapid.SampledFrom([]int32{0, math.MinInt32, math.MaxInt32}).Draw(t, "priority"),
			State:    queue.State(rapid.IntRange(0, 2).Draw(t, "state")), RunAt: i64.Draw(t, "run at"), Seq: u64.Draw(t, "seq"),
			EnqueuedAt: i64.Draw(t, "enqueued at"), ExpiresAt: i64.Draw(t, "expires at"), Attempts: u32.Draw(t, "attempts"),
			Stamps: queue.Stamps{VisibilityTimeoutS: u32.Draw(t, "vt"), MaxAttempts: u32.Draw(t, "ma"), BackoffBaseS: u32.Draw(t, "bb"), DeadLetterRetentionS: u32.Draw(t, "dlr")},
			Pin:    str("pin"), Host: str("host"), Resource: u32.Draw(t, "resource"), ClaimedAt: i64.Draw(t, "claimed at"),
			ClaimExpiresAt: i64.Draw(t, "claim expires at"), LastError: str("last error"), DiedAt: i64.Draw(t, "died at"),
			Claims: u32.Draw(t, "claims"), Claim: queue.ClaimStamp{Term: u64.Draw(t, "term"), LSN: u64.Draw(t, "lsn")}}
		p := jobToProto(j)
		// The jobs of a reply are elements of its repeated field: the
		// separator (a comma; binary: the field's tag and length) counts.
		js, err := replyJSON.Marshal(&schema.JobResponse{Jobs: []*schema.SnapshotJob{p, p}})
		if err != nil {
			t.Fatal(err)
		}
		one, err := replyJSON.Marshal(&schema.JobResponse{Jobs: []*schema.SnapshotJob{p}})
		if err != nil {
			t.Fatal(err)
		}
		// The second copy of the job, with its comma: the bytes one more
		// job adds (the reply's other fields, zero ones written too, are
		// in both).
		if n := len(js) - len(one); n > j.SizeIn(queue.JSON) {
			t.Fatalf("a job's JSON is %d bytes, its bound %d: %s", n, j.SizeIn(queue.JSON), js)
		}
		if n := proto.Size(&schema.JobResponse{Jobs: []*schema.SnapshotJob{p}}); n > j.SizeIn(queue.Binary) {
			t.Fatalf("a job's protobuf is %d bytes, its bound %d", n, j.SizeIn(queue.Binary))
		}
	})
}
