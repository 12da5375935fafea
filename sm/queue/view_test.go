package queue

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// A View is the state when it was taken, whatever the state does after
// (copy on write): for any state and any operations after the View, the
// View exports what Export returned at that moment (the jobs built by
// Enqueue or by Import; own copies a job's claim fields with it), and the
// live state's indexes hold the copies own makes (checkIndexes after every
// operation: each heap's job is the job table's).
func TestViewIsImmutable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q, now := New(), int64(1_700_000_000)
		st := Stamps{VisibilityTimeoutS: 30, MaxAttempts: 2, BackoffBaseS: 1, DeadLetterRetentionS: 3600}
		var handles []Handle
		op := func(label string) {
			now += int64(rapid.IntRange(0, 40).Draw(t, label+"-dt"))
			switch rapid.IntRange(0, 8).Draw(t, label) {
			case 0, 1:
				if _, err := q.Enqueue(now, rapid.SampledFrom([]string{"a", "b"}).Draw(t, label+"-q"), []byte(label), st, EnqueueOpts{
					Host:    rapid.SampledFrom([]string{"", "lost_and_found"}).Draw(t, label+"-pin"),
					Expires: rapid.SampledFrom([]int64{0, 100}).Draw(t, label+"-exp"),
				}); err != nil {
					t.Fatal(err)
				}
			case 2:
				for _, j := range q.ClaimBatch(now, "a", "h", 2, ClaimStamp{Term: 1, LSN: uint64(now)}) {
					handles = append(handles, j.Handle())
				}
			case 3, 4, 5, 6:
				if len(handles) == 0 {
					return
				}
				h := handles[rapid.IntRange(0, len(handles)-1).Draw(t, label+"-h")]
				switch rapid.IntRange(0, 3).Draw(t, label+"-what") {
				case 0:
					q.Ack(now, h)
				case 1:
					q.Heartbeat(now, h)
				case 2:
					q.Retry(now, h, "again")
				default:
					q.Fail(now, h, "broken")
				}
			case 7:
				for _, j := range q.List("") {
					if j.State == Dead {
						q.Redrive(now, j.ID)
					}
				}
				q.SweepExpired(now)
			default:
				q.DrainSidelined(now, "lost_and_found", "b", "", false)
			}
			if err := q.checkIndexes(); err != nil {
				t.Fatalf("after %s: %v", label, err)
			}
		}
		for i := range rapid.IntRange(0, 30).Draw(t, "before") {
			op(fmt.Sprintf("b%d", i))
		}
		if rapid.Bool().Draw(t, "imported") { // the jobs as Import builds them
			var err error
			if q, err = Import(q.Export()); err != nil {
				t.Fatal(err)
			}
		}
		want := q.Export()
		v := q.View()
		for i := range rapid.IntRange(1, 30).Draw(t, "after") {
			op(fmt.Sprintf("a%d", i))
		}
		if got := v.Export(); !reflect.DeepEqual(got, want) {
			t.Fatalf("the view changed with the state:\n got %+v\nwant %+v", got, want)
		}
	})
}

// A View is read on another goroutine (sm's checkpoint encodes it off the
// node's Step) while the state goes on: the live state writes only the
// index positions of the jobs it shares with the View, never a field the
// View reads (run with -race to check the memory accesses too).
func TestViewExportDuringChanges(t *testing.T) {
	q, now := New(), int64(1_700_000_000)
	st := Stamps{VisibilityTimeoutS: 30, MaxAttempts: 2, BackoffBaseS: 1, DeadLetterRetentionS: 3600}
	for i := range 3000 {
		o := EnqueueOpts{Priority: int32(i % 3), Expires: int64(i % 2 * 500)}
		if i%5 == 0 {
			o.Host = "lost_and_found"
		}
		if _, err := q.Enqueue(now, "a", []byte{byte(i)}, st, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range q.ClaimBatch(now, "a", "h", 500, stampAt(now)) {
		q.Fail(now, j.Handle(), "broken")
	}
	want := q.Export()
	v := q.View()
	done := make(chan error)
	go func() {
		for range 3 {
			if got := v.Export(); !reflect.DeepEqual(got, want) {
				done <- fmt.Errorf("the view changed while it was read")
				return
			}
		}
		done <- nil
	}()
	for round := range 20 {
		now += 20
		for i, j := range q.ClaimBatch(now, "a", "h", 100, stampAt(now)) {
			switch i % 4 {
			case 0:
				q.Ack(now, j.Handle())
			case 1:
				q.Heartbeat(now, j.Handle())
			case 2:
				q.Retry(now, j.Handle(), "again")
			}
		}
		q.SweepExpired(now)
		if round%5 == 0 {
			q.DrainSidelined(now, "lost_and_found", "b", "", false)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := q.checkIndexes(); err != nil {
		t.Fatal(err)
	}
}

// job.owned is 32 bits: when the generation wraps, a job made 2^32 Views
// ago must not pass for one made since the newest View.
func TestViewGenerationWraps(t *testing.T) {
	q, now := New(), int64(1_700_000_000)
	st := Stamps{VisibilityTimeoutS: 30, MaxAttempts: 2}
	if _, err := q.Enqueue(now, "a", []byte("x"), st, EnqueueOpts{}); err != nil {
		t.Fatal(err)
	}
	q.gen = math.MaxUint32 // as if 2^32-2 Views were taken since, the job untouched
	v1 := q.View()
	want := q.Export()
	v2 := q.View()
	if got := q.ClaimBatch(now, "a", "h", 1, stampAt(now)); len(got) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(got))
	}
	for i, v := range []View{v1, v2} {
		if got := v.Export(); !reflect.DeepEqual(got, want) {
			t.Fatalf("view %d changed with the state after the generation wrapped:\n got %+v\nwant %+v", i+1, got, want)
		}
	}
	if err := q.checkIndexes(); err != nil {
		t.Fatal(err)
	}
}
