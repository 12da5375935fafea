package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/xce-hpc/xce/host/loop"
	"github.com/xce-hpc/xce/sm"
)

// Faults aimed at whoever is primary when they strike (Jepsen's targeted
// nemesis): the rare orders a random target seldom draws — a primary cut
// off while clients write to it, killed or frozen just after it
// acknowledged, the new primary killed as the old one comes back.

// TargetKind is what a targeted fault does to the primary.
type TargetKind uint8

const (
	TargetIsolate TargetKind = iota // cut it off from every peer for Dur
	TargetKill                      // kill -9
	TargetPower                     // kill -9 with power loss
	TargetPause                     // SIGSTOP for Dur
	targetKinds
	// TargetUpgrade: an admin's OP_upgradeConfig (drawn apart: corrupt.go).
	TargetUpgrade = targetKinds
	// TargetSwitchover: an admin's switchover (drawn apart: switchover.go).
	TargetSwitchover = targetKinds + 1
	// TargetClog: every link to and from the primary held for Dur, then
	// delivered, while clients flood it (drawn apart: drawClogs). Unlike
	// an isolation, which drops, what the primary sent meanwhile arrives
	// late, as TCP retransmits after a partition heals: its batches reach
	// standbys that have since followed a newer primary (S10's foreign
	// batches).
	TargetClog = targetKinds + 2
)

func (k TargetKind) String() string {
	return [...]string{"isolate", "kill", "power-loss", "pause", "upgrade", "switchover", "clog"}[k]
}

// drawClogs adds up to four targeted clogs to a fifth of the quorum-mode
// schedules with peers and to half the seed-mode ones (whose standbys
// have no term to refuse a deposed primary's batches by).
func drawClogs(s *Scenario, d drawer) {
	chance := 0.2
	if s.SeedMode {
		chance = 0.5
	}
	if s.Nodes < 2 || !d.coin(chance, "clogs") {
		return
	}
	for k := d.intn(4, "clog-count") + 1; k > 0; k-- {
		s.PrimaryFaults = append(s.PrimaryFaults, PrimaryFault{
			At:   ms(d.intn(int(s.Safety/time.Millisecond), "clog-at")),
			Kind: TargetClog,
			Dur:  ms(1500 + d.intn(3500, "clog-dur")),
		})
	}
}

// PrimaryFault strikes the primary at At.
type PrimaryFault struct {
	At   time.Duration
	Kind TargetKind
	Dur  time.Duration
}

// drawPrimaryFaults adds up to four targeted faults to half the schedules.
func drawPrimaryFaults(s *Scenario, d drawer) {
	if !d.coin(0.5, "targeted") {
		return
	}
	for k := d.intn(4, "targeted-count") + 1; k > 0; k-- {
		s.PrimaryFaults = append(s.PrimaryFaults, PrimaryFault{
			At:   ms(d.intn(int(s.Safety/time.Millisecond), "tf-at")),
			Kind: TargetKind(d.intn(int(targetKinds), "tf-kind")),
			Dur:  ms(200 + d.intn(6000, "tf-dur")),
		})
	}
}

// currentPrimary is the lowest-index live primary, -1 if none.
func (w *World) currentPrimary() int {
	for _, nd := range w.nodes {
		if nd.up && nd.node.Role() == sm.RolePrimary {
			return nd.id
		}
	}
	return -1
}

func (w *World) strikePrimary(f PrimaryFault) {
	if w.liveness {
		return
	}
	p := w.currentPrimary()
	if p < 0 {
		return
	}
	w.tr.line(w.now, p, fmt.Sprintf("nemesis: %s the primary for %v", f.Kind, f.Dur))
	switch f.Kind {
	case TargetIsolate:
		w.applyNetFault(NetFault{At: w.now, Dur: f.Dur, Kind: PartIsolate, A: p, B: p})
		w.floodNode(p, 20+w.wl.rng.IntN(200))
		w.probeReads(p, f.Dur)
	case TargetKill, TargetPower:
		w.kill(p, "nemesis", f.Kind == TargetPower)
	case TargetPause:
		w.pause(p, f.Dur, true) // probed with reads while it is frozen
	case TargetUpgrade:
		w.upgradeConfig(p)
	case TargetSwitchover:
		w.askSwitchover(p)
	case TargetClog:
		for j := 0; j < w.sc.Nodes; j++ {
			if j != p {
				w.net.clog(p, j, w.now+f.Dur)
				w.net.clog(j, p, w.now+f.Dur)
			}
		}
		w.floodNode(p, 20+w.wl.rng.IntN(200))
	}
}

// floodNode sends n enqueues to node p at once from the flooder, the way
// a pool of submitters with many requests in flight would: a cut-off
// primary's log then grows past what the others commit meanwhile.
func (w *World) floodNode(p, n int) {
	wl := w.wl
	nd := w.nodes[p]
	if wl.stopped || !nd.up {
		return
	}
	fl := wl.flood
	for i := 0; i < n; i++ {
		wl.payloads++
		req := sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("p" + strconv.Itoa(wl.payloads))}
		k := &call{id: uint64(len(wl.calls) + 1), client: fl.id, node: p, inc: nd.inc, req: req, sent: w.now}
		wl.calls = append(wl.calls, k)
		fl.pending[k.id] = k
		w.tr.line(w.now, -1, fmt.Sprintf("c%d -> n%d #%d %s", fl.id, p, k.id, describeReq(req)))
		w.push(event{at: w.now + w.linkDelay(), kind: evClientReq, node: p, inc: k.inc, call: k.id})
		w.push(event{at: w.now + clientTimeout, kind: evClientGiveUp, call: k.id})
	}
}

// probeReads sends node p a read every 300 ms while it is cut off or
// frozen (and a little after), from the flooder: a primary cut off from
// its majority must never answer one OK once a newer term holds a
// majority (S4 judged on answers, answers.go) — the order the regular
// clients seldom produce, as their writes to a cut-off primary time out
// and send them elsewhere.
// Each probe is a call whose send time is ahead; its request leaves then.
func (w *World) probeReads(p int, dur time.Duration) {
	wl := w.wl
	nd := w.nodes[p]
	if wl.stopped || !nd.up {
		return
	}
	fl := wl.flood
	// (only within the safety phase: the clients stop before the final
	// restart, and a probe is a request already counted as sent)
	for at := w.now + 300*time.Millisecond; at < w.now+dur+time.Second && at < w.sc.Safety; at += 300 * time.Millisecond {
		req := sm.JobRequest{Kind: sm.JobList, Queue: "q0"}
		if wl.rng.IntN(2) == 0 {
			req = sm.JobRequest{Kind: sm.JobGet, ID: w.randomID()}
		}
		k := &call{id: uint64(len(wl.calls) + 1), client: fl.id, node: p, inc: nd.inc, req: req, sent: at}
		wl.calls = append(wl.calls, k)
		fl.pending[k.id] = k
		w.tr.line(w.now, -1, fmt.Sprintf("c%d -> n%d #%d %s (read probe, sent at %v)", fl.id, p, k.id, describeReq(req), at))
		w.push(event{at: at + w.linkDelay(), kind: evClientReq, node: p, inc: k.inc, call: k.id})
		w.push(event{at: at + clientTimeout, kind: evClientGiveUp, call: k.id})
	}
}

// strikeLogWork: a standby starting a long log sequence (the read-back
// that verifies a received snapshot, a truncation, its own checkpoint)
// has its disk stalled while the primary is struck, so that a failover
// overlaps the sequence (Scenario.StrikeLogWork).
func (w *World) strikeLogWork(nd *simNode, effs []sm.Effect) {
	if w.sc.StrikeLogWork == 0 || w.liveness || w.faultsOff || nd.node.Role() != sm.RoleStandby {
		return
	}
	what := ""
	for _, e := range effs {
		switch x := e.(type) {
		case sm.Log:
			if x.Key == "repl.truncating" || x.Key == "repl.compacting" || x.Key == "repl.advancing" {
				what = x.Key
			}
		case sm.FileOp:
			if x.Op == sm.OpFsync && strings.HasSuffix(x.Path, ".snap.tmp") {
				what = "repl.install" // the received file's fsync: the read-back and rename wait
			}
		}
	}
	if what == "" || w.rng.Float64() >= w.sc.StrikeLogWork {
		return
	}
	stall := time.Duration(2500+w.rng.IntN(3500)) * time.Millisecond
	if w.now+stall+2*time.Second >= w.sc.Safety {
		return // a fault must end with the safety phase
	}
	nd.busy[loop.LaneIO] = max(nd.busy[loop.LaneIO], w.now) + stall
	w.tr.line(w.now, nd.id, fmt.Sprintf("nemesis: %s: the disk stalls for %v", what, stall))
	w.strikePrimary(PrimaryFault{At: w.now, Kind: TargetKind(w.rng.IntN(int(targetKinds))), Dur: ms(200 + w.rng.IntN(6000))})
	if w.sc.SeedMode && w.rng.IntN(2) == 0 {
		// Freeze the other standbys past the failover, so that this one,
		// its sequence in flight, is the candidate (seed mode: it needs
		// no votes).
		for _, o := range w.nodes {
			if o.id != nd.id && o.up && o.node.Role() == sm.RoleStandby {
				w.pause(o.id, stall+2*time.Second, true)
			}
		}
	}
}
