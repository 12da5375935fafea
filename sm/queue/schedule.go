package queue

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// SchedulerMaxCatchupFires caps how many due boundaries of one @every
// schedule a single Tick fires (seed 000, ADR-009 §4); the rest are
// skipped. A cron schedule fires once for all its missed slots (Tick).
const SchedulerMaxCatchupFires = 64

// MaxEveryS is the longest interval ParseEvery accepts (about 136 years).
const MaxEveryS = 1 << 32

// Never is the Next of a cron schedule with no slot within five years of
// the last computation (robfig/cron's search horizon), such as "0 0 29 2
// *" after 2096: it fires no more.
const Never = math.MaxInt64

// Scheduler errors.
var (
	ErrBadSpec           = errors.New(`queue: bad schedule spec (want "@every <n>s|m|h|d" with n >= 1, or a five-field cron expression or @hourly/@daily/@weekly/@monthly/@yearly, optionally after "CRON_TZ=<zone> ")`)
	ErrEmptyScheduleName = errors.New("queue: empty schedule name")
)

// FireOpts are the options of the jobs a schedule fires.
type FireOpts struct {
	Priority int32
	ExpiresS int64 // lifetime of a fired job in seconds; 0 = never; >= 0
}

// Schedule is a registered schedule.
type Schedule struct {
	Name    string
	Spec    string // "@every <n>s|m|h|d", or cron: "[CRON_TZ=<zone> ]<5 fields or @descriptor>"
	Queue   string
	Payload []byte // nil when empty
	Stamps  Stamps
	Fire    FireOpts
	Next    int64 // the next boundary to fire, Unix seconds (Never: none)
	// Zone is the TZif rules of the zone a cron spec names (nil for none:
	// UTC), resolved once by the primary that logged the registration
	// (package tzdb) and carried with the schedule, so that every replica
	// and every replay computes the same fire times.
	Zone []byte
}

type schedule struct {
	Schedule
	rule Rule
}

func (s *schedule) copySchedule() Schedule {
	c := s.Schedule
	c.Payload = bytes.Clone(c.Payload)
	c.Zone = bytes.Clone(c.Zone)
	return c
}

// Rule is a parsed spec: an @every interval or a cron expression in a
// zone. The zero Rule is not valid.
type Rule struct {
	every int64              // seconds, > 0 for @every; 0 for cron
	cron  *cron.SpecSchedule // cron only; its Location is never time.Local
}

// Every is the interval of an @every rule in seconds; 0 for cron.
func (r Rule) Every() int64 { return r.every }

// Next is the first fire time strictly after now: the next epoch-aligned
// boundary (NextBoundary) of an @every rule; for cron the next minute the
// expression matches in its zone (robfig/cron's SpecSchedule.Next), or
// Never when none falls within its five-year search horizon.
func (r Rule) Next(now int64) int64 {
	if r.every > 0 {
		return NextBoundary(now, r.every)
	}
	t := r.cron.Next(time.Unix(now, 0).In(time.UTC))
	if t.IsZero() {
		return Never
	}
	return t.Unix()
}

// SpecZone splits a cron spec's zone prefix, "CRON_TZ=<zone> " or
// "TZ=<zone> " (robfig/cron's forms), from the expression: the zone name
// ("" for none) and the rest. The primary resolves the name (tzdb.Lookup)
// and passes its rules to ParseSpec.
func SpecZone(spec string) (zone, rest string) {
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if after, ok := strings.CutPrefix(spec, p); ok {
			zone, rest, _ = strings.Cut(after, " ")
			return zone, rest
		}
	}
	return "", spec
}

// cronEpoch is where ParseSpec looks for a cron expression's first slot:
// one with none within five years of it ("0 0 30 2 *") never fires and
// is refused. A fixed time, so that validity never depends on the clock.
var cronEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ParseSpec is the one validation of a schedule spec: registration live
// and on replay, and a snapshot's schedules, all call it. It accepts
// "@every <n><unit>" (ParseEvery), or a standard cron expression - five
// fields (minute hour day-of-month month day-of-week) or a descriptor
// (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly) - in
// UTC, or after "CRON_TZ=<zone> " (or "TZ=<zone> ") in that zone, whose
// TZif rules are zone (which must be empty without a zone prefix). It
// never reads the host's time zone files or the clock: robfig/cron parses
// the expression without its zone prefix (with it the library would call
// time.LoadLocation) and gets the location built from zone. Errors wrap
// ErrBadSpec and name the spec.
func ParseSpec(spec string, zone []byte) (Rule, error) {
	bad := func(why string, args ...any) (Rule, error) {
		return Rule{}, fmt.Errorf("%w: %q: %s", ErrBadSpec, spec, fmt.Sprintf(why, args...))
	}
	if strings.HasPrefix(spec, "@every") {
		if len(zone) > 0 {
			return bad("an @every spec takes no time zone")
		}
		every, err := ParseEvery(spec)
		if err != nil {
			return Rule{}, err
		}
		return Rule{every: every}, nil
	}
	name, expr := SpecZone(spec)
	loc := time.UTC
	switch {
	case name == "" && expr != spec:
		return bad("empty time zone name")
	case name == "" && len(zone) > 0:
		return bad("time zone rules given for a spec that names no zone")
	case name != "" && len(zone) == 0:
		return bad("no rules for time zone %q", name)
	case name != "":
		l, err := time.LoadLocationFromTZData(name, zone)
		if err != nil {
			return bad("time zone %q: %v", name, err)
		}
		loc = l
	}
	if expr == "" || strings.TrimSpace(expr) != expr || strings.HasPrefix(expr, "@every") ||
		strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return bad("want a five-field cron expression or a descriptor after the zone")
	}
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return bad("%v", err)
	}
	cs, ok := s.(*cron.SpecSchedule)
	if !ok { // ParseStandard's other kind is @every, taken above
		return bad("not a cron expression")
	}
	cs.Location = loc
	r := Rule{cron: cs}
	if cs.Next(cronEpoch).IsZero() {
		return bad("it matches no date")
	}
	return r, nil
}

// ParseEvery parses an interval spec: "@every <n><unit>" with a single space, n
// a positive decimal integer and unit one of s, m, h, d. It returns the
// interval in seconds (at most MaxEveryS). Anything else - a cron string,
// "@daily", "@every 1.5h", "@every 0s", "@every -1m", a missing unit - is an
// error wrapping ErrBadSpec (ParseSpec takes the cron forms).
func ParseEvery(spec string) (int64, error) {
	bad := func() (int64, error) { return 0, fmt.Errorf("%w: %q", ErrBadSpec, spec) }
	const prefix = "@every "
	if len(spec) < len(prefix)+2 || spec[:len(prefix)] != prefix {
		return bad()
	}
	digits, unit := spec[len(prefix):len(spec)-1], spec[len(spec)-1]
	var mult int64
	switch unit {
	case 's':
		mult = 1
	case 'm':
		mult = 60
	case 'h':
		mult = 3600
	case 'd':
		mult = 86400
	default:
		return bad()
	}
	var n int64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return bad()
		}
		n = n*10 + int64(c-'0')
		if n > MaxEveryS {
			return bad()
		}
	}
	if n == 0 || n*mult > MaxEveryS {
		return bad()
	}
	return n * mult, nil
}

// NextBoundary returns the first boundary strictly after now of an interval
// of every seconds. Boundaries are the multiples of every counted from the
// Unix epoch (0), so "@every 1h" fires on the hour and "@every 1d" at 00:00
// UTC, whatever the registration time, and a restarted controller computes
// the same boundaries. It saturates at math.MaxInt64.
func NextBoundary(now, every int64) int64 {
	b := now / every * every // truncates towards zero
	if b > now {             // negative now with a remainder
		b -= every
	}
	if b > math.MaxInt64-every {
		return math.MaxInt64
	}
	return b + every
}

func (q *Queues) findSchedule(name string) (int, bool) {
	i := sort.Search(len(q.scheds), func(i int) bool { return q.scheds[i].Name >= name })
	return i, i < len(q.scheds) && q.scheds[i].Name == name
}

// Register is RegisterZone for a spec that names no time zone.
func (q *Queues) Register(now int64, name, spec, queue string, payload []byte, st Stamps, fire FireOpts) error {
	return q.RegisterZone(now, name, spec, nil, queue, payload, st, fire)
}

// RegisterZone creates or replaces (upsert) schedule name, which fires a
// job with payload, stamps st and options fire into queue at every fire
// time of spec (ParseSpec, with zone the TZif rules of the zone a cron
// spec names). A new schedule, or one whose rule changes, next fires at
// the first fire time strictly after now (Rule.Next); re-registering with
// the same rule (the same @every interval, or the same cron spec and zone
// rules) keeps the pending fire time, so a registration repeated at every
// start of the controller neither loses nor doubles a due fire.
func (q *Queues) RegisterZone(now int64, name, spec string, zone []byte, queue string, payload []byte, st Stamps, fire FireOpts) error {
	rule, err := ParseSpec(spec, zone)
	switch {
	case err != nil:
		return err
	case name == "":
		return ErrEmptyScheduleName
	case queue == "":
		return ErrEmptyQueueName
	case !st.valid():
		return ErrBadStamps
	case fire.ExpiresS < 0:
		return ErrBadOpts
	}
	var p, z []byte
	if len(payload) > 0 {
		p = bytes.Clone(payload)
	}
	if len(zone) > 0 {
		z = bytes.Clone(zone)
	}
	s := &schedule{
		Schedule: Schedule{Name: name, Spec: spec, Queue: queue, Payload: p, Stamps: st, Fire: fire,
			Next: rule.Next(now), Zone: z},
		rule: rule,
	}
	i, found := q.findSchedule(name)
	if found {
		if o := q.scheds[i]; sameRule(o, s) {
			s.Next = o.Next
		}
		q.scheds[i] = s
		return nil
	}
	q.scheds = append(q.scheds, nil)
	copy(q.scheds[i+1:], q.scheds[i:])
	q.scheds[i] = s
	return nil
}

// sameRule: a and b fire at the same times.
func sameRule(a, b *schedule) bool {
	if a.rule.every > 0 || b.rule.every > 0 {
		return a.rule.every == b.rule.every
	}
	return a.Spec == b.Spec && bytes.Equal(a.Zone, b.Zone)
}

// Unregister removes schedule name; false if there is none.
func (q *Queues) Unregister(name string) bool {
	i, found := q.findSchedule(name)
	if !found {
		return false
	}
	q.scheds = append(q.scheds[:i], q.scheds[i+1:]...)
	return true
}

// Tick fires the due schedules, in name order. A schedule is due when Next
// <= now. An @every schedule fires once per due boundary (Next,
// Next+every, ... <= now), at most SchedulerMaxCatchupFires times; a cron
// schedule fires once however many of its slots have passed since Next
// (after downtime or a failover, one job for the missed interval, as a
// Kubernetes CronJob or systemd's Persistent= timer does; the job is
// enqueued at the tick's time, which its WAL record holds). Next then
// advances to the first fire time strictly after now in the same step:
// boundaries missed beyond the cap are skipped, never fired later, and a
// second Tick at the same now fires nothing. Each fire enqueues one job
// through the Enqueue path (ready at now, Priority and Expires from the
// schedule's FireOpts). The fired jobs are returned in order.
func (q *Queues) Tick(now int64) []Job {
	var out []Job
	for _, s := range q.scheds {
		if s.Next > now {
			continue
		}
		fires := uint64(1)
		if s.rule.every > 0 {
			fires = SchedulerMaxCatchupFires
			// now >= Next, so the unsigned difference is exact.
			if d := (uint64(now) - uint64(s.Next)) / uint64(s.rule.every); d < fires {
				fires = d + 1
			}
		}
		for range fires {
			// The jobs share the schedule's payload (never written).
			e := q.enqueue(now, s.Queue, s.Payload, s.Stamps, EnqueueOpts{Priority: s.Fire.Priority, Expires: s.Fire.ExpiresS})
			out = append(out, e.copyJob())
		}
		s.Next = s.rule.Next(now)
	}
	return out
}

// Soonest returns the earliest Next of all schedules; false if there are
// none.
func (q *Queues) Soonest() (int64, bool) {
	if len(q.scheds) == 0 {
		return 0, false
	}
	m := q.scheds[0].Next
	for _, s := range q.scheds[1:] {
		m = min(m, s.Next)
	}
	return m, true
}

// Schedules returns every schedule, sorted by name.
func (q *Queues) Schedules() []Schedule {
	out := make([]Schedule, len(q.scheds))
	for i, s := range q.scheds {
		out[i] = s.copySchedule()
	}
	return out
}
