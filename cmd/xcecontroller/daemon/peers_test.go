package daemon

import (
	"errors"
	"strings"
	"testing"
)

func TestParsePeers(t *testing.T) {
	p, w, err := ParsePeers("n0=127.0.0.1:7601, n1=[::1]:7602,n2=host.example:7603")
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
	_, w, err = ParsePeers("a=:7601,b=h:0")
	if err != nil || len(w) != 2 || !strings.Contains(w[0], "empty host") || !strings.Contains(w[1], "port 0") {
		t.Fatalf("warnings %v err %v", w, err)
	}
	for _, bad := range []string{"", "n0", "=h:1", "n0=h", "n0=h:x", "n0=h:70000", "a=h:1,a=h:2"} {
		if _, _, err := ParsePeers(bad); !errors.Is(err, ErrPeers) {
			t.Errorf("%q: want ErrPeers, got %v", bad, err)
		}
	}
}

// The same list hashes the same however the flag is spaced; another
// address or order does not.
func TestPeersHash(t *testing.T) {
	parse := func(s string) []Peer {
		t.Helper()
		p, _, err := ParsePeers(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := PeersHash(parse("n0=127.0.0.1:7601,n1=127.0.0.1:7602"))
	if b := PeersHash(parse(" n0=127.0.0.1:7601 , n1=127.0.0.1:7602 ")); a != b || a == 0 {
		t.Fatalf("same list: %x vs %x", a, b)
	}
	for _, other := range []string{"n0=127.0.0.1:7601,n1=127.0.0.1:7603", "n1=127.0.0.1:7602,n0=127.0.0.1:7601", "n0=127.0.0.1:7601"} {
		if PeersHash(parse(other)) == a {
			t.Errorf("%q hashes like the original", other)
		}
	}
}
