// Package loop is the one way a node's effects are executed (issue 7 B1):
// the daemon's runner, the simulator, xce-config install and the test
// harnesses all feed a node through Step, which executes the effects of
// each input in the order the node emitted them, through a Host that does
// each kind, and runs nothing after an Exit. The Host decides how: the
// runner sends on real sockets and queues file operations on a worker per
// lane; the simulator schedules them in simulated time; a harness runs
// them at once. What they share is here, the lanes too: a host runs file
// operations and Computes on a queue each, and LaneOf is the one rule.
package loop

import (
	"fmt"

	"github.com/xce-hpc/xce/sm"
)

// Host executes effects, one method per kind.
type Host interface {
	Send(sm.Send)
	SetTimer(sm.SetTimer)
	CancelTimer(sm.CancelTimer)
	// File queues a file operation on its lane (LaneIO; LaneBulk for a
	// bulk read) behind the ones issued before it on that lane: the node
	// learns of its completion as an sm.IODone, in issue order within the
	// lane.
	File(sm.FileOp)
	// Compute queues work on the state on LaneCompute behind the Computes
	// issued before it: its completion is an sm.Computed, in issue order
	// within the lane. Completions of different lanes may come in either
	// order.
	Compute(sm.Compute)
	Log(sm.Log)
	Reply(sm.Reply)
	UpgradeReply(sm.UpgradeReply)
	SwitchoverReply(sm.SwitchoverReply)
	// Exit ends the process: Step runs no effect after it.
	Exit(sm.Exit)
	// Unknown is an effect of a kind this package does not know (a newer
	// sm): a defect the host reports.
	Unknown(sm.Effect)
}

// Lane is one of a host's queues of effects that complete (file
// operations, Computes): each runs its effects one at a time, in issue
// order, apart from the other lanes.
type Lane int

const (
	// LaneIO is the file operations (FileOp: the WAL's appends and
	// fsyncs, config saves, reads, renames): the one ordered I/O worker.
	LaneIO Lane = iota
	// LaneCompute is the work on the job state that takes time with the
	// number of jobs (Compute: a snapshot encoded, written as it is
	// encoded, imported, verified). On a lane of its own, WAL fsyncs
	// never wait for it; sm issues nothing on a checkpoint's file until
	// its ComputeEncodeTo completes, so the two lanes never touch a file
	// at once.
	LaneCompute
	// LaneBulk is the bulk reads (sm.FileOp.Bulk: a standby checkpoint's
	// reads of its closed segments and its newest snapshot). Such a read
	// of 100 MB took 0.5–0.9 s on LaneIO, and the standby's appends, and
	// so its acknowledgements, waited behind it: a quorum write waited
	// as long (docs/performance.md). sm issues a bulk read only of a file
	// no operation in flight writes, so its place among the other file
	// operations does not matter.
	LaneBulk
	// NumLanes is how many lanes there are (for a host's array of them).
	NumLanes
)

func (l Lane) String() string {
	switch l {
	case LaneIO:
		return "io"
	case LaneCompute:
		return "compute"
	case LaneBulk:
		return "bulk"
	default:
		return fmt.Sprintf("lane(%d)", int(l))
	}
}

// LaneOf is the lane e runs on, the same in every host: the runner, the
// simulator, xce-config install and the test harnesses. An effect that
// does not complete (a Send, a Log) is on no lane (false).
func LaneOf(e sm.Effect) (Lane, bool) {
	switch x := e.(type) {
	case sm.FileOp:
		if x.Bulk && x.Op == sm.OpRead {
			return LaneBulk, true
		}
		return LaneIO, true
	case sm.Compute:
		return LaneCompute, true
	default:
		return 0, false
	}
}

// Observer, if the Host implements it, sees each step's effects before
// any runs (the simulator's checkers); false skips them all.
type Observer interface {
	Stepped(in sm.Input, effs []sm.Effect) bool
}

// Gate, if the Host implements it, is asked before each effect; false
// ends the step there, as if the process died between two effects (the
// simulator's crash points, a harness's kill).
type Gate interface {
	Proceed(e sm.Effect) bool
}

// Step feeds in to node at clk, then executes its effects in order
// through h. It returns the effects and the Exit among them, if any.
func Step(node *sm.Node, clk sm.Clock, in sm.Input, h Host) (effs []sm.Effect, exit *sm.Exit) {
	effs = node.Step(clk, in)
	if o, ok := h.(Observer); ok && !o.Stepped(in, effs) {
		return effs, nil
	}
	return effs, Execute(effs, h)
}

// Execute runs effs in order through h, up to and including an Exit
// (returned) or until h's Gate says stop.
func Execute(effs []sm.Effect, h Host) *sm.Exit {
	gate, _ := h.(Gate)
	for _, e := range effs {
		if gate != nil && !gate.Proceed(e) {
			return nil
		}
		switch x := e.(type) {
		case sm.Send:
			h.Send(x)
		case sm.SetTimer:
			h.SetTimer(x)
		case sm.CancelTimer:
			h.CancelTimer(x)
		case sm.FileOp:
			h.File(x)
		case sm.Compute:
			h.Compute(x)
		case sm.Log:
			h.Log(x)
		case sm.Reply:
			h.Reply(x)
		case sm.UpgradeReply:
			h.UpgradeReply(x)
		case sm.SwitchoverReply:
			h.SwitchoverReply(x)
		case sm.Exit:
			h.Exit(x)
			return &x
		default:
			h.Unknown(e)
		}
	}
	return nil
}
