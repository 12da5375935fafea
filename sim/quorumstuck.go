package sim

import "github.com/xce-hpc/xce/sm/quorum"

// quorumStuck reports why a quorum-mode cluster may rightly stay without a
// primary: no node that holds a config has a log at least as fresh as a
// majority's, so none can collect a majority of votes (a node with a
// fresher log but no config cannot serve, seed 002 §10.1). Electing a
// config holder anyway could lose committed records; the operator's
// remedy is `xce-config install` on a node with the fresher log.
func (w *World) quorumStuck() bool {
	var cands []*simNode
	for _, nd := range w.nodes {
		if nd.up && nd.node.ConfigTag() != 0 {
			cands = append(cands, nd)
		}
	}
	if len(cands) == 0 || !w.nodes[0].node.QuorumMode() {
		return false
	}
	for _, c := range cands {
		ct, cl := c.node.LogPosition()
		grant := 0
		for _, nd := range w.nodes {
			if !nd.up {
				continue
			}
			t, l := nd.node.LogPosition()
			if t < ct || t == ct && l <= cl {
				grant++
			}
		}
		if grant >= quorum.Majority(len(w.nodes)) {
			return false
		}
	}
	return true
}
