package sm

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/tzdb"
	"github.com/xce-hpc/xce/sm/wal"
)

var schedCfg = &schema.ClusterConfig{Queues: []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 30, MaxAttempts: 3, BackoffBaseS: 4}}}

// roundTrip is rec as a standby or a replay reads it back from the log.
func roundTrip(t *testing.T, rec *schema.WalRecord) *schema.WalRecord {
	t.Helper()
	b, err := proto.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	back := &schema.WalRecord{}
	if err := proto.Unmarshal(b, back); err != nil {
		t.Fatal(err)
	}
	return back
}

// TestCronZoneTravelsInTheRecord: the primary resolves a cron spec's zone
// once and logs its rules; the replayed record (and a snapshot) gives the
// same schedule and fire times without looking the zone up again.
func TestCronZoneTravelsInTheRecord(t *testing.T) {
	const spec = "CRON_TZ=Europe/Berlin 0 3 * * *"
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC).Unix()
	r := newRouter(schedCfg)
	rec, err := buildRecord(r, now, JobRequest{Kind: JobRegister, Name: "nightly", Spec: spec, Queue: "q0"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tzdb.Lookup("Europe/Berlin")
	if z := rec.GetRegister().GetZone(); !bytes.Equal(z, want) {
		t.Fatalf("record carries %d bytes of zone rules, want Berlin's %d", len(z), len(want))
	}
	live := queue.New()
	if _, err := applyRecord(live, r, rec); err != nil {
		t.Fatal(err)
	}
	replayed := queue.New()
	if err := replayApply(replayed, newRouter(schedCfg), roundTrip(t, rec)); err != nil {
		t.Fatal(err)
	}
	next := time.Date(2026, 5, 7, 1, 0, 0, 0, time.UTC).Unix() // 03:00 CEST
	if got := live.Schedules(); len(got) != 1 || got[0].Next != next || !reflect.DeepEqual(got, replayed.Schedules()) {
		t.Fatalf("live %+v\nreplayed %+v", got, replayed.Schedules())
	}
	// A checkpoint keeps the rules: the restored schedule fires at the
	// same instants.
	data, err := wal.EncodeSnapshot(SnapshotOf(live, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	back, _, _, err := importSnapshot(data, newRouter(schedCfg))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Schedules(), live.Schedules()) {
		t.Fatalf("after a snapshot %+v, want %+v", back.Schedules(), live.Schedules())
	}
	if fired := back.Tick(next); len(fired) != 1 || back.Schedules()[0].Next != next+86400 {
		t.Fatalf("restored schedule fired %d, next %d", len(fired), back.Schedules()[0].Next)
	}
}

// TestBadScheduleSpecs: every bad spec is a definite refusal naming it,
// before anything is logged.
func TestBadScheduleSpecs(t *testing.T) {
	for _, c := range []struct{ spec, why string }{
		{"CRON_TZ=Mars/Olympus 0 3 * * *", `unknown time zone "Mars/Olympus"`},
		{"CRON_TZ=Local 0 3 * * *", `unknown time zone "Local"`},
		{"0 3 * *", "expected exactly 5 fields"},
		{"0 0 30 2 *", "matches no date"},
		{"@every 0s", "bad schedule spec"},
		{"CRON_TZ=Europe/Berlin @every 5m", "bad schedule spec"},
	} {
		q := queue.New()
		rep := ApplyJob(q, schedCfg, 1, 1, 1000, JobRequest{Kind: JobRegister, Name: "s", Spec: c.spec, Queue: "q0"})
		if rep.Status != StatusEINVAL || !strings.Contains(rep.Error, c.spec) || !strings.Contains(rep.Error, c.why) {
			t.Errorf("register %q: %+v, want EINVAL naming the spec and %q", c.spec, rep, c.why)
		}
		if len(q.Schedules()) != 0 {
			t.Errorf("register %q left a schedule", c.spec)
		}
	}
	if _, err := buildRecord(newRouter(schedCfg), 1, JobRequest{Kind: JobRegister, Name: "s", Spec: "TZ=Nowhere 0 3 * * *", Queue: "q0"}); !errors.Is(err, queue.ErrBadSpec) || !errors.Is(err, tzdb.ErrUnknownZone) {
		t.Errorf("unknown zone: %v, want ErrBadSpec and ErrUnknownZone", err)
	}
}

// TestRetryDelayLogged: a worker's retry delay is checked once (EINVAL
// naming the field), logged in the record and applied alike live and on
// replay; without one the jittered backoff applies, the same on replay.
func TestRetryDelayLogged(t *testing.T) {
	const now = 1000
	for _, d := range []int64{-1, queue.MaxRetryDelayS + 1} {
		rep := ApplyJob(queue.New(), schedCfg, 1, 1, now, JobRequest{Kind: JobRetry, Handle: queue.Handle{ID: 1, Attempt: 1}, RetryDelay: d})
		if rep.Status != StatusEINVAL || !strings.Contains(rep.Error, "delay") || !strings.Contains(rep.Error, "86400") {
			t.Errorf("retry delay %d: %+v, want EINVAL naming the delay field and its bound", d, rep)
		}
	}
	for _, delay := range []int64{0, 7} {
		r := newRouter(schedCfg)
		q := queue.New()
		var log []*schema.WalRecord
		do := func(at int64, req JobRequest) Reply {
			t.Helper()
			rec, err := buildRecord(r, at, req)
			if err != nil {
				t.Fatal(err)
			}
			rec.Term, rec.Lsn = 1, uint64(len(log)+1)
			rep, err := applyRecord(q, r, rec)
			if err != nil {
				t.Fatal(err)
			}
			log = append(log, roundTrip(t, rec))
			return rep
		}
		do(now, JobRequest{Kind: JobEnqueue, Queue: "q0", Payload: []byte("x")})
		job := do(now, JobRequest{Kind: JobClaim, Queue: "q0", Host: "h0", Max: 1}).Jobs[0]
		h := queue.Handle{ID: job.ID, Attempt: job.Attempts, Claim: job.Claim}
		if rep := do(now+1, JobRequest{Kind: JobRetry, Handle: h, Error: "later", RetryDelay: delay}); !rep.OK {
			t.Fatalf("retry refused: %+v", rep)
		}
		if got := log[len(log)-1].GetRetry().GetDelay(); got != delay {
			t.Fatalf("logged delay %d, want %d", got, delay)
		}
		want := now + 1 + delay
		if delay == 0 {
			want = now + 1 + queue.Backoff(4, 1, job.ID)
		}
		got, _ := q.Get(job.ID)
		if got.RunAt != want {
			t.Fatalf("delay %d: ready at %d, want %d", delay, got.RunAt, want)
		}
		replayed, _ := ReplayRecords(schedCfg, log)
		if back, _ := replayed.Get(job.ID); !reflect.DeepEqual(back, got) {
			t.Fatalf("replay %+v\nlive %+v", back, got)
		}
	}
}
