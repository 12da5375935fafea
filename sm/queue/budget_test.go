package queue

import (
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// ClaimBatchWithin hands out jobs only while their SizeBound fits the
// budget (always at least one); the rest stay pending and ready.
func TestClaimBatchWithinBudget(t *testing.T) {
	q := New()
	st := Stamps{VisibilityTimeoutS: 30, MaxAttempts: 3}
	for i := 0; i < 5; i++ {
		if _, err := q.Enqueue(100, "q", make([]byte, 1000), st, EnqueueOpts{}); err != nil {
			t.Fatal(err)
		}
	}
	one := Job{Queue: "q", Payload: make([]byte, 1000), Host: "h"}.SizeBound()
	got := q.ClaimBatchWithin(101, "q", "h", 10, Budget{Bytes: 2*one + one/2}, ClaimStamp{Term: 1, LSN: 7})
	if len(got) != 2 {
		t.Fatalf("claimed %d jobs within a budget of 2.5 jobs, want 2", len(got))
	}
	if p, r, _ := q.Counts("q"); p != 3 || r != 2 {
		t.Fatalf("pending %d processing %d, want 3 and 2", p, r)
	}
	// A budget below one job still hands out one.
	if got := q.ClaimBatchWithin(101, "q", "h", 10, Budget{Bytes: 1}, ClaimStamp{Term: 1, LSN: 8}); len(got) != 1 {
		t.Fatalf("claimed %d with a tiny budget, want 1", len(got))
	}
	// Unbounded takes the rest, in order.
	rest := q.ClaimBatchWithin(101, "q", "h", 10, Budget{}, ClaimStamp{Term: 1, LSN: 9})
	if len(rest) != 2 || rest[0].ID > rest[1].ID {
		t.Fatalf("rest %v", rest)
	}
}

// ClaimBatchCount claims what ClaimBatchWithin claims, budget included:
// on twin states (Import of one Export), the same claims give the count
// of ClaimBatchWithin's jobs and the same state after each.
func TestClaimBatchCountIsClaimBatchWithin(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := New()
		now := int64(1000)
		for i, n := 0, rapid.IntRange(0, 30).Draw(t, "jobs"); i < n; i++ {
			st := Stamps{VisibilityTimeoutS: rapid.Uint32Range(1, 20).Draw(t, "vt"), MaxAttempts: rapid.Uint32Range(1, 3).Draw(t, "max_attempts")}
			o := EnqueueOpts{Priority: rapid.Int32Range(-1, 1).Draw(t, "priority"), Delay: rapid.Int64Range(0, 10).Draw(t, "delay"),
				Expires: rapid.Int64Range(0, 40).Draw(t, "expires"), Host: rapid.SampledFrom([]string{"", "", "h1"}).Draw(t, "pin")}
			payload := make([]byte, rapid.IntRange(0, 600).Draw(t, "payload"))
			if _, err := a.Enqueue(now, rapid.SampledFrom([]string{"q", "r"}).Draw(t, "queue"), payload, st, o); err != nil {
				t.Fatal(err)
			}
		}
		b, err := Import(a.Export())
		if err != nil {
			t.Fatal(err)
		}
		for i, n := 0, rapid.IntRange(1, 20).Draw(t, "claims"); i < n; i++ {
			now += rapid.Int64Range(-2, 15).Draw(t, "advance")
			queue := rapid.SampledFrom([]string{"q", "r", "none"}).Draw(t, "claim queue")
			host := rapid.SampledFrom([]string{"h1", "h2", ""}).Draw(t, "host")
			max := rapid.IntRange(-1, 5).Draw(t, "max")
			budget := Budget{Bytes: rapid.IntRange(0, 3000).Draw(t, "budget"), Enc: Encoding(rapid.IntRange(0, 1).Draw(t, "encoding"))}
			at := ClaimStamp{Term: 1, LSN: uint64(i + 1)}
			jobs := a.ClaimBatchWithin(now, queue, host, max, budget, at)
			if k := b.ClaimBatchCount(now, queue, host, max, budget, at); k != len(jobs) {
				t.Fatalf("claim %d: ClaimBatchCount = %d, ClaimBatchWithin claimed %d", i, k, len(jobs))
			}
			if ea, eb := a.Export(), b.Export(); !reflect.DeepEqual(ea, eb) {
				t.Fatalf("claim %d: states differ\nClaimBatchWithin %+v\nClaimBatchCount  %+v", i, ea, eb)
			}
			if err := b.checkIndexes(); err != nil {
				t.Fatalf("claim %d: indexes: %v", i, err)
			}
		}
	})
}
