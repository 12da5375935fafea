package queue

import (
	"regexp"
	"sort"
	"strconv"
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
	d := int64(j.Stamps.BackoffBaseS)
	for k := uint32(1); k < j.Attempts && k <= 30; k++ {
		d *= 2
	}
	m.count(j.Queue, func(t *Throughput) *uint64 { return &t.Retried })
	j.State = Pending
	j.RunAt = now + d
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

func (m *model) register(now int64, name, spec, queue string, payload []byte, st Stamps, fire FireOpts) bool {
	every, ok := modelEvery(spec)
	if !ok || name == "" || queue == "" || st.MaxAttempts == 0 || st.VisibilityTimeoutS == 0 || fire.ExpiresS < 0 {
		return false
	}
	s := Schedule{Name: name, Spec: spec, Queue: queue, Payload: cloneBytes(payload), Stamps: st, Fire: fire,
		Next: modelNext(now, every)}
	for i := range m.scheds {
		if m.scheds[i].Name == name {
			if old, _ := modelEvery(m.scheds[i].Spec); old == every {
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

func (m *model) tick(now int64) []Job {
	m.sortScheds()
	var out []Job
	for i := range m.scheds {
		s := &m.scheds[i]
		every, _ := modelEvery(s.Spec)
		fires := 0
		for b := s.Next; b <= now && fires < 64; b += every {
			j, _ := m.enqueue(now, s.Queue, s.Payload, s.Stamps, EnqueueOpts{Priority: s.Fire.Priority, Expires: s.Fire.ExpiresS})
			out = append(out, j)
			fires++
		}
		if s.Next <= now {
			s.Next = modelNext(now, every)
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
