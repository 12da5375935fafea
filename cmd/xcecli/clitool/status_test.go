package clitool

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/xce-hpc/xce/cmd/internal/cliexit"
)

// The REPLICATION column names each standby once (issue 20 finding 10: a
// node started with another --peers list was listed as ignored and again
// as "not joined").
func TestReplText(t *testing.T) {
	for _, c := range []struct {
		name string
		r    PeerStatus
		want string
	}{
		{"none", PeerStatus{}, "-"},
		{"in sync and lagging", PeerStatus{Standbys: []StandbyState{{Name: "n1", State: "in sync"}, {Name: "n2", State: "lagging", Behind: 7}}}, "n1: in sync, n2: lagging by 7"},
		{"other --peers", PeerStatus{PeersMismatch: []string{"n2"}, Standbys: []StandbyState{{Name: "n1", State: "in sync"}, {Name: "n2", State: "not joined"}}}, "n2: other --peers, ignored, n1: in sync"},
		{"degraded", PeerStatus{Degraded: true, AckedWithoutStandby: 3, Standbys: []StandbyState{{Name: "n1", State: "silent"}}}, "degraded (3 acked without a standby), n1: silent"},
	} {
		if got := c.r.replText(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A connection flag left empty (and not set in the environment) is a
// usage error naming the flag, for every command that talks to the
// cluster, before anything is dialled.
func TestMissingConnectionFlagIsNamed(t *testing.T) {
	for _, env := range []string{"XCE_PEERS", "XCE_CERT", "XCE_KEY", "XCE_CA"} {
		t.Setenv(env, "")
	}
	for _, c := range []struct {
		args    []string
		missing string
	}{
		{[]string{"status", "--peers", "n0=127.0.0.1:1"}, "--cert"},
		{[]string{"top", "--peers", "n0=127.0.0.1:1", "--cert", "a.crt"}, "--key"},
		{[]string{"switchover", "--peers", "n0=127.0.0.1:1", "--cert", "a.crt", "--key", "a.key"}, "--ca"},
		{[]string{"job", "get", "1"}, "--peers"},
	} {
		var out bytes.Buffer
		cmd := NewCommand(context.Background(), &out)
		cmd.SetErr(&out)
		cmd.SetArgs(c.args)
		err := cmd.Execute()
		if !errors.Is(err, cliexit.ErrUsage) || !strings.Contains(err.Error(), c.missing+" is required") {
			t.Errorf("%v: error %v, want a usage error naming %s", c.args, err, c.missing)
		}
	}
}
