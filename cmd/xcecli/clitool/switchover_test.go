package clitool

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/cmd/internal/cliexit"
	"github.com/xce-hpc/xce/sm"
)

// switchoverAnswer answers a switchover as a primary that handed over to
// its target in term 5, or refuses anything else.
func switchoverAnswer(req *wire.Request) *wire.Reply {
	if req.Switchover == nil {
		return &wire.Reply{Status: sm.StatusEINVAL, Error: "unsupported request"}
	}
	to := req.Switchover.To
	if to < 0 {
		to = 2 // the primary's pick
	}
	return &wire.Reply{Switchover: &sm.SwitchoverReply{Outcome: sm.SwitchoverOK, Primary: to, Term: 5}}
}

// The success line names the new primary and its term; the redirect of a
// standby is followed; --to travels as the member's index, no --to as the
// primary's pick.
func TestSwitchoverCommand(t *testing.T) {
	fc := startFakeCluster(t, true, true, true)
	fc.nodes[0].Set(func(*wire.Request) *wire.Reply {
		return &wire.Reply{Status: sm.StatusEAGAIN, Error: "Not primary — redirect to primary", NotPrimary: true,
			Switchover: &sm.SwitchoverReply{Outcome: sm.SwitchoverNotPrimary, Primary: 1}}
	})
	fc.nodes[1].Set(switchoverAnswer)
	line := regexp.MustCompile(`^switched over: n0 is primary \(term 5\) after [0-9.]+[µnm]?s\n$`)
	out, err := fc.run(t, "switchover", "--to", "n0")
	if err != nil || !line.MatchString(out) {
		t.Fatalf("switchover --to n0: %q, %v", out, err)
	}
	reqs := fc.nodes[1].Requests()
	if len(reqs) != 1 || reqs[0].Switchover == nil || reqs[0].Switchover.To != 0 {
		t.Fatalf("n1 got %v, want one switchover to index 0", reqs)
	}
	out, err = fc.run(t, "switchover")
	if err != nil || !strings.HasPrefix(out, "switched over: n2 is primary (term 5) after ") {
		t.Fatalf("switchover: %q, %v", out, err)
	}
}

// A refusal is exit status 1 with the node's reason; an unknown --to or
// an argument is a usage error (exit status 2) and nothing is sent.
func TestSwitchoverCommandRefusals(t *testing.T) {
	fc := startFakeCluster(t, true, true)
	why := "n1 is not in sync (syncing, 40 records behind)"
	refuse := func(*wire.Request) *wire.Reply {
		return &wire.Reply{Status: wire.StatusNotInSync, Error: why, Switchover: &sm.SwitchoverReply{Outcome: sm.SwitchoverNotInSync, Error: why, Primary: 0}}
	}
	fc.nodes[0].Set(refuse)
	out, err := fc.run(t, "switchover", "--to", "n1")
	if !errors.Is(err, ErrSwitchoverRefused) || cliexit.Code(err) != 1 || !strings.Contains(err.Error(), why) ||
		!strings.Contains(err.Error(), "failed_precondition") || out != "" {
		t.Fatalf("refused: %q, %v", out, err)
	}
	fc.nodes[0].Set(refuse) // forget the requests seen
	for _, args := range [][]string{{"switchover", "--to", "n7"}, {"switchover", "n1"}} {
		_, err := fc.run(t, args...)
		if cliexit.Code(err) != 2 {
			t.Errorf("%v: exit %d (%v), want 2", args, cliexit.Code(err), err)
		}
		if args[1] == "--to" && !strings.Contains(err.Error(), `--to "n7": no such member (the members are n0, n1)`) {
			t.Errorf("%v: %v, want the members named", args, err)
		}
	}
	if reqs := append(fc.nodes[0].Requests(), fc.nodes[1].Requests()...); len(reqs) != 0 {
		t.Fatalf("a usage error sent %d requests", len(reqs))
	}
}
