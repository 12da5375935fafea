package queue

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestParseEvery(t *testing.T) {
	for _, c := range []struct {
		spec string
		want int64 // 0 = error
	}{
		{"@every 30s", 30},
		{"@every 1s", 1},
		{"@every 5m", 300},
		{"@every 2h", 7200},
		{"@every 1d", 86400},
		{"@every 90m", 5400},
		{"@every 007s", 7},
		{"@every 4294967296s", 1 << 32},
		{"@every 49710d", 49710 * 86400},
		{"@every 4294967297s", 0}, // beyond MaxEveryS
		{"@every 49711d", 0},      // beyond MaxEveryS
		{"@every 99999999999999999999999s", 0},
		{"@every 0s", 0},
		{"@every 0d", 0},
		{"@every -1m", 0},
		{"@every +1m", 0},
		{"@every 1.5h", 0},
		{"@every 1e3s", 0},
		{"@every 30", 0}, // missing unit
		{"@every s", 0},  // missing number
		{"@every 5w", 0},
		{"@every 5M", 0},
		{"@every 5ms", 0},
		{"@every  5m", 0},
		{"@every 5m ", 0},
		{" @every 5m", 0},
		{"@every\t5m", 0},
		{"@Every 5m", 0},
		{"@every5m", 0},
		{"@every 1h30m", 0},
		{"@every", 0},
		{"", 0},
		{"@daily", 0},
		{"@hourly", 0},
		{"*/5 * * * *", 0},
		{"0 0 * * *", 0},
	} {
		got, err := ParseEvery(c.spec)
		if c.want == 0 {
			if err == nil || !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), strconv.Quote(c.spec)) {
				t.Errorf("ParseEvery(%q) = %d, %v; want an ErrBadSpec naming the spec", c.spec, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseEvery(%q) = %d, %v; want %d", c.spec, got, err, c.want)
		}
	}
}

func TestNextBoundary(t *testing.T) {
	for _, c := range []struct{ now, every, want int64 }{
		{0, 30, 30},  // on a boundary: strictly after
		{29, 30, 30}, //
		{30, 30, 60}, // on a boundary: strictly after
		{31, 30, 60}, //
		{1_700_000_000, 60, 1_700_000_040},
		{1_700_000_040, 60, 1_700_000_100},
		{1_700_000_000, 3600, 1_700_002_800},
		{1_700_000_000, 86400, 1_700_006_400}, // 00:00 UTC
		{1_699_920_000, 86400, 1_700_006_400}, // exactly midnight -> next midnight
		{-1, 30, 0},
		{-30, 30, 0},
		{-31, 30, -30},
		{math.MaxInt64 - 5, 30, math.MaxInt64}, // saturates
	} {
		if got := NextBoundary(c.now, c.every); got != c.want {
			t.Errorf("NextBoundary(%d, %d) = %d, want %d", c.now, c.every, got, c.want)
		}
	}
}

var testStamps = Stamps{VisibilityTimeoutS: 30, MaxAttempts: 3, BackoffBaseS: 2, DeadLetterRetentionS: 100}

// TestTick pins the catch-up rule: every due boundary fires, up to the cap,
// then Next skips to the first boundary strictly after now; a re-tick at
// the same now fires nothing.
func TestTick(t *testing.T) {
	const t0 = 1_000_020 // a multiple of 30 plus 0: 1_000_020 = 33334*30
	for _, c := range []struct {
		name      string
		spec      string
		regAt     int64
		tickAt    int64
		wantFires int
		wantNext  int64
	}{
		{"not due", "@every 30s", t0, t0 + 29, 0, t0 + 30},
		{"registered on a boundary fires at the next", "@every 30s", t0, t0 + 30, 1, t0 + 60},
		{"late tick fires once per due boundary", "@every 30s", t0, t0 + 95, 3, t0 + 120},
		{"exactly 64 due fires all", "@every 30s", t0, t0 + 64*30, 64, t0 + 65*30},
		{"65 due: capped at 64, 65th skipped", "@every 30s", t0, t0 + 65*30, 64, t0 + 66*30},
		{"a day down: capped, skip forward", "@every 1m", t0, t0 + 86400 + 7, 64, NextBoundary(t0+86400+7, 60)},
		{"minutes", "@every 5m", t0, t0 + 600, 2, NextBoundary(t0+600, 300)},
		{"hours", "@every 2h", t0, t0 + 3*7200, 3, NextBoundary(t0+3*7200, 7200)},
		{"days", "@every 1d", t0, t0 + 2*86400, 2, NextBoundary(t0+2*86400, 86400)},
		{"tick before the first boundary after time stepped back", "@every 30s", t0, t0 - 100, 0, t0 + 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := New()
			if err := q.Register(c.regAt, "s", c.spec, "a", []byte("p"), testStamps, FireOpts{Priority: 3, ExpiresS: 50}); err != nil {
				t.Fatal(err)
			}
			fired := q.Tick(c.tickAt)
			if len(fired) != c.wantFires {
				t.Fatalf("fired %d, want %d", len(fired), c.wantFires)
			}
			for _, j := range fired {
				if j.Queue != "a" || string(j.Payload) != "p" || j.Priority != 3 || j.RunAt != c.tickAt ||
					j.ExpiresAt != c.tickAt+50 || j.Stamps != testStamps || j.State != Pending {
					t.Fatalf("fired job %+v", j)
				}
			}
			if next, ok := q.Soonest(); !ok || next != c.wantNext {
				t.Fatalf("next = %d, %v; want %d", next, ok, c.wantNext)
			}
			if again := q.Tick(c.tickAt); len(again) != 0 {
				t.Fatalf("re-tick at the same now fired %d", len(again))
			}
			if p, _, _ := q.Counts("a"); p != c.wantFires {
				t.Fatalf("%d pending jobs, want %d", p, c.wantFires)
			}
		})
	}
}

func TestRegister(t *testing.T) {
	q := New()
	const now = 1_000_010
	bad := []struct {
		name, spec, queue string
		st                Stamps
		fire              FireOpts
		want              error
	}{
		{"s", "@daily5", "a", testStamps, FireOpts{}, ErrBadSpec},
		{"s", "CRON_TZ=Europe/Berlin 0 3 * * *", "a", testStamps, FireOpts{}, ErrBadSpec}, // no rules given
		{"", "@every 1m", "a", testStamps, FireOpts{}, ErrEmptyScheduleName},
		{"s", "@every 1m", "", testStamps, FireOpts{}, ErrEmptyQueueName},
		{"s", "@every 1m", "a", Stamps{MaxAttempts: 1}, FireOpts{}, ErrBadStamps},
		{"s", "@every 1m", "a", Stamps{VisibilityTimeoutS: 1}, FireOpts{}, ErrBadStamps},
		{"s", "@every 1m", "a", testStamps, FireOpts{ExpiresS: -1}, ErrBadOpts},
	}
	for _, c := range bad {
		if err := q.Register(now, c.name, c.spec, c.queue, nil, c.st, c.fire); !errors.Is(err, c.want) {
			t.Errorf("Register(%q, %q, %q, %+v, %+v) = %v, want %v", c.name, c.spec, c.queue, c.st, c.fire, err, c.want)
		}
	}
	if len(q.Schedules()) != 0 {
		t.Fatal("a refused registration left a schedule")
	}
	if err := q.Register(now, "b", "@every 1m", "a", nil, testStamps, FireOpts{}); err != nil {
		t.Fatal(err)
	}
	if err := q.Register(now, "a", "@every 1h", "a", nil, testStamps, FireOpts{}); err != nil {
		t.Fatal(err)
	}
	s := q.Schedules()
	if len(s) != 2 || s[0].Name != "a" || s[1].Name != "b" || s[0].Next != NextBoundary(now, 3600) || s[1].Next != 1_000_020 {
		t.Fatalf("schedules %+v", s)
	}
	// Upsert with the same interval keeps a due boundary...
	if err := q.Register(now+100, "b", "@every 60s", "z", []byte("x"), testStamps, FireOpts{Priority: 1}); err != nil {
		t.Fatal(err)
	}
	s = q.Schedules()
	if s[1].Next != 1_000_020 || s[1].Queue != "z" || s[1].Spec != "@every 60s" || string(s[1].Payload) != "x" {
		t.Fatalf("upsert, same interval: %+v", s[1])
	}
	// ... and a new interval restarts from now.
	if err := q.Register(now+100, "b", "@every 7s", "z", nil, testStamps, FireOpts{}); err != nil {
		t.Fatal(err)
	}
	if s = q.Schedules(); s[1].Next != NextBoundary(now+100, 7) {
		t.Fatalf("upsert, new interval: %+v", s[1])
	}
	if !q.Unregister("a") || q.Unregister("a") || len(q.Schedules()) != 1 {
		t.Fatal("unregister")
	}
	if !q.Unregister("b") {
		t.Fatal("unregister b")
	}
	if _, ok := q.Soonest(); ok {
		t.Fatal("Soonest with no schedules")
	}
}
