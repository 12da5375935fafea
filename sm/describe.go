package sm

import (
	"fmt"
	"strings"
)

// Describe prints the node's state, one concern per line, then the file
// operations in flight with what resumes when each completes: the golden
// interaction tests compare it, and a failure report can show it. Every
// list in it is in a fixed order (peer index, LSN, issue order).
func (n *Node) Describe() string {
	var b strings.Builder
	primary := "none"
	if n.el.primary >= 0 {
		primary = n.peerName(n.el.primary)
	}
	fmt.Fprintf(&b, "election: %s term=%d vote=%d primary=%s", n.role, n.el.ha.term, n.el.ha.vote, primary)
	if n.el.ha.durTerm != n.el.ha.term || n.el.ha.durVote != n.el.ha.vote || n.el.ha.haWriting {
		fmt.Fprintf(&b, " durable=%d/%d writing=%t held=%d", n.el.ha.durTerm, n.el.ha.durVote, n.el.ha.haWriting, len(n.el.ha.held))
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "config: tag=%016x serving=%t stale=%t", n.ConfigTag(), n.conf.serving, n.conf.stale)
	if n.conf.cfgProblem != "" && n.conf.cfg == nil {
		fmt.Fprintf(&b, " problem=%q", n.conf.cfgProblem)
	}
	if n.conf.store.busy {
		fmt.Fprintf(&b, " store-busy queued=%d", len(n.conf.store.jobs))
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "log: term=%d lsn=%d clean=%t unknown=%t\n", n.disk.logPos.term, n.disk.logPos.lsn, n.disk.logClean, n.disk.logUnknown)
	if j := n.journal.jobs; j != nil {
		fmt.Fprintf(&b, "journal: recovered=%t next=%d durable=%d commit=%d batches=%d writing=%t waiting=%d reads=%d polls=%d\n",
			j.recovered, j.nextLSN, j.durableLSN, n.journal.commitLSN(), len(j.batches), j.writing, len(j.waiting), len(j.reads), len(j.polls))
		for _, s := range sortedKeys(j.repl) {
			rp := j.repl[s]
			fmt.Fprintf(&b, "  %s: sync=%s start=%d acked=%d synced=%t", n.peerName(s), SyncName(rp.Epoch), rp.StartLSN, rp.Acked, rp.Synced)
			if rp.catchUp != nil {
				b.WriteString(" catching-up")
			}
			if rp.snap != nil {
				b.WriteString(" snapshot")
			}
			if rp.truncating {
				b.WriteString(" truncating")
			}
			b.WriteByte('\n')
		}
	}
	if sr := n.sb.srepl; sr != nil {
		fmt.Fprintf(&b, "standby: sync=%s expect=%d seg=%s installing=%t writing=%t queued=%d\n", SyncName(sr.epoch), sr.expect, sr.seg, sr.installing, sr.writing, len(sr.queue))
	}
	for _, p := range n.PendingOps() {
		b.WriteString("pending " + p + "\n")
	}
	return b.String()
}
