// Package tracker is the primary's view of each standby's copy of the job
// log (issue 7 A9, as etcd-raft's tracker/ beside its raft/): what the
// standby acknowledged durable, whether it finished its sync, when it was
// last heard and why it fails — and the questions the primary asks of
// them: what a majority holds, whether enough standbys hold a record, and
// each standby's state for status. Pure and clock-free: the time arrives
// as an argument (monotonic ns).
package tracker

import (
	"sort"

	"github.com/xce-hpc/xce/sm/quorum"
)

// Progress is one standby's copy of the log, as the primary knows it.
type Progress struct {
	Epoch    uint64 // the sync it is in (ReqID of its messages)
	StartLSN uint64 // where its sync started: records after it are streamed
	Acked    uint64 // its durable LSN, as it acknowledged
	Synced   bool   // it finished its sync (a snapshot installed, a catch-up begun)
	Failure  string // why it cannot sync, as it last said ("" if it did not)
	LastSeen int64  // Mono of its last message about the log
	AckedAt  int64  // Mono of its last acknowledgement in this sync
}

// New starts a standby's progress in a sync of epoch from startLSN.
func New(epoch, startLSN uint64, now int64) *Progress {
	return &Progress{Epoch: epoch, StartLSN: startLSN, LastSeen: now}
}

// Heard notes a message from the standby: alive, and failing for failure
// ("" if it is not).
func (p *Progress) Heard(now int64, failure string) {
	p.LastSeen = now
	p.Failure = failure
}

// Ack notes that the standby's sync is done and its log durable up to lsn
// (acknowledgements may arrive out of order: the highest counts).
func (p *Progress) Ack(lsn uint64, now int64) {
	p.Synced = true
	p.Acked = max(p.Acked, lsn)
	p.LastSeen, p.AckedAt = now, now
}

// Live reports whether the standby was heard within timeout of now.
func (p *Progress) Live(now, timeout int64) bool { return now-p.LastSeen <= timeout }

// Holds reports whether the standby holds lsn durably in its sync.
func (p *Progress) Holds(lsn uint64) bool { return p.Synced && p.Acked >= lsn }

// The states State names; a failing standby's is StateFailing and why.
const (
	StateSilent  = "silent"
	StateFailing = "failing: "
	StateSyncing = "syncing"
	StateLagging = "lagging"
	StateInSync  = "in sync"
)

// State names the standby's state for status, and how many records of
// the primary's durable log (up to durable) it lacks.
func (p *Progress) State(now, timeout int64, durable uint64) (string, uint64) {
	var behind uint64
	if durable > p.Acked {
		behind = durable - p.Acked
	}
	switch {
	case !p.Live(now, timeout):
		return StateSilent, behind
	case !p.Synced && p.Failure != "":
		return StateFailing + p.Failure, behind
	case !p.Synced:
		return StateSyncing, behind
	case behind > 0:
		return StateLagging, behind
	}
	return StateInSync, behind
}

// Set is the progress of every standby in the primary's current
// promotion, by peer index.
type Set map[int]*Progress

// Peers lists the standbys in index order (never map order).
func (s Set) Peers() []int {
	out := make([]int, 0, len(s))
	for p := range s {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}

// Committed is the highest LSN durable on need of the primary (at own)
// and its synced standbys: quorum mode's commit point.
func (s Set) Committed(own uint64, need int) uint64 {
	var pb [8]int // the peers in index order, on the stack for a cluster of up to 9
	peers := pb[:0]
	for p := range s {
		peers = append(peers, p)
	}
	sort.Ints(peers)
	var buf [9]uint64
	pos := append(buf[:0], own)
	for _, p := range peers {
		if pr := s[p]; pr.Synced {
			pos = append(pos, pr.Acked)
		}
	}
	return quorum.Committed(pos, need)
}

// Replicated is seed mode's rule: lsn is held by need standbys, or by
// every live one if fewer are live. A live standby still syncing counts
// as live, so a resync holds writes up instead of letting them skip
// replication.
func (s Set) Replicated(lsn uint64, need int, now, timeout int64) bool {
	have, live := 0, 0
	for _, pr := range s { // unordered: counts
		if !pr.Live(now, timeout) {
			continue
		}
		live++
		if pr.Holds(lsn) {
			have++
		}
	}
	return have >= min(need, live)
}

// HeldByAny reports whether some standby holds lsn durably.
func (s Set) HeldByAny(lsn uint64) bool {
	for _, pr := range s { // unordered: whether any standby holds it
		if pr.Holds(lsn) {
			return true
		}
	}
	return false
}

// Reached is how far the standby's log is known to reach: its acked LSN,
// or where its sync started if it has not acknowledged that far.
func (p *Progress) Reached() uint64 { return max(p.Acked, p.StartLSN) }

// Slowest is the lowest position a standby reached below lsn, and that
// standby (the lowest index among equals); lsn and -1 if none is below.
func (s Set) Slowest(lsn uint64) (uint64, int) {
	at, who := lsn, -1
	for _, p := range s.Peers() {
		if r := s[p].Reached(); r < at {
			at, who = r, p
		}
	}
	return at, who
}
