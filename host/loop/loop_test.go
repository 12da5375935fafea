package loop

import (
	"reflect"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// recorder is a Host that writes down what it was asked to do.
type recorder struct {
	did  []string
	stop int // Proceed refuses the effect with this index (1-based); 0 never
	seen int
}

func (r *recorder) Send(x sm.Send)                 { r.did = append(r.did, "send") }
func (r *recorder) SetTimer(x sm.SetTimer)         { r.did = append(r.did, "set") }
func (r *recorder) CancelTimer(x sm.CancelTimer)   { r.did = append(r.did, "cancel") }
func (r *recorder) File(x sm.FileOp)               { r.did = append(r.did, "file "+x.Path) }
func (r *recorder) Compute(x sm.Compute)           { r.did = append(r.did, "compute "+x.Kind.String()) }
func (r *recorder) Log(x sm.Log)                   { r.did = append(r.did, "log "+x.Key) }
func (r *recorder) Reply(x sm.Reply)               { r.did = append(r.did, "reply") }
func (r *recorder) UpgradeReply(x sm.UpgradeReply) { r.did = append(r.did, "upgrade-reply") }

func (r *recorder) SwitchoverReply(sm.SwitchoverReply) { r.did = append(r.did, "switchover-reply") }
func (r *recorder) Exit(x sm.Exit)                     { r.did = append(r.did, "exit") }
func (r *recorder) Unknown(e sm.Effect)                { r.did = append(r.did, "unknown") }

type gated struct{ *recorder }

func (g gated) Proceed(sm.Effect) bool {
	g.seen++
	return g.seen != g.stop
}

func TestExecute(t *testing.T) {
	effs := []sm.Effect{
		sm.Log{Key: "a"}, sm.FileOp{Path: "x"}, sm.Compute{Kind: sm.ComputeEncode}, sm.Send{}, sm.SetTimer{After: time.Second}, sm.CancelTimer{},
		sm.Reply{}, sm.UpgradeReply{}, sm.Exit{Code: 1}, sm.Log{Key: "after-exit"},
	}
	all := []string{"log a", "file x", "compute encode", "send", "set", "cancel", "reply", "upgrade-reply", "exit"}
	for _, tc := range []struct {
		name     string
		stop     int
		want     []string
		wantExit bool
	}{
		{"in order, nothing after an exit", 0, all, true},
		{"a gate stops the step before its effect", 4, all[:3], false},
		{"a gate may stop the exit itself", 9, all[:8], false},
	} {
		r := &recorder{stop: tc.stop}
		var h Host = r
		if tc.stop > 0 {
			h = gated{r}
		}
		exit := Execute(effs, h)
		if !reflect.DeepEqual(r.did, tc.want) || (exit != nil) != tc.wantExit {
			t.Errorf("%s: did %v (exit %v), want %v (exit %v)", tc.name, r.did, exit, tc.want, tc.wantExit)
		}
		if exit != nil && exit.Code != 1 {
			t.Errorf("%s: exit code %d, want 1", tc.name, exit.Code)
		}
	}
}

// observed refuses every step it sees.
type observed struct {
	*recorder
	inputs int
}

func (o *observed) Stepped(sm.Input, []sm.Effect) bool { o.inputs++; return false }

// A node's boot emits effects; an Observer that refuses them runs none,
// and without one they all run.
func TestStepObserver(t *testing.T) {
	mk := func() *sm.Node {
		n, err := sm.NewNode(sm.DefaultOptions(0, []string{"n0"}))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	o := &observed{recorder: &recorder{}}
	effs, _ := Step(mk(), sm.Clock{}, sm.Boot{Seed: 1}, o)
	if len(effs) == 0 || o.inputs != 1 || len(o.did) != 0 {
		t.Fatalf("observer saw %d inputs, %d effects were emitted, %d ran (%v)", o.inputs, len(effs), len(o.did), o.did)
	}
	r := &recorder{}
	effs, _ = Step(mk(), sm.Clock{}, sm.Boot{Seed: 1}, r)
	if len(r.did) != len(effs) {
		t.Fatalf("%d effects emitted, %d ran: %v", len(effs), len(r.did), r.did)
	}
}

// LaneOf puts every file operation on the I/O lane but bulk reads (on a
// lane of their own), every Compute (the work that grows with the number
// of jobs) on the compute lane, and effects that do not complete on none.
func TestLaneOf(t *testing.T) {
	for _, tc := range []struct {
		e    sm.Effect
		want Lane
		ok   bool
	}{
		{sm.FileOp{Op: sm.OpAppend, Path: "data/wal/1"}, LaneIO, true},
		{sm.FileOp{Op: sm.OpFsync, Path: "data/wal/1"}, LaneIO, true},
		{sm.FileOp{Op: sm.OpRead, Path: "data/snap/1"}, LaneIO, true},
		{sm.FileOp{Op: sm.OpRead, Path: "data/wal/1", Bulk: true}, LaneBulk, true},
		{sm.FileOp{Op: sm.OpAppend, Path: "data/wal/1", Bulk: true}, LaneIO, true}, // only a read may be bulk
		{sm.Compute{Kind: sm.ComputeEncodeTo, Path: "data/snap/1.tmp"}, LaneCompute, true},
		{sm.Compute{Kind: sm.ComputeEncode}, LaneCompute, true},
		{sm.Compute{Kind: sm.ComputeImport, Path: "data/snap/1"}, LaneCompute, true},
		{sm.Compute{Kind: sm.ComputeVerify, Path: "data/snap/1.tmp"}, LaneCompute, true},
		{sm.Send{}, 0, false},
		{sm.Log{}, 0, false},
	} {
		if got, ok := LaneOf(tc.e); got != tc.want || ok != tc.ok {
			t.Errorf("LaneOf(%#v) = %v, %v; want %v, %v", tc.e, got, ok, tc.want, tc.ok)
		}
	}
}
