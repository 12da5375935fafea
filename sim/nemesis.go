package sim

import (
	"fmt"
	"time"

	"xce/sm"
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
)

func (k TargetKind) String() string {
	return [...]string{"isolate", "kill", "power-loss", "pause"}[k]
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
	case TargetKill, TargetPower:
		w.kill(p, "nemesis", f.Kind == TargetPower)
	case TargetPause:
		w.pause(p, f.Dur)
	}
}
