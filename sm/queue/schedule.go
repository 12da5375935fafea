package queue

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
)

// SchedulerMaxCatchupFires caps how many due boundaries of one schedule a
// single Tick fires (seed 000, ADR-009 §4); the rest are skipped.
const SchedulerMaxCatchupFires = 64

// MaxEveryS is the longest interval ParseEvery accepts (about 136 years).
const MaxEveryS = 1 << 32

// Scheduler errors.
var (
	ErrBadSpec           = errors.New(`queue: bad schedule spec (want "@every <n>s|m|h|d", n >= 1)`)
	ErrEmptyScheduleName = errors.New("queue: empty schedule name")
)

// FireOpts are the options of the jobs a schedule fires.
type FireOpts struct {
	Priority int32
	ExpiresS int64 // lifetime of a fired job in seconds; 0 = never; >= 0
}

// Schedule is a registered "@every" schedule.
type Schedule struct {
	Name    string
	Spec    string // "@every <n>s|m|h|d"
	Queue   string
	Payload []byte // nil when empty
	Stamps  Stamps
	Fire    FireOpts
	Next    int64 // the next boundary to fire, Unix seconds
}

type schedule struct {
	Schedule
	every int64 // seconds, from Spec
}

func (s *schedule) copySchedule() Schedule {
	c := s.Schedule
	c.Payload = bytes.Clone(c.Payload)
	return c
}

// ParseEvery parses the whole spec grammar of the scheduler (seed 000: the
// cron machinery is not ported): "@every <n><unit>" with a single space, n
// a positive decimal integer and unit one of s, m, h, d. It returns the
// interval in seconds (at most MaxEveryS). Anything else - a cron string,
// "@daily", "@every 1.5h", "@every 0s", "@every -1m", a missing unit - is an
// error wrapping ErrBadSpec.
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

// Register creates or replaces (upsert) schedule name, which fires a job
// with payload, stamps st and options fire into queue at every boundary of
// spec. A new schedule, or one whose interval changes, next fires at the
// first boundary strictly after now (NextBoundary); re-registering with the
// same interval keeps the pending boundary, so a registration repeated at
// every start of the controller neither loses nor doubles a due fire.
func (q *Queues) Register(now int64, name, spec, queue string, payload []byte, st Stamps, fire FireOpts) error {
	every, err := ParseEvery(spec)
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
	var p []byte
	if len(payload) > 0 {
		p = bytes.Clone(payload)
	}
	s := &schedule{
		Schedule: Schedule{Name: name, Spec: spec, Queue: queue, Payload: p, Stamps: st, Fire: fire,
			Next: NextBoundary(now, every)},
		every: every,
	}
	i, found := q.findSchedule(name)
	if found {
		if q.scheds[i].every == every {
			s.Next = q.scheds[i].Next
		}
		q.scheds[i] = s
		return nil
	}
	q.scheds = append(q.scheds, nil)
	copy(q.scheds[i+1:], q.scheds[i:])
	q.scheds[i] = s
	return nil
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
// <= now; it fires once per due boundary (Next, Next+every, ... <= now), at
// most SchedulerMaxCatchupFires times, and Next advances to the first
// boundary strictly after now in the same step: boundaries missed beyond
// the cap are skipped, never fired later, and a second Tick at the same now
// fires nothing. Each fire enqueues one job through the Enqueue path (ready
// at now, Priority and Expires from the schedule's FireOpts). The fired
// jobs are returned in order.
func (q *Queues) Tick(now int64) []Job {
	var out []Job
	for _, s := range q.scheds {
		if s.Next > now {
			continue
		}
		fires := uint64(SchedulerMaxCatchupFires)
		// now >= Next, so the unsigned difference is exact.
		if d := (uint64(now) - uint64(s.Next)) / uint64(s.every); d < fires {
			fires = d + 1
		}
		for range fires {
			// The jobs share the schedule's payload (never written).
			e := q.enqueue(now, s.Queue, s.Payload, s.Stamps, EnqueueOpts{Priority: s.Fire.Priority, Expires: s.Fire.ExpiresS})
			out = append(out, e.copyJob())
		}
		s.Next = NextBoundary(now, s.every)
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
