package sim

import (
	"fmt"
	"reflect"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// Checks on a primary's live job state (moved here from the retired
// one-node job world, now on every node of every schedule):
//
//   - S5, at the end of every recovery: the recovered state equals the
//     replay (sm.ReplayRecords, under the node's config) of the log it
//     recovered — LSNs 1..k, each record taken from the node's own disk,
//     or from the canonical chain for the LSNs under its snapshot — and k
//     is where its log on disk ends. A snapshot that does not equal the
//     replay of the records it stands for, a record replayed twice or
//     skipped, fails here. When records under the snapshot were never
//     seen (no acknowledgement covered them), the recovery is counted as
//     not replayable rather than checked.
//   - S6, at every recovery and whenever the durable LSN has advanced by
//     contractEvery records since it last ran: the seed-000 contract on the whole state — each job once,
//     stamps immutable, a processing job with host, deadline and attempts
//     within budget, a dead job with died_at and last_error, a pending job
//     without a claim deadline.

// contractEvery: S6 runs when the durable LSN has advanced this far since
// it last ran (an export of the whole state each time: every record would
// cost a fifth of the run).
const contractEvery = 8

type jobStateNode struct {
	q      *queue.Queues // the state checked last (a recovery makes a new one)
	inc    int
	lsn    uint64
	stamps map[uint64]queue.Stamps
}

type jobStateCheck struct {
	nodes      []jobStateNode
	replayed   int // recoveries compared with a replay
	unreplayed int // ... whose records under the snapshot were never seen
}

// checkJobState is the hook after every step of nd.
func (w *World) checkJobState(nd *simNode) {
	if !nd.up {
		return // the process just exited: its state is gone
	}
	q, lsn, recovered := nd.node.JobState()
	if q == nil || !recovered {
		return
	}
	js := &w.js
	if js.nodes == nil {
		js.nodes = make([]jobStateNode, len(w.nodes))
	}
	s := &js.nodes[nd.id]
	if s.q != q || s.inc != nd.inc {
		*s = jobStateNode{q: q, inc: nd.inc, lsn: lsn, stamps: map[uint64]queue.Stamps{}}
		w.checkRecovered(nd, q)
		w.checkContract(nd, s)
		return
	}
	if lsn >= s.lsn+contractEvery {
		s.lsn = lsn
		w.checkContract(nd, s)
	}
}

// checkRecovered: S5 — the state recovery ended with is the replay of the
// log it recovered.
func (w *World) checkRecovered(nd *simNode, q *queue.Queues) {
	k := nd.node.RecoveredLSN()
	v := w.currentLog(nd)
	if v.lastLSN() != k {
		w.violate("S5", "n%d recovered its job log up to lsn %d, but its log on disk ends at lsn %d (snapshot %d)", nd.id, k, v.lastLSN(), v.snapLSN)
		return
	}
	recs := make([]*schema.WalRecord, 0, k)
	for lsn := uint64(1); lsn <= k; lsn++ {
		var p []byte
		if r, ok := v.rec(lsn); ok {
			p = r.payload
		} else if p, ok = w.chainPayload(lsn); !ok || !w.chainArmed() {
			// (after a wipe the chain no longer binds: amnesia may rewrite it)
			w.js.unreplayed++
			return
		}
		rec, err := wal.DecodeRecord(p)
		if err != nil {
			w.violate("S7", "n%d: record at lsn %d does not decode: %v", nd.id, lsn, err)
			return
		}
		recs = append(recs, rec)
	}
	blob, _, ok := nd.node.Config()
	if !ok {
		return
	}
	cfg, err := schema.DecodeClusterConfig(blob)
	if err != nil {
		w.violate("S7", "n%d serves a config that does not decode: %v", nd.id, err)
		return
	}
	w.js.replayed++
	// Recovery ends with the new term's first record, a no-op the primary
	// applies as it logs it (it raises the next job id to the term's range).
	recs = append(recs, &schema.WalRecord{Lsn: k + 1, Term: nd.node.Term(), Op: &schema.WalRecord_Noop{Noop: &schema.WalNoop{}}})
	ref, _ := sm.ReplayRecords(cfg, recs)
	if got, want := q.Export(), ref.Export(); !reflect.DeepEqual(got, want) {
		w.violate("S5", "n%d's recovered state differs from the replay of its log, LSNs 1..%d (snapshot %d): %s", nd.id, k, v.snapLSN, snapshotDiff(got, want))
		return
	}
	w.tr.line(w.now, nd.id, fmt.Sprintf("S5 ok: recovered state is the replay of LSNs 1..%d (snapshot %d)", k, v.snapLSN))
}

// snapshotDiff names the first difference of two job states.
func snapshotDiff(got, want queue.Snapshot) string {
	switch {
	case len(got.Jobs) != len(want.Jobs):
		in := func(js []queue.Job, id uint64) bool {
			for _, j := range js {
				if j.ID == id {
					return true
				}
			}
			return false
		}
		var extra, missing []string
		for _, j := range got.Jobs {
			if !in(want.Jobs, j.ID) {
				extra = append(extra, fmt.Sprintf("%d/%s/%s", j.ID, j.State, j.Payload))
			}
		}
		for _, j := range want.Jobs {
			if !in(got.Jobs, j.ID) {
				missing = append(missing, fmt.Sprintf("%d/%s/%s", j.ID, j.State, j.Payload))
			}
		}
		return fmt.Sprintf("%d jobs, the replay %d (only recovered: %v; only in the replay: %v)", len(got.Jobs), len(want.Jobs), extra, missing)
	case got.NextID != want.NextID || got.NextSeq != want.NextSeq:
		return fmt.Sprintf("next id/seq %d/%d, the replay %d/%d", got.NextID, got.NextSeq, want.NextID, want.NextSeq)
	case !reflect.DeepEqual(got.Schedules, want.Schedules):
		return fmt.Sprintf("schedules %v, the replay %v", got.Schedules, want.Schedules)
	}
	for i := range got.Jobs {
		if !reflect.DeepEqual(got.Jobs[i], want.Jobs[i]) {
			return fmt.Sprintf("job %+v, the replay %+v", got.Jobs[i], want.Jobs[i])
		}
	}
	return "equal jobs, other fields differ"
}

// checkContract is S6 on the live state.
func (w *World) checkContract(nd *simNode, s *jobStateNode) {
	seen := map[uint64]bool{}
	for j := range s.q.Jobs() { // Export's order, no copy of the state
		if seen[j.ID] {
			w.violate("S6", "n%d: job %d appears twice", nd.id, j.ID)
			return
		}
		seen[j.ID] = true
		if st, ok := s.stamps[j.ID]; ok && st != j.Stamps {
			w.violate("S6", "n%d: job %d stamps changed from %+v to %+v", nd.id, j.ID, st, j.Stamps)
			return
		}
		s.stamps[j.ID] = j.Stamps
		switch j.State {
		case queue.Processing:
			if j.Host == "" || j.ClaimExpiresAt == 0 || j.Attempts == 0 || j.Attempts > j.Stamps.MaxAttempts {
				w.violate("S6", "n%d: processing job %d inconsistent: %+v", nd.id, j.ID, j)
				return
			}
		case queue.Dead:
			if j.DiedAt == 0 || j.LastError == "" {
				w.violate("S6", "n%d: dead job %d without died_at/last_error: %+v", nd.id, j.ID, j)
				return
			}
		case queue.Pending:
			if j.ClaimExpiresAt != 0 {
				w.violate("S6", "n%d: pending job %d keeps a claim deadline", nd.id, j.ID)
				return
			}
		}
	}
}
