package peerlist

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	p, w, err := Parse("n0=127.0.0.1:7601, n1=[::1]:7602,n2=host.example:7603")
	if err != nil || len(w) != 0 {
		t.Fatalf("err %v warnings %v", err, w)
	}
	if len(p) != 3 || p[1].Host != "::1" || p[1].Addr() != "[::1]:7602" || p[2].Port != 7603 {
		t.Fatalf("parsed %+v", p)
	}
	if i, err := IndexOf(p, "n2"); err != nil || i != 2 {
		t.Fatalf("IndexOf n2 = %d, %v", i, err)
	}
	if _, err := IndexOf(p, "n9"); !errors.Is(err, ErrPeers) {
		t.Fatalf("IndexOf missing: %v", err)
	}
	_, w, err = Parse("a=:7601,b=h:0")
	if err != nil || len(w) != 2 || !strings.Contains(w[0], "empty host") || !strings.Contains(w[1], "port 0") {
		t.Fatalf("warnings %v err %v", w, err)
	}
	// Each error names the bad entry and its position.
	many := strings.Repeat("x=h:1,", MaxCandidates) + "y=h:1"
	for _, c := range []struct{ in, want string }{
		{"", "--peers: empty"},
		{"n0", `entry 0 "n0": want name=host:port`},
		{"n0=h:1,=h:1", `entry 1 "=h:1": want name=host:port`},
		{"n0=h:1, n1=h", `entry 1 " n1=h"`},
		{"n0=h:x", `entry 0 "n0=h:x": bad port "x"`},
		{"n0=h:1,n1=h:1,n2=h:70000", `entry 2 "n2=h:70000": bad port "70000"`},
		{"a=h:1,a=h:2", `entry 1: name "a" already used by entry 0`},
		{many, `name "x" already used`},
		{manyDistinct(MaxCandidates + 1), "17 candidates, at most 16"},
	} {
		_, _, err := Parse(c.in)
		if !errors.Is(err, ErrPeers) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want ErrPeers saying %q", c.in, err, c.want)
		}
	}
}

// The same list hashes the same however the flag is spaced; another
// address or order does not.
func TestHash(t *testing.T) {
	parse := func(s string) []Peer {
		t.Helper()
		p, _, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := Hash(parse("n0=127.0.0.1:7601,n1=127.0.0.1:7602"))
	if b := Hash(parse(" n0=127.0.0.1:7601 , n1=127.0.0.1:7602 ")); a != b || a == 0 {
		t.Fatalf("same list: %x vs %x", a, b)
	}
	for _, other := range []string{"n0=127.0.0.1:7601,n1=127.0.0.1:7603", "n1=127.0.0.1:7602,n0=127.0.0.1:7601", "n0=127.0.0.1:7601"} {
		if Hash(parse(other)) == a {
			t.Errorf("%q hashes like the original", other)
		}
	}
}

// manyDistinct is a --peers string of n distinct entries.
func manyDistinct(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("n%d=h:%d", i, 7600+i)
	}
	return strings.Join(parts, ",")
}
