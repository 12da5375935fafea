package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// Planned switchovers (sm/switchover.go) under the schedule's faults: an
// admin asks whoever is primary to hand over, now and then to itself, to
// a node that is no member, or asks a standby (each refused). The checker:
//   - SW1: a switchover answered OK names the primary the cluster elected
//     in the term the answer gives (the election checker's record).
//   - SW2: from the moment a node takes a switchover until it answers it,
//     it acknowledges no write that reached it meanwhile: the handing-over
//     primary holds them (answering them only once the handover ended).
// Beyond these, the run's every other checker (no acknowledged job lost,
// one primary per term, linearizable histories) runs across the
// switchovers, and the liveness phase needs a primary afterwards.

// switchovers is the world's state for them.
type switchovers struct {
	rng  *rand.Rand // its own stream: the rest of a schedule keeps its draws
	sent int
	// asked, per node: the switchover it was given and has not answered,
	// in that incarnation, and the writes that reached it since.
	asked map[int]*swAsked
}

type swAsked struct {
	id      uint64
	inc     int
	arrived map[uint64]bool
}

// drawSwitchovers gives a third of the quorum-mode schedules up to four
// switchovers.
func drawSwitchovers(s *Scenario, d drawer) {
	if s.SeedMode || s.Nodes < 2 || !d.coin(0.35, "switchovers") {
		return
	}
	s.Switchovers = 1 + d.intn(4, "switchover-count")
	for k := 0; k < s.Switchovers; k++ {
		s.PrimaryFaults = append(s.PrimaryFaults, PrimaryFault{At: ms(d.intn(int(s.Safety/time.Millisecond), "switchover-at")), Kind: TargetSwitchover})
	}
}

// switchoverString is the scenario's summary of them (nothing when none,
// so schedules without switchovers trace as before).
func (s Scenario) switchoverString() string {
	if s.Switchovers == 0 {
		return ""
	}
	return fmt.Sprintf(" switchovers=%d", s.Switchovers)
}

// askSwitchover sends primary p (mostly) a switchover.
func (w *World) askSwitchover(p int) {
	sc := &w.swc
	if sc.rng == nil {
		sc.rng = rand.New(rand.NewPCG(w.sc.Seed, 0x5717c4))
		sc.asked = map[int]*swAsked{}
	}
	sc.sent++
	n := len(w.nodes)
	to, at := -1, p
	switch r := sc.rng.IntN(16); {
	case r < 4: // the primary picks
	case r == 4:
		to = p // refused: already the primary
	case r == 5:
		to = n + sc.rng.IntN(3) // refused: no member
	case r == 6:
		at = (p + 1 + sc.rng.IntN(n-1)) % n // refused: not primary
	default:
		to = (p + 1 + sc.rng.IntN(n-1)) % n
	}
	nd := w.nodes[at]
	if !nd.up {
		return
	}
	id := uint64(sc.sent)
	w.tr.line(w.now, at, fmt.Sprintf("admin: switchover #%d to n%d", id, to))
	if a := sc.asked[at]; a == nil || a.inc != nd.inc {
		sc.asked[at] = &swAsked{id: id, inc: nd.inc, arrived: map[uint64]bool{}}
	}
	w.deliver(at, sm.Switchover{ID: id, To: to, Peer: "admin"})
}

// noteArrival: a client's call reaches nd (before nd steps on it).
func (w *World) noteArrival(nd *simNode, c *call) {
	if a := w.swc.asked[nd.id]; a != nil && a.inc == nd.inc && !c.req.Kind.ReadOnly() {
		a.arrived[c.id] = true
	}
}

// judgeHeldWrite is SW2, on every reply a node emits.
func (w *World) judgeHeldWrite(nd *simNode, r sm.Reply) {
	a := w.swc.asked[nd.id]
	if a == nil || a.inc != nd.inc || r.Status != sm.StatusOK || !a.arrived[r.ID] {
		return
	}
	c := w.wl.calls[r.ID-1]
	w.violate("SW2", "n%d acknowledged #%d (%s), which reached it after switchover #%d and before its answer: a handing-over primary took a write", nd.id, r.ID, describeReq(c.req), a.id)
}

// noteSwitchover traces an answered switchover and judges it (SW1).
func (w *World) noteSwitchover(nd *simNode, x sm.SwitchoverReply) {
	w.tr.line(w.now, nd.id, fmt.Sprintf("admin: switchover #%d answered %s (primary n%d, term %d) %s", x.ID, x.Outcome, x.Primary, x.Term, x.Error))
	w.rep.Switchovers[min(int(x.Outcome), len(w.rep.Switchovers)-1)]++
	if a := w.swc.asked[nd.id]; a != nil && a.id == x.ID {
		delete(w.swc.asked, nd.id)
	}
	if x.Outcome != sm.SwitchoverOK || !w.strict() {
		return
	}
	if p, ok := w.ec.termPrimary[x.Term]; !ok || p != x.Primary {
		w.violate("SW1", "n%d answered switchover #%d OK naming n%d primary of term %d, but the cluster elected %s in that term", nd.id, x.ID, x.Primary, x.Term, termPrimaryName(p, ok))
	}
}

func termPrimaryName(p int, ok bool) string {
	if !ok {
		return "nobody"
	}
	return fmt.Sprintf("n%d", p)
}
