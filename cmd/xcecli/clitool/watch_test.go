package clitool

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/schema"
)

// status --watch refreshes: the table redrawn in place each time (a
// term that changes between refreshes shows), or one JSON line each.
func TestStatusWatchRefreshes(t *testing.T) {
	fc := startFakeCluster(t, true)
	term := uint64(0)
	fc.nodes[0].Set(func(*wire.Request) *wire.Reply {
		term++
		return &wire.Reply{StatusReply: &schema.StatusReply{
			Name: "n0", Role: "primary", Term: term, Primary: 0, PrimaryName: "n0", Serving: true}}
	})
	out, err := fc.run(t, "status", "--watch", "50ms", "--count", "3")
	if err != nil {
		t.Fatalf("status --watch: %v\n%s", err, out)
	}
	frames := strings.Split(out, clearScreen)[1:]
	if len(frames) != 3 {
		t.Fatalf("%d refreshes, want 3:\n%q", len(frames), out)
	}
	for k, f := range frames {
		if !strings.HasPrefix(f, "xcecli status at ") || !strings.Contains(f, "NAME") {
			t.Errorf("refresh %d is not a timestamped table:\n%s", k, f)
		}
	}
	prev := ""
	for k, f := range frames { // each refresh asked again: the term column advances
		term := ""
		for _, l := range strings.Split(f, "\n") {
			if fs := strings.Fields(l); len(fs) > 4 && fs[0] == "n0" {
				term = fs[4]
			}
		}
		if term == "" || len(term) < len(prev) || len(term) == len(prev) && term <= prev {
			t.Errorf("refresh %d shows term %q after %q:\n%s", k, term, prev, out)
		}
		prev = term
	}

	out, err = fc.run(t, "status", "--watch", "50ms", "--count", "2", "-o", "json")
	if err != nil {
		t.Fatalf("status --watch -o json: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d JSON lines, want 2:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var rows []PeerStatus
		if err := json.Unmarshal([]byte(l), &rows); err != nil || len(rows) != 1 || rows[0].Role != "primary" {
			t.Errorf("line %q: %v %+v", l, err, rows)
		}
	}
	if _, err := fc.run(t, "status", "--watch", "-1s"); err == nil {
		t.Error("a negative --watch was accepted")
	}
}

// status without --watch exits non-zero (ErrNoPrimary) when no peer
// answers as primary, after printing the view, and succeeds when one does.
func TestStatusFailsWithoutPrimary(t *testing.T) {
	fc := startFakeCluster(t, true, false)
	fc.nodes[0].Set(func(*wire.Request) *wire.Reply {
		return &wire.Reply{StatusReply: &schema.StatusReply{Name: "n0", Role: "candidate", Term: 3, Primary: -1}}
	})
	out, err := fc.run(t, "status")
	if !errors.Is(err, ErrNoPrimary) || !strings.Contains(err.Error(), "1 of 2 peers answered") {
		t.Fatalf("status with a candidate and a down peer: %v, want ErrNoPrimary naming 1 of 2\n%s", err, out)
	}
	if !strings.Contains(out, "candidate") {
		t.Fatalf("the view was not printed before the failure:\n%s", out)
	}
	fc.nodes[0].Set(func(*wire.Request) *wire.Reply {
		return &wire.Reply{StatusReply: &schema.StatusReply{Name: "n0", Role: "primary", Term: 3, Primary: 0, PrimaryName: "n0", Serving: true}}
	})
	if out, err := fc.run(t, "status"); err != nil {
		t.Fatalf("status with a primary: %v\n%s", err, out)
	}
}
