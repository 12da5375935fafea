package sim

import (
	"fmt"
	"sort"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// TestClusterLinCatchesLoss: the partitioned porcupine check of the
// cluster world passes a clean demo run, and fails the same history once
// the final state loses an acknowledged job or brings back an acked one.
func TestClusterLinCatchesLoss(t *testing.T) {
	w := NewWorld(Demo(1), nil)
	if _, f := w.Run(); f != nil {
		t.Fatal(f.Error())
	}
	end := w.now
	if res := porcupine.CheckOperations(linModel(), w.linHistory(w.final, end)); !res {
		t.Fatal("the clean demo history does not linearize")
	}
	// Drop a job whose enqueue was acknowledged and that nothing removed.
	x := w.excuses()
	lost := -1
	for i, j := range w.final {
		if !x.excused(j) && !x.removable[j.ID] {
			lost = i
			break
		}
	}
	if lost < 0 {
		t.Fatal("no job in the final state to lose")
	}
	dropped := append(append([]queue.Job(nil), w.final[:lost]...), w.final[lost+1:]...)
	if porcupine.CheckOperations(linModel(), w.linHistory(dropped, end)) {
		t.Fatalf("losing job %d (%s) from the final state went unnoticed", w.final[lost].ID, w.final[lost].Payload)
	}
	// Bring back a job whose ack was acknowledged, as pending.
	var back *queue.Job
	for _, c := range w.wl.calls {
		if c.out == outOK && c.req.Kind == sm.JobAck && c.rep.OK {
			if key, ok := w.wl.led.idKey[c.req.Handle.ID]; ok {
				back = &queue.Job{ID: c.req.Handle.ID, Payload: []byte(key), State: queue.Pending, Claims: c.req.Handle.Attempt, Attempts: c.req.Handle.Attempt}
				break
			}
		}
	}
	if back == nil {
		t.Fatal("no acknowledged ack in the demo history")
	}
	if porcupine.CheckOperations(linModel(), w.linHistory(append(append([]queue.Job(nil), w.final...), *back), end)) {
		t.Fatalf("job %d (%s) alive again after its acknowledged ack went unnoticed", back.ID, back.Payload)
	}
}

// linModelPowerset is the model as it was before linSet: porcupine's power
// set construction over a step giving every next state.
func linModelPowerset() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: linModel().Partition,
		Init:      func() []any { return []any{linJob{expires: -1}} },
		Step: func(state, input, output any) []any {
			in, out := input.(*linIn), *output.(*linOut)
			var next []any
			var buf [3]linJob
			for _, s := range spontaneous(state.(linJob), in.meta, buf[:0]) {
				for _, n := range linStepPowerset(s, *in, out) {
					next = append(next, n)
				}
			}
			return next
		},
		Equal: func(a, b any) bool { return a.(linJob) == b.(linJob) },
	}
	return nm.ToModel()
}

// TestLinSetIsPowerset: the linSet model steps to the same sets of states,
// in the same order, as the power set construction it replaced, along
// every partition of the histories of 60 schedules (and of the demo's
// with a job lost from the final state), and both give every history the
// same verdict.
func TestLinSetIsPowerset(t *testing.T) {
	fast, slow := linModel(), linModelPowerset()
	steps, checked := 0, 0
	compare := func(name string, hist []porcupine.Operation) {
		if got, want := porcupine.CheckOperations(fast, hist), porcupine.CheckOperations(slow, hist); got != want {
			t.Fatalf("%s: linSet model says %v, the power set model %v", name, got, want)
		}
		checked++
		for _, part := range fast.Partition(hist) {
			part = append([]porcupine.Operation(nil), part...)
			sort.SliceStable(part, func(i, j int) bool { return part[i].Call < part[j].Call })
			fs, ss := fast.Init(), slow.Init()
			for _, op := range part {
				fok, fn := fast.Step(fs, op.Input, op.Output)
				sok, sn := slow.Step(ss, op.Input, op.Output)
				got, _ := fn.(linSet) // nil when !fok
				want, _ := sn.([]any)
				if fok != sok || len(got) != len(want) {
					t.Fatalf("%s: %s: linSet %v %v, power set %v %v", name, fast.DescribeOperation(op.Input, op.Output), fok, got, sok, want)
				}
				for i := range got {
					if got[i] != want[i].(linJob) {
						t.Fatalf("%s: %s: state %d is %v, the power set's %v", name, fast.DescribeOperation(op.Input, op.Output), i, got[i], want[i])
					}
				}
				steps++
				if fok {
					fs, ss = fn, sn
				}
			}
		}
	}
	for seed := uint64(1); seed <= 60; seed++ {
		w := NewWorld(Generate(seed), nil)
		w.Run()
		if w.final == nil || !w.strict() {
			continue
		}
		compare(fmt.Sprintf("seed %d", seed), w.linHistory(w.final, w.now))
		if len(w.final) > 0 {
			compare(fmt.Sprintf("seed %d without its first final job", seed), w.linHistory(w.final[1:], w.now))
		}
	}
	if checked < 20 || steps < 1000 {
		t.Fatalf("only %d histories and %d steps compared", checked, steps)
	}
	t.Logf("%d histories, %d steps: the same states and verdicts", checked, steps)
}

// linStepPowerset is the model's step as it was before linSet (kept to
// check linSet against): one operation on one job's state: every possible next state
// (none: the output is impossible from s).
func linStepPowerset(s linJob, in linIn, out linOut) []linJob {
	m := in.meta
	same := []linJob{s}
	either := func(alt ...linJob) []linJob {
		if out.known {
			return alt
		}
		return append(alt, s)
	}
	switch in.kind {
	case sm.JobEnqueue, sm.JobEnqueueBatch:
		if s.st != lAbsent {
			if m.keyed {
				return same // a repeat of a keyed submit: the job is the first's
			}
			return nil
		}
		return either(linJob{st: lPending, expires: -1})
	case sm.JobClaim:
		claimable := (s.st == lPending || s.st == lProcessing && s.attempts < m.maxAtt && (s.expires < 0 || !out.known || s.expires <= out.at)) &&
			(m.pin == "" || m.pin == in.host)
		next := linJob{st: lProcessing, claims: s.claims + 1, attempts: s.attempts + 1, expires: -1}
		switch {
		case out.known && in.hit != nil:
			if !claimable || in.hit.Claims != next.claims || in.hit.Attempts != next.attempts {
				return nil
			}
			return []linJob{learn(next, in.hit)}
		case out.known || !claimable:
			return same
		default:
			return []linJob{s, next}
		}
	case sm.JobAck, sm.JobAckBatch, sm.JobHeartbeat, sm.JobRetry, sm.JobFail:
		v := s.valid(in.h, out)
		var applied linJob
		switch in.kind {
		case sm.JobAck, sm.JobAckBatch:
			applied = linJob{st: lGone}
		case sm.JobHeartbeat:
			applied = s
			if s.expires >= 0 && out.known {
				applied.expires = max(s.expires, out.at+m.vt)
			} else {
				applied.expires = -1
			}
		case sm.JobRetry:
			applied = linJob{st: lPending, claims: s.claims, attempts: s.attempts, expires: -1, claim: s.claim}
			if s.attempts >= m.maxAtt {
				applied.st = lDead
			}
		case sm.JobFail:
			applied = linJob{st: lDead, claims: s.claims, attempts: s.attempts, expires: -1, claim: s.claim}
		}
		switch {
		case !out.known && v == vNo:
			return same
		case !out.known:
			return []linJob{s, applied}
		case out.ok && v != vNo:
			return []linJob{applied}
		case !out.ok && v != vYes:
			return same
		}
		return nil
	case sm.JobCancel:
		return onlyIfPowerset(s, out, s.st == lPending, linJob{st: lGone})
	case sm.JobRedrive:
		return onlyIfPowerset(s, out, s.st == lDead, linJob{st: lPending, claims: s.claims, expires: -1, claim: s.claim})
	case sm.JobGet, sm.JobList, 0:
		if !out.known {
			return same // a read nobody saw the answer to constrains nothing
		}
		if in.hit == nil {
			if s.st == lAbsent || s.st == lGone {
				return same
			}
			return nil
		}
		if !shows(s, in.hit) {
			return nil
		}
		return []linJob{learn(s, in.hit)}
	}
	return same
}

// onlyIfPowerset is an operation that succeeds exactly when cond holds.
func onlyIfPowerset(s linJob, out linOut, cond bool, applied linJob) []linJob {
	switch {
	case !out.known && cond:
		return []linJob{s, applied}
	case !out.known, !out.ok && !cond:
		return []linJob{s}
	case out.ok && cond:
		return []linJob{applied}
	}
	return nil
}
