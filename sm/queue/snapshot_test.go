package queue

import (
	"errors"
	"reflect"
	"testing"
)

// busyState builds a state with jobs in every state and shape, and
// schedules.
func busyState(t *testing.T) (*Queues, int64) {
	t.Helper()
	q := New()
	now := int64(1_000_000)
	st := Stamps{VisibilityTimeoutS: 10, MaxAttempts: 2, BackoffBaseS: 1, DeadLetterRetentionS: 1000}
	for i := range 12 {
		o := EnqueueOpts{Priority: int32(i % 3), Expires: int64(i%2) * 500, Resource: uint32(i % 2)}
		if i%4 == 3 {
			o.Host = "h1"
		}
		if i%5 == 4 {
			o.Delay = 50
		}
		if _, err := q.Enqueue(now, []string{"a", "b"}[i%2], []byte{byte(i)}, st, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Register(now, "s", "@every 1m", "a", []byte("tick"), st, FireOpts{Priority: 1, ExpiresS: 5}); err != nil {
		t.Fatal(err)
	}
	if err := q.Register(now, "r", "@every 1h", "b", nil, st, FireOpts{}); err != nil {
		t.Fatal(err)
	}
	got := q.ClaimBatch(now, "a", "h1", 4, stampAt(now))
	q.Retry(now, got[0].Handle(), "boom")
	q.Fail(now, got[1].Handle(), "")
	q.ClaimBatch(now, "b", "h2", 2, stampAt(now))
	now += 20 // the claims on b lapse
	q.ClaimBatch(now, "b", "h3", 1, stampAt(now))
	q.Tick(now)
	return q, now
}

// TestExportImportRoundTrip: Import(Export()) gives the same state, and the
// rebuilt indexes behave exactly like the live ones afterwards.
func TestExportImportRoundTrip(t *testing.T) {
	live, now := busyState(t)
	snap := live.Export()
	back, err := Import(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.checkIndexes(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Export(), snap) {
		t.Fatalf("round trip differs:\n%+v\n%+v", back.Export(), snap)
	}
	// Export shares no memory with the state; Import holds the snapshot's
	// payloads themselves (one copy of each, not two).
	snap.Jobs[0].Payload[0] ^= 0xff
	if j, _ := live.Get(snap.Jobs[0].ID); j.Payload[0] == snap.Jobs[0].Payload[0] {
		t.Fatal("Export aliases payloads")
	}
	snap.Jobs[0].Payload[0] ^= 0xff
	for _, j := range snap.Jobs {
		if p := back.jobs.get(j.ID).Payload; len(j.Payload) > 0 && &p[0] != &j.Payload[0] {
			t.Fatalf("job %d: Import copied its payload", j.ID)
		}
	}
	start := now
	for _, q := range []*Queues{live, back} {
		now = start
		for step := range 20 {
			now += 7
			q.ClaimBatch(now, "a", "h1", 2, stampAt(now))
			q.ClaimBatch(now, "b", "h2", 1, stampAt(now))
			q.SweepExpired(now)
			q.Tick(now)
			if step%3 == 0 {
				for _, j := range q.List("") {
					if j.State == Dead {
						q.Redrive(now, j.ID)
					}
				}
			}
		}
	}
	if a, b := live.Export(), back.Export(); !reflect.DeepEqual(a, b) {
		t.Fatalf("live and imported states diverged:\n%+v\n%+v", a, b)
	}
}

func TestImportRejects(t *testing.T) {
	base, _ := busyState(t)
	var pending, processing, dead, fresh int
	snap := base.Export()
	for i, j := range snap.Jobs {
		if j.Claims == 0 {
			fresh = i
		}
		switch j.State {
		case Pending:
			pending = i
		case Processing:
			processing = i
		case Dead:
			dead = i
		}
	}
	if snap.Jobs[fresh].Claims != 0 {
		t.Fatal("busyState has no job that was never claimed")
	}
	for _, c := range []struct {
		name string
		edit func(s *Snapshot)
	}{
		{"duplicate id", func(s *Snapshot) { s.Jobs[1].ID = s.Jobs[0].ID }},
		{"duplicate seq", func(s *Snapshot) { s.Jobs[1].Seq = s.Jobs[0].Seq }},
		{"zero id", func(s *Snapshot) { s.Jobs[0].ID = 0 }},
		{"id beyond next id", func(s *Snapshot) { s.Jobs[0].ID = s.NextID }},
		{"seq beyond next seq", func(s *Snapshot) { s.Jobs[0].Seq = s.NextSeq + 3 }},
		{"zero next id", func(s *Snapshot) { s.NextID = 0 }},
		{"bad state", func(s *Snapshot) { s.Jobs[0].State = 7 }},
		{"empty queue", func(s *Snapshot) { s.Jobs[0].Queue = "" }},
		{"bad stamps", func(s *Snapshot) { s.Jobs[0].Stamps.MaxAttempts = 0 }},
		{"attempts beyond budget", func(s *Snapshot) { s.Jobs[dead].Attempts = s.Jobs[dead].Stamps.MaxAttempts + 1 }},
		{"attempts beyond claims", func(s *Snapshot) { s.Jobs[processing].Claims = 0 }},
		{"claimed without a claim stamp", func(s *Snapshot) { s.Jobs[processing].Claim = ClaimStamp{Term: 4} }},
		{"never claimed with a claim stamp", func(s *Snapshot) { s.Jobs[fresh].Claim = ClaimStamp{Term: 1, LSN: 3} }},
		{"exhausted pending", func(s *Snapshot) {
			s.Jobs[pending].Attempts, s.Jobs[pending].Claims = s.Jobs[pending].Stamps.MaxAttempts, 5
		}},
		{"pending with a claimant", func(s *Snapshot) { s.Jobs[pending].Host = "h1" }},
		{"processing without claimant", func(s *Snapshot) { s.Jobs[processing].Host = "" }},
		{"processing without attempt", func(s *Snapshot) { s.Jobs[processing].Attempts = 0 }},
		{"processing with death time", func(s *Snapshot) { s.Jobs[processing].DiedAt = 5 }},
		{"duplicate schedule", func(s *Snapshot) { s.Schedules[1].Name = s.Schedules[0].Name }},
		{"schedule with a bad spec", func(s *Snapshot) { s.Schedules[0].Spec = "*/5 * * *" }},
		{"schedule with a zone and no rules", func(s *Snapshot) { s.Schedules[0].Spec = "CRON_TZ=Europe/Berlin 0 3 * * *" }},
		{"schedule with rules and no zone", func(s *Snapshot) { s.Schedules[0].Spec, s.Schedules[0].Zone = "0 3 * * *", []byte("TZif") }},
		{"schedule with an @every spec and rules", func(s *Snapshot) { s.Schedules[0].Zone = []byte("TZif") }},
		{"schedule without name", func(s *Snapshot) { s.Schedules[0].Name = "" }},
		{"schedule without queue", func(s *Snapshot) { s.Schedules[0].Queue = "" }},
		{"schedule with bad stamps", func(s *Snapshot) { s.Schedules[0].Stamps.VisibilityTimeoutS = 0 }},
		{"schedule with negative expiry", func(s *Snapshot) { s.Schedules[0].Fire.ExpiresS = -1 }},
	} {
		s := base.Export()
		c.edit(&s)
		if q, err := Import(s); !errors.Is(err, ErrBadSnapshot) || q != nil {
			t.Errorf("%s: Import = %v, %v; want ErrBadSnapshot", c.name, q, err)
		}
	}
	// Order does not matter.
	s := base.Export()
	s.Jobs[0], s.Jobs[len(s.Jobs)-1] = s.Jobs[len(s.Jobs)-1], s.Jobs[0]
	s.Schedules[0], s.Schedules[1] = s.Schedules[1], s.Schedules[0]
	q, err := Import(s)
	if err != nil || !reflect.DeepEqual(q.Export(), base.Export()) {
		t.Fatalf("shuffled snapshot: %v", err)
	}
	if q, err := Import(Snapshot{NextID: 1, NextSeq: 1}); err != nil || len(q.List("")) != 0 {
		t.Fatalf("empty snapshot: %v", err)
	}
}
