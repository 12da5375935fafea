package queue

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// model is the reference: the queue contract written as directly as
// possible, independently of the implementation - one slice of jobs in ID
// order, linear scans, a full sort per claim, a boundary loop per tick. It
// shares only the public types (and the pinned strings) with the package.
// Times in the tests stay far from int64 limits, so it does no saturation.
type model struct {
	jobs    []Job // ascending ID
	scheds  []Schedule
	nextID  uint64
	nextSeq uint64
	// through counts each operation where the contract says it happens,
	// by queue (every path to dead goes through die).
	through map[string]Throughput
}

func newModel() *model { return &model{nextID: 1, nextSeq: 1, through: map[string]Throughput{}} }

// count adds one to the counter f picks of queue.
func (m *model) count(queue string, f func(*Throughput) *uint64) {
	t := m.through[queue]
	*f(&t)++
	m.through[queue] = t
}

// oldestPending is OldestPending by a scan: the least RunAt of the
// queue's pending jobs.
func (m *model) oldestPending(queue string) (int64, bool) {
	var at int64
	ok := false
	for _, j := range m.jobs {
		if j.Queue == queue && j.State == Pending && (!ok || j.RunAt < at) {
			at, ok = j.RunAt, true
		}
	}
	return at, ok
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

func (m *model) find(id uint64) int {
	for i := range m.jobs {
		if m.jobs[i].ID == id {
			return i
		}
	}
	return -1
}

func (m *model) removeAt(i int) { m.jobs = append(m.jobs[:i], m.jobs[i+1:]...) }

func (m *model) enqueue(now int64, queue string, payload []byte, st Stamps, o EnqueueOpts) (Job, error) {
	if queue == "" {
		return Job{}, ErrEmptyQueueName
	}
	if st.MaxAttempts == 0 || st.VisibilityTimeoutS == 0 {
		return Job{}, ErrBadStamps
	}
	if o.Delay < 0 || o.Expires < 0 {
		return Job{}, ErrBadOpts
	}
	j := Job{ID: m.nextID, Queue: queue, Payload: cloneBytes(payload), Priority: o.Priority,
		State: Pending, Seq: m.nextSeq, EnqueuedAt: now, Stamps: st, Pin: o.Host, Resource: o.Resource}
	switch {
	case o.Delay > 0:
		j.RunAt = now + o.Delay
	case o.RunAt > now:
		j.RunAt = o.RunAt
	default:
		j.RunAt = now
	}
	if o.Expires > 0 {
		j.ExpiresAt = now + o.Expires
	}
	m.nextID++
	m.nextSeq++
	m.jobs = append(m.jobs, j)
	m.count(queue, func(t *Throughput) *uint64 { return &t.Enqueued })
	j.Payload = cloneBytes(j.Payload)
	return j, nil
}

func zombie(j Job, now int64) bool {
	return j.State == Processing && j.ClaimExpiresAt <= now && j.Attempts >= j.Stamps.MaxAttempts
}

func expired(j Job, now int64) bool { return j.ExpiresAt != 0 && j.ExpiresAt <= now }

func (m *model) die(j *Job, now int64, msg string) {
	m.count(j.Queue, func(t *Throughput) *uint64 { return &t.Dead })
	j.State = Dead
	j.LastError = msg
	j.DiedAt = now
}

func (m *model) claim(now int64, queue, host string, max int, at ClaimStamp) []Job {
	if host == "" || max <= 0 || at.LSN == 0 {
		return nil
	}
	for i := range m.jobs {
		if m.jobs[i].Queue == queue && zombie(m.jobs[i], now) {
			m.die(&m.jobs[i], now, "max attempts exceeded")
		}
	}
	type cand struct {
		i     int
		ready int64
	}
	var cs []cand
	for i, j := range m.jobs {
		if j.Queue != queue || (j.Pin != "" && j.Pin != host) || expired(j, now) {
			continue
		}
		if j.State == Pending && j.RunAt <= now {
			cs = append(cs, cand{i, j.RunAt})
		}
		if j.State == Processing && j.ClaimExpiresAt <= now {
			cs = append(cs, cand{i, j.ClaimExpiresAt})
		}
	}
	sort.Slice(cs, func(a, b int) bool {
		ja, jb := m.jobs[cs[a].i], m.jobs[cs[b].i]
		if ja.Priority != jb.Priority {
			return ja.Priority > jb.Priority
		}
		if cs[a].ready != cs[b].ready {
			return cs[a].ready < cs[b].ready
		}
		return ja.Seq < jb.Seq
	})
	var out []Job
	for _, c := range cs {
		if len(out) == max {
			break
		}
		j := &m.jobs[c.i]
		j.State = Processing
		j.Attempts++
		j.Claims++
		j.Claim = at
		j.Host = host
		j.ClaimedAt = now
		j.ClaimExpiresAt = now + int64(j.Stamps.VisibilityTimeoutS)
		m.count(queue, func(t *Throughput) *uint64 { return &t.Claimed })
		c := *j
		c.Payload = cloneBytes(c.Payload)
		out = append(out, c)
	}
	return out
}

// advanceNextID: IDs continue from floor if that is higher.
func (m *model) advanceNextID(floor uint64) {
	if floor > m.nextID {
		m.nextID = floor
	}
}

// modelFrom is the model of a snapshot's state (a history rolled back to
// an earlier point).
func modelFrom(s Snapshot) *model {
	m := &model{nextID: s.NextID, nextSeq: s.NextSeq, through: map[string]Throughput{}}
	for _, j := range s.Jobs {
		j.Payload = cloneBytes(j.Payload)
		m.jobs = append(m.jobs, j)
	}
	for _, sc := range s.Schedules {
		sc.Payload = cloneBytes(sc.Payload)
		m.scheds = append(m.scheds, sc)
	}
	return m
}

// valid is the validity predicate: the handle names the job's latest claim
// (its claim count and the stamp of the record that made it), still
// processing and not lapsed.
func (m *model) valid(now int64, h Handle) int {
	i := m.find(h.ID)
	if i < 0 {
		return -1
	}
	j := m.jobs[i]
	if j.State != Processing || h != (Handle{j.ID, j.Claims, j.Claim}) || now >= j.ClaimExpiresAt {
		return -1
	}
	return i
}

func (m *model) ack(now int64, h Handle) bool {
	i := m.valid(now, h)
	if i < 0 {
		return false
	}
	m.count(m.jobs[i].Queue, func(t *Throughput) *uint64 { return &t.Acked })
	m.removeAt(i)
	return true
}

func (m *model) heartbeat(now int64, h Handle) bool {
	i := m.valid(now, h)
	if i < 0 {
		return false
	}
	j := &m.jobs[i]
	j.ClaimExpiresAt = max(j.ClaimExpiresAt, now+int64(j.Stamps.VisibilityTimeoutS))
	return true
}

// modelBackoff: the ceiling doubles base per attempt after the first (at
// most 30 times); the delay is the ceiling's upper half plus a draw: the
// SplitMix64 finaliser (Steele, Lea and Flood) of id + attempts * the
// golden-ratio constant, modulo the half's width plus one.
func modelBackoff(base, attempts uint32, id uint64) int64 {
	ceiling := int64(base)
	for k := uint32(1); k < attempts && k <= 30; k++ {
		ceiling *= 2
	}
	z := id + 0x9E3779B97F4A7C15*uint64(attempts)
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	z ^= z >> 31
	width := uint64(ceiling/2) + 1
	return ceiling - ceiling/2 + int64(z%width)
}

// retryAfter: a delay within 0..86400 s; 0 is the backoff, else exact.
func (m *model) retryAfter(now int64, h Handle, msg string, delay int64) bool {
	if delay < 0 || delay > 86400 {
		return false
	}
	if !m.retry(now, h, msg) {
		return false
	}
	if j := &m.jobs[m.find(h.ID)]; delay > 0 && j.State == Pending {
		j.RunAt = now + delay
	}
	return true
}

func (m *model) retry(now int64, h Handle, msg string) bool {
	i := m.valid(now, h)
	if i < 0 {
		return false
	}
	j := &m.jobs[i]
	if j.Attempts >= j.Stamps.MaxAttempts {
		m.die(j, now, "max attempts exceeded")
		return true
	}
	m.count(j.Queue, func(t *Throughput) *uint64 { return &t.Retried })
	j.State = Pending
	j.RunAt = now + modelBackoff(j.Stamps.BackoffBaseS, j.Attempts, j.ID)
	j.LastError = msg
	j.Host = ""
	j.ClaimExpiresAt = 0
	return true
}

func (m *model) fail(now int64, h Handle, msg string) bool {
	i := m.valid(now, h)
	if i < 0 {
		return false
	}
	if msg == "" {
		msg = "failed"
	}
	m.die(&m.jobs[i], now, msg)
	return true
}

func (m *model) cancel(id uint64) bool {
	i := m.find(id)
	if i < 0 || m.jobs[i].State != Pending {
		return false
	}
	m.removeAt(i)
	return true
}

func (m *model) sweep(now int64) (moved, deleted int) {
	for i := range m.jobs {
		if zombie(m.jobs[i], now) {
			m.die(&m.jobs[i], now, "max attempts exceeded")
			moved++
		}
	}
	for i := range m.jobs {
		if m.jobs[i].State != Dead && expired(m.jobs[i], now) {
			m.die(&m.jobs[i], now, "expired")
			moved++
		}
	}
	kept := m.jobs[:0]
	for _, j := range m.jobs {
		r := int64(j.Stamps.DeadLetterRetentionS)
		if j.State == Dead && r != 0 && j.DiedAt+r <= now {
			deleted++
			continue
		}
		kept = append(kept, j)
	}
	m.jobs = kept
	return moved, deleted
}

func (m *model) redrive(now int64, id uint64) bool {
	i := m.find(id)
	if i < 0 || m.jobs[i].State != Dead {
		return false
	}
	j := &m.jobs[i]
	if j.ExpiresAt != 0 {
		j.ExpiresAt = now + (j.ExpiresAt - j.EnqueuedAt)
	}
	j.State, j.Attempts, j.RunAt = Pending, 0, now
	j.LastError, j.DiedAt, j.Host, j.ClaimedAt, j.ClaimExpiresAt = "", 0, "", 0, 0
	return true
}

func (m *model) get(id uint64) (Job, bool) {
	i := m.find(id)
	if i < 0 {
		return Job{}, false
	}
	j := m.jobs[i]
	j.Payload = cloneBytes(j.Payload)
	return j, true
}

func (m *model) counts(queue string) (p, pr, d int) {
	for _, j := range m.jobs {
		if queue != "" && j.Queue != queue {
			continue
		}
		switch j.State {
		case Pending:
			p++
		case Processing:
			pr++
		case Dead:
			d++
		}
	}
	return p, pr, d
}

var modelSpec = regexp.MustCompile(`^@every ([0-9]+)([smhd])$`)

func modelEvery(spec string) (int64, bool) {
	g := modelSpec.FindStringSubmatch(spec)
	if g == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(g[1], 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	n *= map[string]int64{"s": 1, "m": 60, "h": 3600, "d": 86400}[g[2]]
	return n, n <= 1<<32
}

// modelNext: the epoch-aligned boundary strictly after now.
func modelNext(now, every int64) int64 {
	mod := ((now % every) + every) % every
	return now - mod + every
}

// modelCron is a UTC cron expression as sets of the values each field
// matches; written from the crontab(5) rules, not from robfig/cron.
type modelCron struct {
	minute, hour, dom, month, dow map[int]bool
	domStar, dowStar              bool
}

var modelDescriptors = map[string]string{"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}

// modelField parses one field: "*", "*/n", "n", "a-b" or a comma list of
// those, within [lo, hi].
func modelField(f string, lo, hi int) (map[int]bool, bool) {
	out := map[int]bool{}
	for _, part := range strings.Split(f, ",") {
		step, from, to := 1, lo, hi
		if base, st, ok := strings.Cut(part, "/"); ok {
			n, err := strconv.Atoi(st)
			if err != nil || n < 1 {
				return nil, false
			}
			step, part = n, base
		}
		if part != "*" {
			a, b, isRange := strings.Cut(part, "-")
			x, err := strconv.Atoi(a)
			if err != nil {
				return nil, false
			}
			from, to = x, x
			if isRange {
				if to, err = strconv.Atoi(b); err != nil {
					return nil, false
				}
			}
		}
		if from < lo || to > hi || from > to {
			return nil, false
		}
		for v := from; v <= to; v += step {
			out[v] = true
		}
	}
	return out, true
}

func parseModelCron(spec string) (*modelCron, bool) {
	if d, ok := modelDescriptors[spec]; ok {
		spec = d
	}
	f := strings.Split(spec, " ")
	if len(f) != 5 {
		return nil, false
	}
	star := func(f string) bool { return f == "*" || f == "*/1" || f == "?" }
	c := &modelCron{domStar: star(f[2]), dowStar: star(f[4])}
	var ok [5]bool
	c.minute, ok[0] = modelField(f[0], 0, 59)
	c.hour, ok[1] = modelField(f[1], 0, 23)
	c.dom, ok[2] = modelField(f[2], 1, 31)
	c.month, ok[3] = modelField(f[3], 1, 12)
	c.dow, ok[4] = modelField(f[4], 0, 6)
	if !ok[0] || !ok[1] || !ok[2] || !ok[3] || !ok[4] {
		return nil, false
	}
	// A date must exist: look through the days of 2000-2004.
	for d := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() < 2005; d = d.AddDate(0, 0, 1) {
		if c.dayMatches(d) {
			return c, true
		}
	}
	return nil, false
}

// dayMatches: day of month and day of week are ANDed when either is
// unrestricted ("*", "*/1" or "?"), else ORed: crontab(5)'s rule as the
// spec documents it (docs/client-api.md; Vixie cron also counts "*/2" as
// unrestricted, robfig/cron does not).
func (c *modelCron) dayMatches(t time.Time) bool {
	if !c.month[int(t.Month())] {
		return false
	}
	dom, dow := c.dom[t.Day()], c.dow[int(t.Weekday())]
	if c.domStar || c.dowStar {
		return dom && dow
	}
	return dom || dow
}

// next: the first whole minute strictly after now that matches, by a scan
// a minute at a time (a day at a time over days that do not match).
func (c *modelCron) next(now int64) int64 {
	t := now - ((now%60)+60)%60 + 60
	for {
		tm := time.Unix(t, 0).UTC()
		if !c.dayMatches(tm) {
			t = time.Date(tm.Year(), tm.Month(), tm.Day()+1, 0, 0, 0, 0, time.UTC).Unix()
			continue
		}
		if c.hour[tm.Hour()] && c.minute[tm.Minute()] {
			return t
		}
		t += 60
	}
}

// modelRule is a spec's rule: an interval, or a cron expression.
func modelRule(spec string) (every int64, c *modelCron, ok bool) {
	if every, ok := modelEvery(spec); ok {
		return every, nil, true
	}
	if strings.HasPrefix(spec, "@every") {
		return 0, nil, false
	}
	c, ok = parseModelCron(spec)
	return 0, c, ok
}

func modelNextOf(spec string, now int64) int64 {
	every, c, _ := modelRule(spec)
	if c != nil {
		return c.next(now)
	}
	return modelNext(now, every)
}

func (m *model) register(now int64, name, spec, queue string, payload []byte, st Stamps, fire FireOpts) bool {
	every, _, ok := modelRule(spec)
	if !ok || name == "" || queue == "" || st.MaxAttempts == 0 || st.VisibilityTimeoutS == 0 || fire.ExpiresS < 0 {
		return false
	}
	s := Schedule{Name: name, Spec: spec, Queue: queue, Payload: cloneBytes(payload), Stamps: st, Fire: fire,
		Next: modelNextOf(spec, now)}
	for i := range m.scheds {
		if m.scheds[i].Name == name {
			old, _, _ := modelRule(m.scheds[i].Spec)
			if every > 0 && old == every || every == 0 && m.scheds[i].Spec == spec {
				s.Next = m.scheds[i].Next
			}
			m.scheds[i] = s
			return true
		}
	}
	m.scheds = append(m.scheds, s)
	return true
}

func (m *model) unregister(name string) bool {
	for i := range m.scheds {
		if m.scheds[i].Name == name {
			m.scheds = append(m.scheds[:i], m.scheds[i+1:]...)
			return true
		}
	}
	return false
}

func (m *model) sortScheds() {
	sort.Slice(m.scheds, func(a, b int) bool { return m.scheds[a].Name < m.scheds[b].Name })
}

// tick: an @every schedule fires once per due boundary (at most 64), a
// cron schedule once however many slots passed.
func (m *model) tick(now int64) []Job {
	m.sortScheds()
	var out []Job
	for i := range m.scheds {
		s := &m.scheds[i]
		every, c, _ := modelRule(s.Spec)
		fires := 0
		for b := s.Next; b <= now && fires < 64 && (c == nil || fires == 0); b += every {
			j, _ := m.enqueue(now, s.Queue, s.Payload, s.Stamps, EnqueueOpts{Priority: s.Fire.Priority, Expires: s.Fire.ExpiresS})
			out = append(out, j)
			fires++
		}
		if s.Next <= now {
			s.Next = modelNextOf(s.Spec, now)
		}
	}
	return out
}

func (m *model) soonest() (int64, bool) {
	if len(m.scheds) == 0 {
		return 0, false
	}
	best := m.scheds[0].Next
	for _, s := range m.scheds {
		best = min(best, s.Next)
	}
	return best, true
}

func (m *model) export() Snapshot {
	m.sortScheds()
	s := Snapshot{Jobs: make([]Job, len(m.jobs)), Schedules: make([]Schedule, len(m.scheds)), NextID: m.nextID, NextSeq: m.nextSeq}
	for i, j := range m.jobs {
		j.Payload = cloneBytes(j.Payload)
		s.Jobs[i] = j
	}
	for i, sc := range m.scheds {
		sc.Payload = cloneBytes(sc.Payload)
		s.Schedules[i] = sc
	}
	return s
}
