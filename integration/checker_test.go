package integration

// The checker of a client history (history_test.go) against the read-back
// of the healed cluster: acknowledged jobs lost, ids given to two
// payloads, handles handed out or acknowledged twice, and linearizability
// of each job's history with porcupine (a register per payload).

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// readJob is one job of the final read-back.
type readJob struct {
	id      uint64
	queue   string
	claims  uint32
	payload string
}

// readBack is the healed cluster's job state, read through its primary.
type readBack struct {
	primary   string
	term      uint64
	call, ret int64 // history times of the read
	jobs      map[string][]readJob
	total     int
}

type faultReport struct {
	enqueues, acked, failed, unknown int
	claims, claimedJobs              int
	acksOK, acksRefused, acksUnknown int
	gets, getsAnswered               int
	unknownApplied, unknownAbsent    int
	present                          int // jobs in the read-back
	lost                             []op
	lostByPeer                       map[string]int
	idChanged                        []string
	duplicated                       []string
	keyed, deduplicated              int // keyed enqueues; of them, answered with an earlier attempt's job
	failedApplied                    []string
	idReuse                          map[uint64][]string
	handleReuse                      map[string][]string
	ackedTwice                       map[string]int
	keys                             int
	illegalWrites, illegalWithGets   []string // payloads whose history is not linearizable
	unknownLin                       int      // partitions porcupine could not decide in time
}

// check compares history h with the read-back rb.
func check(h *history, rb *readBack) *faultReport {
	ops := h.snapshot()
	r := &faultReport{lostByPeer: map[string]int{}, idReuse: map[uint64][]string{}, handleReuse: map[string][]string{}, ackedTwice: map[string]int{}}
	r.present = rb.total
	idPayloads := map[uint64]map[string]bool{}
	noteID := func(id uint64, payload string) {
		if idPayloads[id] == nil {
			idPayloads[id] = map[string]bool{}
		}
		idPayloads[id][payload] = true
	}
	possiblyDone := map[string]bool{}
	handles := map[string][]string{}
	ackOK := map[string]int{}
	for _, o := range ops {
		switch o.kind {
		case opEnqueue:
			r.enqueues++
			switch o.out {
			case outOK:
				r.acked++
				noteID(o.id, o.payload)
			case outFail:
				r.failed++
			default:
				r.unknown++
			}
		case opClaim:
			r.claims++
			for _, j := range o.jobs {
				r.claimedJobs++
				noteID(j.id, j.payload)
				hk := handleKey(j.id, j.attempt, j.stamp)
				handles[hk] = append(handles[hk], fmt.Sprintf("%s (worker %d via %s)", j.payload, o.client, o.peer))
			}
		case opAck:
			hk := handleKey(o.id, o.attempt, o.stamp)
			switch o.out {
			case outOK:
				r.acksOK++
				ackOK[hk]++
				possiblyDone[o.payload] = true
			case outFail:
				r.acksRefused++
			default:
				r.acksUnknown++
				possiblyDone[o.payload] = true
			}
		case opGet:
			r.gets++
			if o.out == outOK {
				r.getsAnswered++
				if o.found {
					noteID(o.id, o.got)
				}
			}
		}
	}
	for _, js := range rb.jobs {
		for _, j := range js {
			noteID(j.id, j.payload)
		}
	}
	for id, ps := range idPayloads {
		if len(ps) > 1 {
			var l []string
			for p := range ps {
				l = append(l, p)
			}
			sort.Strings(l)
			r.idReuse[id] = l
		}
	}
	for hk, l := range handles {
		if len(l) > 1 {
			r.handleReuse[hk] = l
		}
	}
	for hk, n := range ackOK {
		if n > 1 {
			r.ackedTwice[hk] = n
		}
	}
	for _, o := range ops {
		if o.kind != opEnqueue {
			continue
		}
		js := rb.jobs[o.payload]
		switch {
		case o.out == outOK && len(js) == 0 && !possiblyDone[o.payload]:
			r.lost = append(r.lost, o)
			r.lostByPeer[o.peer]++
		case o.out == outOK && len(js) > 0 && !slices.ContainsFunc(js, func(j readJob) bool { return j.id == o.id }):
			r.idChanged = append(r.idChanged, fmt.Sprintf("%s acked as id %d, read back as id %d", o.payload, o.id, js[0].id))
		case o.out == outUnknown && len(js) > 0:
			r.unknownApplied++
		case o.out == outUnknown:
			r.unknownAbsent++
		case o.out == outFail && len(js) > 0:
			r.failedApplied = append(r.failedApplied, fmt.Sprintf("%s (failed: %s) read back as id %d", o.payload, o.err, js[0].id))
		}
		if len(js) > 1 {
			what := "applied"
			if o.keyed {
				what = "a keyed submit (the key is the payload) applied"
			}
			r.duplicated = append(r.duplicated, fmt.Sprintf("%s %s %d times", o.payload, what, len(js)))
		}
		if o.keyed {
			r.keyed++
			if o.dedup {
				r.deduplicated++
			}
		}
	}
	sort.Slice(r.lost, func(i, j int) bool { return r.lost[i].ret < r.lost[j].ret })
	r.linearizability(ops, rb)
	return r
}

// ---- porcupine: a register per payload ----

type regState uint8

const (
	regAbsent  regState = iota
	regPresent          // with id
	regAnyID            // an unknown enqueue took effect: some id
	regDone             // acknowledged by a worker (deleted)
)

type jobReg struct {
	st regState
	id uint64
}

type linIn struct {
	kind opKind // opEnqueue, opAck (handle id), opGet (by id), opRead (by payload)
	id   uint64
}

type linOut struct {
	out   outcome
	found bool
	id    uint64
}

var jobModel = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{jobReg{}} },
	Step: func(state, input, output interface{}) []interface{} {
		s, in, out := state.(jobReg), input.(linIn), output.(linOut)
		same := []interface{}{s}
		switch in.kind {
		case opEnqueue:
			switch {
			case out.out == outFail:
				return same
			case s.st != regAbsent: // a payload is submitted once
				if out.out == outUnknown {
					return same
				}
				return nil
			case out.out == outOK:
				return []interface{}{jobReg{st: regPresent, id: out.id}}
			default:
				return []interface{}{s, jobReg{st: regAnyID}}
			}
		case opAck:
			holds := s.st == regAnyID || s.st == regPresent && s.id == in.id
			switch out.out {
			case outOK:
				if holds {
					return []interface{}{jobReg{st: regDone}}
				}
				return nil
			case outUnknown:
				if holds {
					return []interface{}{s, jobReg{st: regDone}}
				}
				return same
			default:
				return same
			}
		case opGet: // found: the job with id in.id has this payload
			if out.found {
				switch {
				case s.st == regPresent && s.id == in.id:
					return same
				case s.st == regAnyID:
					return []interface{}{jobReg{st: regPresent, id: in.id}}
				}
				return nil
			}
			if s.st == regPresent && s.id == in.id {
				return nil
			}
			return same
		default: // opRead: the job of this payload, by payload
			if out.found {
				switch {
				case s.st == regPresent && s.id == out.id:
					return same
				case s.st == regAnyID:
					return []interface{}{jobReg{st: regPresent, id: out.id}}
				}
				return nil
			}
			if s.st == regAbsent || s.st == regDone {
				return same
			}
			return nil
		}
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(linIn), output.(linOut)
		return fmt.Sprintf("%v(%d) -> %v found=%v id=%d", in.kind, in.id, out.out, out.found, out.id)
	},
}

func (r *faultReport) linearizability(ops []op, rb *readBack) {
	type keyOps struct{ writes, gets []porcupine.Operation }
	keys := map[string]*keyOps{}
	add := func(payload string, o porcupine.Operation, get bool) {
		k := keys[payload]
		if k == nil {
			k = &keyOps{}
			keys[payload] = k
		}
		if get {
			k.gets = append(k.gets, o)
		} else {
			k.writes = append(k.writes, o)
		}
	}
	ret := func(o op) int64 {
		if o.out == outUnknown {
			return math.MaxInt64 // may take effect at any time after its call
		}
		return o.ret
	}
	for _, o := range ops {
		switch o.kind {
		case opEnqueue:
			add(o.payload, porcupine.Operation{ClientId: o.client, Input: linIn{kind: opEnqueue}, Call: o.call, Output: linOut{out: o.out, id: o.id}, Return: ret(o)}, false)
		case opAck:
			add(o.payload, porcupine.Operation{ClientId: o.client, Input: linIn{kind: opAck, id: o.id}, Call: o.call, Output: linOut{out: o.out}, Return: ret(o)}, false)
		case opClaim:
			for _, j := range o.jobs { // a claim is a mutation: it saw the job at that id
				add(j.payload, porcupine.Operation{ClientId: o.client, Input: linIn{kind: opRead}, Call: o.call, Output: linOut{found: true, id: j.id}, Return: o.ret}, false)
			}
		case opGet:
			if o.out == outOK {
				add(o.payload, porcupine.Operation{ClientId: o.client, Input: linIn{kind: opGet, id: o.id}, Call: o.call, Output: linOut{found: o.found && o.got == o.payload}, Return: o.ret}, true)
			}
		}
	}
	for payload, k := range keys {
		out := linOut{}
		if js := rb.jobs[payload]; len(js) > 0 {
			out = linOut{found: true, id: js[0].id}
		}
		k.writes = append(k.writes, porcupine.Operation{ClientId: -1, Input: linIn{kind: opRead}, Call: rb.call, Output: out, Return: rb.ret})
	}
	model := jobModel.ToModel()
	r.keys = len(keys)
	for payload, k := range keys {
		res := porcupine.CheckOperationsTimeout(model, k.writes, 10*time.Second)
		switch res {
		case porcupine.Illegal:
			r.illegalWrites = append(r.illegalWrites, payload)
			continue
		case porcupine.Unknown:
			r.unknownLin++
			continue
		}
		if len(k.gets) == 0 {
			continue
		}
		switch porcupine.CheckOperationsTimeout(model, append(slices.Clone(k.writes), k.gets...), 10*time.Second) {
		case porcupine.Illegal:
			r.illegalWithGets = append(r.illegalWithGets, payload)
		case porcupine.Unknown:
			r.unknownLin++
		}
	}
	sort.Strings(r.illegalWrites)
	sort.Strings(r.illegalWithGets)
}

// ---- reporting ----

func (r *faultReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "enqueues %d: acked %d, failed %d, unknown %d (of the unknown: %d applied, %d not); claims %d (%d jobs); worker acks ok %d, refused %d, unknown %d; gets %d (%d answered); jobs read back %d\n",
		r.enqueues, r.acked, r.failed, r.unknown, r.unknownApplied, r.unknownAbsent, r.claims, r.claimedJobs, r.acksOK, r.acksRefused, r.acksUnknown, r.gets, r.getsAnswered, r.present)
	fmt.Fprintf(&b, "ACKNOWLEDGED JOBS LOST: %d of %d", len(r.lost), r.acked)
	if len(r.lost) > 0 {
		peers := make([]string, 0, len(r.lostByPeer))
		for p, n := range r.lostByPeer {
			peers = append(peers, fmt.Sprintf("%d acked by %s", n, p))
		}
		sort.Strings(peers)
		fmt.Fprintf(&b, " (%s; acked between %v and %v)", strings.Join(peers, ", "),
			time.Duration(r.lost[0].ret).Round(time.Millisecond), time.Duration(r.lost[len(r.lost)-1].ret).Round(time.Millisecond))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "acked jobs read back under another id: %d; payloads applied twice: %d (keyed enqueues %d, %d of them answered with an earlier attempt's job); failed enqueues applied: %d\n",
		len(r.idChanged), len(r.duplicated), r.keyed, r.deduplicated, len(r.failedApplied))
	fmt.Fprintf(&b, "job ids given to two payloads: %d; handles handed out twice: %d; handles acked ok twice: %d\n", len(r.idReuse), len(r.handleReuse), len(r.ackedTwice))
	fmt.Fprintf(&b, "porcupine (register per payload, %d keys): non-linearizable writes %d; with in-run gets: %d more (stale reads, reported only); undecided %d",
		r.keys, len(r.illegalWrites), len(r.illegalWithGets), r.unknownLin)
	return b.String()
}

// examples lists up to n of the violations for a failure message.
func (r *faultReport) examples(n int) string {
	var b strings.Builder
	for i, o := range r.lost {
		if i == n {
			fmt.Fprintf(&b, "  ... %d more lost\n", len(r.lost)-n)
			break
		}
		fmt.Fprintf(&b, "  lost: %s id %d acked by %s at %v\n", o.payload, o.id, o.peer, time.Duration(o.ret).Round(time.Millisecond))
	}
	list := func(what string, l []string) {
		for i, s := range l {
			if i == n {
				fmt.Fprintf(&b, "  ... %d more %s\n", len(l)-n, what)
				return
			}
			fmt.Fprintf(&b, "  %s: %s\n", what, s)
		}
	}
	list("id changed", r.idChanged)
	list("duplicated", r.duplicated)
	list("failed but applied", r.failedApplied)
	ids := make([]uint64, 0, len(r.idReuse))
	for id := range r.idReuse {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var reuse []string
	for _, id := range ids {
		reuse = append(reuse, fmt.Sprintf("id %d: %s", id, strings.Join(r.idReuse[id], ", ")))
	}
	list("id reused", reuse)
	var hs []string
	for hk, l := range r.handleReuse {
		hs = append(hs, fmt.Sprintf("%s: %s", hk, strings.Join(l, "; ")))
	}
	sort.Strings(hs)
	list("handle handed out twice", hs)
	var at []string
	for hk, k := range r.ackedTwice {
		at = append(at, fmt.Sprintf("%s acked ok %d times", hk, k))
	}
	sort.Strings(at)
	list("handle acked twice", at)
	list("not linearizable", r.illegalWrites)
	list("stale read (reported only)", r.illegalWithGets)
	return b.String()
}

// assertSafe fails t for every violation of the job contract: an
// acknowledged job lost, read back under another id or applied twice, a
// failed enqueue applied, an id given to two payloads, a handle handed
// out or acknowledged twice, a non-linearizable job history. Stale
// in-run reads are reported, not asserted (the quorum change does not
// promise read leases).
func (r *faultReport) assertSafe(t testing.TB) {
	t.Helper()
	bad := len(r.lost) + len(r.idChanged) + len(r.duplicated) + len(r.failedApplied) + len(r.idReuse) + len(r.handleReuse) + len(r.ackedTwice) + len(r.illegalWrites)
	if bad > 0 {
		t.Errorf("the job contract was broken:\n%s\n%s", r, r.examples(5))
	}
	if r.unknownLin > 0 {
		t.Errorf("porcupine could not decide %d job histories", r.unknownLin)
	}
}
