package client

import (
	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/peerlist"
)

// NewFromFlag is the client of a --peers string, as every xce program
// takes it (package peerlist parses it).
func NewFromFlag(peersFlag string, mat *tlsconf.Material, opt Options) (*Client, error) {
	ps, _, err := peerlist.Parse(peersFlag)
	if err != nil {
		return nil, err
	}
	return New(PeersOf(ps), mat, opt)
}

// PeersOf is a parsed --peers list as New takes it.
func PeersOf(ps []peerlist.Peer) []Peer {
	out := make([]Peer, len(ps))
	for i, p := range ps {
		out[i] = Peer{Name: p.Name, Addr: p.Addr()}
	}
	return out
}
