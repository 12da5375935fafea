package queue

import "testing"

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
	got := q.ClaimBatchWithin(101, "q", "h", 10, 2*one+one/2, ClaimStamp{Term: 1, LSN: 7})
	if len(got) != 2 {
		t.Fatalf("claimed %d jobs within a budget of 2.5 jobs, want 2", len(got))
	}
	if p, r, _ := q.Counts("q"); p != 3 || r != 2 {
		t.Fatalf("pending %d processing %d, want 3 and 2", p, r)
	}
	// A budget below one job still hands out one.
	if got := q.ClaimBatchWithin(101, "q", "h", 10, 1, ClaimStamp{Term: 1, LSN: 8}); len(got) != 1 {
		t.Fatalf("claimed %d with a tiny budget, want 1", len(got))
	}
	// Unbounded takes the rest, in order.
	rest := q.ClaimBatchWithin(101, "q", "h", 10, 0, ClaimStamp{Term: 1, LSN: 9})
	if len(rest) != 2 || rest[0].ID > rest[1].ID {
		t.Fatalf("rest %v", rest)
	}
}
