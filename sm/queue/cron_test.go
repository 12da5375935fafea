package queue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/xce-hpc/xce/sm/tzdb"
)

func zoneRules(t testing.TB, name string) ([]byte, *time.Location) {
	t.Helper()
	z, err := tzdb.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocationFromTZData(name, z)
	if err != nil {
		t.Fatal(err)
	}
	return z, loc
}

// TestParseSpec: the spec grammar, good and bad; every refusal wraps
// ErrBadSpec and names the spec.
func TestParseSpec(t *testing.T) {
	berlin, _ := zoneRules(t, "Europe/Berlin")
	utc := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC).Unix() // a Wednesday
	for _, c := range []struct {
		spec string
		zone []byte
		want int64 // the next fire after utc; 0 = refused
	}{
		{"@every 1m", nil, NextBoundary(utc, 60)},
		{"* * * * *", nil, time.Date(2026, 5, 6, 7, 9, 0, 0, time.UTC).Unix()},
		{"*/15 * * * *", nil, time.Date(2026, 5, 6, 7, 15, 0, 0, time.UTC).Unix()},
		{"0 3 * * *", nil, time.Date(2026, 5, 7, 3, 0, 0, 0, time.UTC).Unix()},
		{"0 9-17 * * 1-5", nil, time.Date(2026, 5, 6, 9, 0, 0, 0, time.UTC).Unix()},
		{"0 0 1 JAN *", nil, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Unix()},
		{"0 0 * * SUN", nil, time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC).Unix()},
		{"0 0 29 2 *", nil, time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC).Unix()},
		{"@hourly", nil, time.Date(2026, 5, 6, 8, 0, 0, 0, time.UTC).Unix()},
		{"@daily", nil, time.Date(2026, 5, 7, 0, 0, 0, 0, time.UTC).Unix()},
		{"@midnight", nil, time.Date(2026, 5, 7, 0, 0, 0, 0, time.UTC).Unix()},
		{"@weekly", nil, time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC).Unix()},
		{"@monthly", nil, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC).Unix()},
		{"@yearly", nil, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Unix()},
		{"@annually", nil, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Unix()},
		{"CRON_TZ=Europe/Berlin 0 3 * * *", berlin, time.Date(2026, 5, 7, 1, 0, 0, 0, time.UTC).Unix()}, // 03:00 CEST
		{"TZ=Europe/Berlin 0 3 * * *", berlin, time.Date(2026, 5, 7, 1, 0, 0, 0, time.UTC).Unix()},
		{"CRON_TZ=Europe/Berlin @daily", berlin, time.Date(2026, 5, 6, 22, 0, 0, 0, time.UTC).Unix()},
		// Refused.
		{"", nil, 0},
		{"* * * *", nil, 0},           // four fields
		{"0 * * * * *", nil, 0},       // six (seconds) fields
		{"60 * * * *", nil, 0},        // minute out of range
		{"* 24 * * *", nil, 0},        // hour out of range
		{"* * 0 * *", nil, 0},         // day 0
		{"* * * 13 *", nil, 0},        // month 13
		{"* * * * 8", nil, 0},         // weekday 8
		{"*/0 * * * *", nil, 0},       // step 0
		{"5-1 * * * *", nil, 0},       // backwards range
		{"a * * * *", nil, 0},         // not a number
		{"0 0 30 2 *", nil, 0},        // no such date
		{"0 0 31 4,6,9,11 *", nil, 0}, // no such date
		{"@daily5", nil, 0},
		{"@reboot", nil, 0},
		{" 0 3 * * *", nil, 0},
		{"0 3 * * * ", nil, 0},
		{"@every 0s", nil, 0},
		{"@every 5m", berlin, 0},                        // an interval takes no zone
		{"CRON_TZ=Europe/Berlin @every 5m", berlin, 0},  // nor after a prefix
		{"CRON_TZ=Europe/Berlin 0 3 * * *", nil, 0},     // no rules
		{"0 3 * * *", berlin, 0},                        // rules, no zone
		{"CRON_TZ= 0 3 * * *", nil, 0},                  // empty zone name
		{"CRON_TZ=Europe/Berlin", berlin, 0},            // no expression
		{"CRON_TZ=Europe/Berlin  0 3 * * *", berlin, 0}, // two spaces
		{"CRON_TZ=Europe/Berlin TZ=UTC 0 3 * * *", berlin, 0},
		{"CRON_TZ=Europe/Berlin 0 3 * * *", []byte("not TZif"), 0},
	} {
		r, err := ParseSpec(c.spec, c.zone)
		if c.want == 0 {
			if err == nil || !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), strconv.Quote(c.spec)) {
				t.Errorf("ParseSpec(%q) = %+v, %v; want an ErrBadSpec naming the spec", c.spec, r, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", c.spec, err)
			continue
		}
		if got := r.Next(utc); got != c.want {
			t.Errorf("ParseSpec(%q).Next(%v) = %v, want %v", c.spec, time.Unix(utc, 0).UTC(), time.Unix(got, 0).UTC(), time.Unix(c.want, 0).UTC())
		}
	}
}

// TestCronDST pins robfig/cron's behaviour across Berlin's clock changes
// in 2026: on the spring-forward day (29 March, 02:00 -> 03:00) a 02:30
// slot does not exist and does not fire (the next fire is 30 March
// 02:30); a 03:00 slot fires as usual. On the fall-back day (25 October,
// 03:00 -> 02:00) 02:30 happens twice and fires twice, an hour apart.
func TestCronDST(t *testing.T) {
	z, loc := zoneRules(t, "Europe/Berlin")
	at := func(y int, m time.Month, d, h, min int, zone string) int64 {
		tm := time.Date(y, m, d, h, min, 0, 0, loc)
		if name, _ := tm.Zone(); name != zone {
			t.Fatalf("%v is in %s, want %s", tm, name, zone)
		}
		return tm.Unix()
	}
	chain := func(spec string, from int64, want ...int64) {
		t.Helper()
		zone := z
		if !strings.HasPrefix(spec, "CRON_TZ=") {
			zone = nil
		}
		r, err := ParseSpec(spec, zone)
		if err != nil {
			t.Fatal(err)
		}
		n := from
		for i, w := range want {
			if n = r.Next(n); n != w {
				t.Fatalf("%s: fire %d = %v, want %v", spec, i, time.Unix(n, 0).In(loc), time.Unix(w, 0).In(loc))
			}
		}
	}
	chain("CRON_TZ=Europe/Berlin 30 2 * * *", at(2026, 3, 28, 12, 0, "CET"),
		at(2026, 3, 30, 2, 30, "CEST"), at(2026, 3, 31, 2, 30, "CEST"))
	chain("CRON_TZ=Europe/Berlin 0 3 * * *", at(2026, 3, 28, 12, 0, "CET"),
		at(2026, 3, 29, 3, 0, "CEST"), at(2026, 3, 30, 3, 0, "CEST"))
	first := time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC).Unix() // 02:30 CEST (time.Date may pick either)
	chain("CRON_TZ=Europe/Berlin 30 2 * * *", at(2026, 10, 24, 12, 0, "CEST"),
		first, first+3600, at(2026, 10, 26, 2, 30, "CET"))
	// The same expression in UTC ignores Berlin's clock.
	chain("30 2 * * *", time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC).Unix(),
		time.Date(2026, 3, 29, 2, 30, 0, 0, time.UTC).Unix())
}

// TestCronTick: a cron schedule fires once for any number of missed
// slots, at the tick's time, then waits for the first slot after it; the
// same spec re-registered keeps its pending slot, another spec or zone
// starts afresh.
func TestCronTick(t *testing.T) {
	z, _ := zoneRules(t, "Europe/Berlin")
	t0 := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC).Unix()
	q := New()
	if err := q.Register(t0, "m", "*/5 * * * *", "a", []byte("p"), testStamps, FireOpts{Priority: 2}); err != nil {
		t.Fatal(err)
	}
	slot := time.Date(2026, 5, 6, 7, 10, 0, 0, time.UTC).Unix()
	if s := q.Schedules(); s[0].Next != slot {
		t.Fatalf("next %v, want %v", time.Unix(s[0].Next, 0).UTC(), time.Unix(slot, 0).UTC())
	}
	if fired := q.Tick(slot - 1); len(fired) != 0 {
		t.Fatalf("fired %d before the slot", len(fired))
	}
	// Three hours down: 36 slots missed, one job.
	down := slot + 3*3600 + 17
	fired := q.Tick(down)
	if len(fired) != 1 || fired[0].RunAt != down || fired[0].Priority != 2 || string(fired[0].Payload) != "p" {
		t.Fatalf("after downtime fired %+v, want one job at %d", fired, down)
	}
	next := NextBoundary(down, 300) // */5 in UTC is the 5-minute boundary
	if s := q.Schedules(); s[0].Next != next {
		t.Fatalf("next %d, want %d", s[0].Next, next)
	}
	if again := q.Tick(down); len(again) != 0 {
		t.Fatal("a second tick at the same time fired")
	}
	// Re-registering the same spec keeps the pending slot...
	if err := q.Register(next-10, "m", "*/5 * * * *", "b", nil, testStamps, FireOpts{}); err != nil {
		t.Fatal(err)
	}
	if s := q.Schedules(); s[0].Next != next || s[0].Queue != "b" {
		t.Fatalf("same spec re-registered: %+v", s[0])
	}
	// ... another zone is another rule.
	if err := q.RegisterZone(next-10, "m", "CRON_TZ=Europe/Berlin 0 3 * * *", z, "b", nil, testStamps, FireOpts{}); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 5, 7, 1, 0, 0, 0, time.UTC).Unix()
	if s := q.Schedules(); s[0].Next != want || string(s[0].Zone) != string(z) {
		t.Fatalf("zoned: next %v, want %v", time.Unix(s[0].Next, 0).UTC(), time.Unix(want, 0).UTC())
	}
	// The rules travel in the snapshot and come back as the same rule.
	back, err := Import(q.Export())
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Tick(want); len(got) != 1 || back.Schedules()[0].Next != want+86400 {
		t.Fatalf("imported zoned schedule: fired %d, next %d", len(got), back.Schedules()[0].Next)
	}
}

// cronField draws one field of a cron expression within [lo, hi].
func cronField(t *rapid.T, name string, lo, hi int) string {
	v := func(l string) int { return rapid.IntRange(lo, hi).Draw(t, name+l) }
	switch rapid.IntRange(0, 5).Draw(t, name+"_kind") {
	case 0:
		return "*"
	case 1:
		return fmt.Sprintf("*/%d", rapid.IntRange(1, hi-lo+1).Draw(t, name+"_step"))
	case 2:
		a, b := v("_a"), v("_b")
		return fmt.Sprintf("%d-%d", min(a, b), max(a, b))
	case 3:
		return fmt.Sprintf("%d,%d", v("_a"), v("_b"))
	default:
		return strconv.Itoa(v(""))
	}
}

// TestCronProperties: for random expressions and times, the next fire is
// strictly after now, on a whole minute, the first minute the independent
// model (model_test.go, written from crontab(5)) finds in UTC; in a zone
// it matches the expression in local time; and the same spec parsed again
// gives the same fire times.
func TestCronProperties(t *testing.T) {
	zones := map[string][]byte{}
	locs := map[string]*time.Location{}
	for _, n := range []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu"} {
		zones[n], locs[n] = zoneRules(t, n)
	}
	names := []string{"", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu"}
	rapid.Check(t, func(t *rapid.T) {
		expr := strings.Join([]string{cronField(t, "minute", 0, 59), cronField(t, "hour", 0, 23),
			cronField(t, "dom", 1, 28), cronField(t, "month", 1, 12), cronField(t, "dow", 0, 6)}, " ")
		zone := rapid.SampledFrom(names).Draw(t, "zone")
		spec, loc := expr, time.UTC
		if zone != "" {
			spec, loc = "CRON_TZ="+zone+" "+expr, locs[zone]
		}
		r, err := ParseSpec(spec, zones[zone])
		if err != nil {
			t.Fatalf("ParseSpec(%q): %v", spec, err)
		}
		m, ok := parseModelCron(expr)
		if !ok {
			t.Fatalf("the model refuses %q", expr)
		}
		now := rapid.Int64Range(946684800, 4102444800).Draw(t, "now") // 2000 to 2100
		next := r.Next(now)
		if next <= now || next%60 != 0 {
			t.Fatalf("%q: Next(%d) = %d: not a whole minute strictly after now", spec, now, next)
		}
		lt := time.Unix(next, 0).In(loc)
		if !m.dayMatches(lt) || !m.hour[lt.Hour()] || !m.minute[lt.Minute()] {
			t.Fatalf("%q: Next(%d) = %v does not match the expression", spec, now, lt)
		}
		if zone == "" {
			if want := m.next(now); next != want {
				t.Fatalf("%q: Next(%v) = %v, the model %v", spec, time.Unix(now, 0).UTC(), lt, time.Unix(want, 0).UTC())
			}
		}
		again, err := ParseSpec(spec, zones[zone])
		if err != nil || again.Next(now) != next || again.Next(next) != r.Next(next) {
			t.Fatalf("%q: not deterministic", spec)
		}
	})
}
