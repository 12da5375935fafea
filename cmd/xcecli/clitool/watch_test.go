package clitool

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/cmd/internal/cliexit"
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
	// A bytes.Buffer is no terminal: no escape codes, each refresh
	// under a rule line.
	if strings.Contains(out, "\x1b") {
		t.Fatalf("escape codes written to a non-terminal:\n%q", out)
	}
	frames := strings.Split(out, frameRule)[1:]
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
	for _, bad := range [][]string{{"--watch=-1s"}, {"--watch", "-1s"}, {"--watch=0s"}, {"--watch", "0"}, {"--watch", "soon"},
		{"--watch=5s", "1s"}, {"1s"}, {"--watch", "1s", "2s"}, {"--watch", "--count", "-1"}} {
		if _, err := fc.run(t, append([]string{"status"}, bad...)...); !errors.Is(err, cliexit.ErrUsage) {
			t.Errorf("status %q: %v, want a usage error", bad, err)
		}
	}
}

// On a terminal each refresh clears the screen and redraws in place; the
// terminal check is stood in for (a test has no terminal).
func TestStatusWatchOnTerminal(t *testing.T) {
	fc := startFakeCluster(t, true)
	fc.nodes[0].Set(func(*wire.Request) *wire.Reply {
		return &wire.Reply{StatusReply: &schema.StatusReply{Name: "n0", Role: "primary", Term: 1, Primary: 0, PrimaryName: "n0", Serving: true}}
	})
	was := isTerminal
	isTerminal = func(io.Writer) bool { return true }
	defer func() { isTerminal = was }()
	for _, args := range [][]string{{"status", "--watch", "20ms", "--count", "2"}, {"top", "--interval", "20ms", "--count", "2"}} {
		out, err := fc.run(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		frames := strings.Split(out, clearScreen)
		if len(frames) != 3 || frames[0] != "" || strings.Contains(out, frameRule) {
			t.Fatalf("%v on a terminal: %d pieces around the clear-screen code, want 2 refreshes each after one and no rule:\n%q", args, len(frames), out)
		}
		for _, f := range frames[1:] {
			if !strings.HasPrefix(f, "xcecli "+args[0]+" at ") {
				t.Errorf("%v: a refresh does not start with its title:\n%q", args, f)
			}
		}
	}
}

// The terminal check itself: neither a buffer nor a pipe is a terminal.
func TestIsTerminalFalseOffTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) || isTerminal(&bytes.Buffer{}) {
		t.Fatal("a pipe or a buffer taken for a terminal")
	}
}

// A bare --watch refreshes at defaultWatch; the space and = forms of an
// interval both work; the arguments follow the rules of watchInterval.
func TestWatchInterval(t *testing.T) {
	for _, c := range []struct {
		given bool
		watch time.Duration
		args  []string
		want  time.Duration
		bad   bool
	}{
		{given: false, want: 0},                                                     // status: once
		{given: true, watch: defaultWatch, want: defaultWatch},                      // --watch
		{given: true, watch: defaultWatch, args: []string{"1s"}, want: time.Second}, // --watch 1s
		{given: true, watch: 500 * time.Millisecond, want: 500 * time.Millisecond},  // --watch=500ms
		{given: true, watch: 5 * time.Second, args: []string{"1s"}, bad: true},      // --watch=5s 1s
		{given: false, args: []string{"1s"}, bad: true},                             // status 1s
		{given: true, watch: defaultWatch, args: []string{"x"}, bad: true},          // --watch x
		{given: true, watch: defaultWatch, args: []string{"0s"}, bad: true},         // --watch 0s
		{given: true, watch: -time.Second, bad: true},                               // --watch=-1s
	} {
		got, err := watchInterval(c.given, c.watch, c.args)
		if c.bad != (err != nil) || !c.bad && got != c.want {
			t.Errorf("watchInterval(%v, %v, %q) = %v, %v; want %v (error: %v)", c.given, c.watch, c.args, got, err, c.want, c.bad)
		}
	}
}

// A bare --watch, followed by another flag, refreshes (at the default
// interval: one refresh with --count 1 is all a test can wait for).
func TestStatusBareWatch(t *testing.T) {
	fc := startFakeCluster(t, true)
	fc.nodes[0].Set(func(*wire.Request) *wire.Reply {
		return &wire.Reply{StatusReply: &schema.StatusReply{Name: "n0", Role: "primary", Term: 1, Primary: 0, PrimaryName: "n0", Serving: true}}
	})
	for _, args := range [][]string{{"status", "--watch", "--count", "1"}, {"status", "--count", "1", "-w"}} {
		out, err := fc.run(t, args...)
		if err != nil || !strings.HasPrefix(out, frameRule+"xcecli status at ") {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
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
