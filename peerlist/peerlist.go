// Package peerlist parses the --peers string that every xce program takes
// (xcecontroller, xcecli, xce-config, package client through
// client.NewFromFlag): "name=host:port,name=host:port,...", the index of an
// entry being its priority, 0 the highest. It is the one parser of that
// string, kept free of any network or TLS code so that each of them can
// import it.
package peerlist

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"strings"
)

// MaxCandidates bounds --peers (MAX_CANDIDATES, seed 002 §11.2).
const MaxCandidates = 16

// Peer is one --peers entry; its index is its priority (0 = highest).
type Peer struct {
	Name string
	Host string
	Port int
}

// Addr is host:port.
func (p Peer) Addr() string { return net.JoinHostPort(p.Host, strconv.Itoa(p.Port)) }

// ErrPeers wraps every --peers parse error.
var ErrPeers = errors.New("--peers")

// Parse parses "name=host:port,name=host:port,...". A malformed entry is
// an error naming the entry and its position (0 = the first); an empty
// host or port 0 is accepted with a warning, as seed 002 §11.2 asks (such
// a peer can never be reached).
func Parse(s string) (peers []Peer, warnings []string, err error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil, fmt.Errorf("%w: empty", ErrPeers)
	}
	seen := map[string]int{}
	for i, item := range strings.Split(s, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" {
			return nil, nil, fmt.Errorf("%w: entry %d %q: want name=host:port", ErrPeers, i, item)
		}
		host, portS, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: entry %d %q: %v", ErrPeers, i, item, err)
		}
		port, err := strconv.Atoi(portS)
		if err != nil || port < 0 || port > 65535 {
			return nil, nil, fmt.Errorf("%w: entry %d %q: bad port %q", ErrPeers, i, item, portS)
		}
		if j, dup := seen[name]; dup {
			return nil, nil, fmt.Errorf("%w: entry %d: name %q already used by entry %d", ErrPeers, i, name, j)
		}
		seen[name] = i
		if host == "" {
			warnings = append(warnings, fmt.Sprintf("--peers entry %d (%s) has an empty host", i, name))
		}
		if port == 0 {
			warnings = append(warnings, fmt.Sprintf("--peers entry %d (%s) has port 0", i, name))
		}
		peers = append(peers, Peer{Name: name, Host: host, Port: port})
	}
	if len(peers) > MaxCandidates {
		return nil, nil, fmt.Errorf("%w: %d candidates, at most %d", ErrPeers, len(peers), MaxCandidates)
	}
	return peers, warnings, nil
}

// IndexOf returns name's priority in peers; a missing name is an error
// (seed 002 §11.2: my_priority out of range).
func IndexOf(peers []Peer, name string) (int, error) {
	for i, p := range peers {
		if p.Name == name {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w: own name %q is not in the list (every node needs the same --peers, including itself)", ErrPeers, name)
}

// Hash identifies a --peers list after parsing (names, hosts and ports in
// order, whatever the spacing of the flag): two controllers with the same
// list get the same non-zero hash.
func Hash(peers []Peer) uint64 {
	h := fnv.New64a()
	for _, p := range peers {
		fmt.Fprintf(h, "%s=%s\n", p.Name, p.Addr())
	}
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1 // 0 means "not checked"
}
