package sim

import (
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/tracker"
)

var zeroFaults = simdisk.Faults{}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

// livenessPhase turns every fault off, starts every node, and checks L1
// (one primary, every standby on its config), then L2 (kill the primary:
// one primary again; restart it: it rejoins as standby).
func (w *World) livenessPhase() {
	w.liveness = true
	w.net.heal()
	start := w.now
	for _, nd := range w.nodes {
		nd.disk.SetFaults(zeroFaults)
		nd.gaveUp = false
		if !nd.up && !nd.restart {
			w.scheduleRestart(nd.id)
		}
	}
	// A node running without the config its disk holds (an injected read
	// error at its boot) would wait out the ~88 s fetch window (§10.2)
	// before its FATAL restart reads it: the operator restarts it now.
	for _, nd := range w.nodes {
		if nd.up && nd.node.ConfigTag() == 0 && validConfigOn(nd.disk.Files()) != "" {
			w.kill(nd.id, "operator restart: running without the config on its disk", false)
		}
	}
	// Nodes waiting on RestartSec start now, as an operator would.
	for _, nd := range w.nodes {
		if !nd.up {
			w.push(event{at: w.now, kind: evStart, node: nd.id})
		}
	}
	if !w.anyValidConfig() {
		// Nothing can serve: L3 says every node must end FATAL rather than
		// serve without config; checkNode enforces "never serving".
		w.rep.NoConfigLeft = true
		w.runUntil(w.now+bootBound, nil)
		return
	}
	at, ok := w.converge(-1, bootBound)
	if !ok && w.quorumStuck() {
		w.tr.line(w.now, -1, "quorum mode: no config holder has a log as fresh as a majority's — unavailable by design")
		return
	}
	if !ok && w.rotStranded() {
		w.tr.line(w.now, -1, "the only config holders are lost to bit rot: unavailable until an operator restores them")
		return
	}
	if !ok {
		w.violate("L1", "no convergence within %v of the liveness phase: %s", bootBound, w.describe())
		return
	}
	w.rep.BootTime = at - start
	p := w.primaryOf(-1)
	if p < 0 || !w.canFailover() {
		return
	}
	// The clients keep writing while the primary is killed: acknowledged
	// writes must survive the failover (S5, checked on the new primary).
	w.runUntil(w.now+time.Duration(w.rng.IntN(300))*time.Millisecond, nil)
	if w.fail != nil {
		return
	}
	killAt := w.now
	w.nodes[p].restart = true // keep it down while the others fail over
	w.kill(p, "L2: primary killed", true)
	// From here every sync is the new primary's, begun with the faults
	// off (the old primary's messages are dropped by standbys that follow
	// the new one).
	w.cleanSyncs, w.l2Killed = true, p
	at, ok = w.converge(p, failoverBound)
	if !ok {
		w.violate("L2", "no failover within %v after killing primary n%d: %s", failoverBound, p, w.describe())
		return
	}
	w.rep.FailoverTime = at - killAt
	w.served = w.now
	np := w.primaryOf(p)
	q, _, rec := w.nodes[np].node.JobState()
	if !rec {
		w.violate("S5", "new primary n%d has not recovered the job state %v after n%d was killed", np, w.now-killAt, p)
		return
	}
	w.checkDurable(q.Export().Jobs, fmt.Sprintf("new primary n%d after n%d was killed", np, p))
	w.checkKeyedState(q.Export().Jobs, fmt.Sprintf("new primary n%d after n%d was killed", np, p))
	if w.fail != nil {
		return
	}
	restartAt := w.now
	w.nodes[p].restart = false
	w.push(event{at: w.now, kind: evStart, node: p})
	at, ok = w.converge(-1, bootBound)
	if !ok {
		w.violate("L2", "old primary n%d did not rejoin within %v: %s", p, bootBound, w.describe())
		return
	}
	w.rep.RejoinTime = at - restartAt
	// L4: the writes go on while the rejoined node syncs; no standby may
	// see a gap in the records it is sent.
	w.runUntil(w.now+syncWindow, nil)
}

// syncWindow: how long the liveness phase lets the workload run after the
// old primary's rejoin, for its sync to be checked (L4).
const syncWindow = 3 * time.Second

// canFailover reports whether the cluster minus one node may elect a new
// primary: always in seed mode, only with a majority left in quorum mode
// (a 2-node quorum cluster, like a lone node, waits for the dead one).
func (w *World) canFailover() bool {
	if w.sc.Nodes < 2 {
		return false
	}
	return w.sc.SeedMode || w.sc.Nodes-w.lostNodes()-1 >= w.nodes[0].opts.Majority()
}

// converge runs until the cluster (without node skip) has converged, by
// the bound, and stayed so for settle; it returns when convergence began.
func (w *World) converge(skip int, bound time.Duration) (time.Duration, bool) {
	deadline := w.now + bound
	var since time.Duration = -1
	for w.fail == nil {
		if w.primaryOf(skip) >= 0 {
			if since < 0 {
				since = w.now
			}
			if w.now-since >= settle {
				return since, true
			}
		} else {
			since = -1
		}
		if since < 0 && w.now > deadline {
			return 0, false
		}
		if w.q.len() == 0 {
			return 0, false
		}
		// Wake at the next event, or when the settle period would end.
		next := w.q.next()
		if since >= 0 && since+settle < next {
			w.now = since + settle
			continue
		}
		w.runUntil(next, nil)
	}
	return 0, false
}

// primaryOf returns the primary if the live nodes (except skip and the
// nodes lost to bit rot) have converged: exactly one primary, every other
// node a serving standby that follows it with the same config tag.
func (w *World) primaryOf(skip int) int {
	p := -1
	for _, nd := range w.nodes {
		if nd.id == skip || nd.rot.lost {
			continue
		}
		if !nd.up {
			return -1
		}
		if nd.node.Role() == sm.RolePrimary {
			if p >= 0 {
				return -1
			}
			p = nd.id
		}
	}
	if p < 0 {
		return -1
	}
	tag := w.nodes[p].node.ConfigTag()
	for _, nd := range w.nodes {
		if nd.id == skip || nd.id == p || nd.rot.lost {
			continue
		}
		n := nd.node
		if n.Role() != sm.RoleStandby || n.Primary() != p || !n.Serving() || n.ConfigTag() != tag {
			return -1
		}
	}
	return p
}

func (w *World) describe() string {
	s := ""
	for _, nd := range w.nodes {
		if !nd.up {
			if nd.rot.lost {
				s += fmt.Sprintf("[n%d lost to bit rot] ", nd.id)
				continue
			}
			s += fmt.Sprintf("[n%d down] ", nd.id)
			continue
		}
		n := nd.node
		s += fmt.Sprintf("[n%d %s term=%d primary=%d serving=%v tag=%016x] ", nd.id, n.Role(), n.Term(), n.Primary(), n.Serving(), n.ConfigTag())
	}
	return s
}

// anyValidConfig reports whether some disk holds a pointer to a verifying
// config (the precondition of L1).
func (w *World) anyValidConfig() bool {
	for _, nd := range w.nodes {
		if validConfigOn(nd.disk.Files()) != "" {
			return true
		}
	}
	return false
}

// validConfigOn returns the name conf/current designates if that file
// verifies, else "".
func validConfigOn(files map[string][]byte) string {
	name, err := sm.ParsePointer(files[sm.PointerPath])
	if err != nil {
		return ""
	}
	blob, ok := files[sm.ConfDir+"/"+name]
	if !ok || len(blob) == 0 || name != refName(sha256Sum(blob)) {
		return ""
	}
	return name
}

// logSyncBound: how long, with every fault off and the clients idle, a
// standby's job log may take to reach its primary's (L5). A snapshot in
// the tiny chunks of half the schedules (Scenario.SnapshotChunk: 64–512
// bytes, one per round trip) can take 1,800 chunks: up to ~100 s on the
// slowest links.
const logSyncBound = 150 * time.Second

// checkLogsSynced is L5: once the liveness phase has run and the clients
// are idle, every live standby's job log reaches its primary's position
// (term and LSN of the last durable record) within logSyncBound. L4
// catches a sync that resyncs; this one a sync that stalls or loops
// without a gap (a catch-up whose next read or piece never comes), which
// would leave a standby that never counts toward a quorum.
func (w *World) checkLogsSynced() {
	if !w.liveness {
		return
	}
	p := w.primaryOf(-1)
	if p < 0 {
		return // no converged cluster here: L1 and L2 judge that
	}
	if _, _, rec := w.nodes[p].node.JobState(); !rec {
		return // a primary without job state syncs no one (S5 judges it after the failover)
	}
	behind := func() string {
		pt, pl := w.nodes[p].node.LogPosition()
		for _, nd := range w.nodes {
			if nd.id == p || nd.rot.lost || !nd.up {
				continue
			}
			if t, l := nd.node.LogPosition(); t != pt || l != pl {
				return fmt.Sprintf("n%d's log ends at (term %d, lsn %d), primary n%d's at (term %d, lsn %d)", nd.id, t, l, p, pt, pl)
			}
		}
		return ""
	}
	w.runUntil(w.now+logSyncBound, func() bool { return behind() == "" })
	if why := behind(); w.fail == nil && why != "" && w.primaryOf(-1) == p {
		w.violate("L5", "the job logs did not converge within %v of the clients going idle, every fault off: %s", logSyncBound, why)
	}
}

// checkAnswered (L6) judges a request whose client gave up: once the
// liveness phase's failover has converged, with every fault off, a
// request that reached a primary in its term, which is still up, in that
// incarnation, primary in that term, must have been answered (a write
// held back forever, a lost reply) — whatever else the cluster does
// meanwhile (the old primary's rejoin and its sync). Two cases are
// counted, not failed: seed mode, whose primary holds writes while a live
// standby installs a snapshot, by design; and a quorum-mode primary with
// too few synced standbys for a majority when the request was sent or
// when its client gave up: the standbys it needs install snapshots (a
// schedule's small chunks make that take seconds), and no write can
// commit meanwhile.
func (w *World) checkAnswered(c *call) {
	if !w.liveness || w.served == 0 || c.sent < w.served || c.term == 0 {
		return
	}
	nd := w.nodes[c.node]
	if !nd.up || nd.inc != c.inc || nd.node.Role() != sm.RolePrimary || nd.node.Term() != c.term {
		return
	}
	w.rep.Unanswered++
	if !w.sc.SeedMode && !c.short && !w.shortOfMajority(nd) {
		w.violate("L6", "request #%d (sent at %v) to primary n%d of term %d was never answered; its client gave up at %v, every fault off since %v", c.id, c.sent, c.node, c.term, w.now, w.served)
	}
}

// shortOfMajority reports whether quorum-mode primary nd has too few
// synced standbys (in sync or lagging: those whose acks commit) to
// commit a write with its own fsync: the others are syncing by snapshot,
// failing or silent.
func (w *World) shortOfMajority(nd *simNode) bool {
	if w.sc.SeedMode {
		return false
	}
	synced := 0
	for _, st := range nd.node.ReplicationStatus() {
		if st.State == tracker.StateInSync || st.State == tracker.StateLagging {
			synced++
		}
	}
	return synced+1 < w.majority()
}
