package sim

import (
	"math/rand/v2"
	"reflect"
	"time"

	"xce/schema"
	"xce/sm"
	"xce/sm/queue"
	"xce/sm/wal"
)

// clusterJobs is the cluster world's job workload around the L2 primary
// kill: clients write to the primary, the primary is killed while writes
// are in flight, and the new primary must hold every acknowledged one
// (S5 across failover, DESIGN §4.4: sync replication + freshest-log
// election).
type clusterJobs struct {
	primary int
	issued  []*schema.WalRecord // the old primary's appended records, by LSN
	acked   uint64
	replies int
	nextID  uint64
	rng     *rand.Rand
	ids     []uint64
	handles []queue.Handle
	killed  bool // the old primary is down: the next recovery is checked
	checked bool
}

const (
	workloadOps  = 40
	workloadStep = 3 * time.Millisecond
)

// startJobWorkload schedules client operations on primary p; the caller
// kills p in the middle of them.
func (w *World) startJobWorkload(p int) {
	w.jobs = &clusterJobs{primary: p, rng: rand.New(rand.NewPCG(w.sc.Seed, 0x10ad))}
	for i := 0; i < workloadOps; i++ {
		w.push(event{at: w.now + time.Duration(i)*workloadStep, kind: evClient, node: p})
	}
}

func (w *World) clientOp(p int) {
	c := w.jobs
	nd := w.nodes[p]
	if !nd.up || nd.node.Role() != sm.RolePrimary {
		return
	}
	c.nextID++
	req := sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte{byte(c.nextID)}}
	switch k := c.rng.IntN(10); {
	case k < 2 && len(c.ids) > 0:
		req = sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 2}
	case k < 3 && len(c.handles) > 0:
		req = sm.JobRequest{Kind: sm.JobAck, Handle: c.handles[c.rng.IntN(len(c.handles))]}
	}
	w.deliver(p, sm.ClientOp{ID: c.nextID, Req: req})
}

// noteJobEffect records the old primary's WAL appends and the replies.
func (w *World) noteJobEffect(nd *simNode, e sm.Effect) {
	c := w.jobs
	if c == nil {
		return
	}
	switch x := e.(type) {
	case sm.FileOp:
		if nd.id != c.primary || x.Op != sm.OpAppend {
			return
		}
		recs, _, err := wal.Scan(x.Data)
		if err != nil {
			w.violate("S5", "n%d appended an undecodable WAL batch: %v", nd.id, err)
			return
		}
		for _, r := range recs {
			for len(c.issued) == 0 && r.GetLsn() > 1 && uint64(len(c.issued))+1 < r.GetLsn() {
				// Before the workload the log holds only the no-ops each
				// term starts with (and empty sweeps): an empty state.
				for l := uint64(1); l < r.GetLsn(); l++ {
					c.issued = append(c.issued, &schema.WalRecord{Lsn: l, Op: &schema.WalRecord_Noop{Noop: &schema.WalNoop{}}})
				}
			}
			if int(r.GetLsn()) != len(c.issued)+1 {
				w.violate("S5", "n%d appended LSN %d, expected %d", nd.id, r.GetLsn(), len(c.issued)+1)
				return
			}
			c.issued = append(c.issued, r)
		}
	case sm.Reply:
		if x.Status != sm.StatusOK {
			return
		}
		c.replies++
		c.acked = max(c.acked, x.LSN)
		for _, j := range x.Jobs {
			c.ids = append(c.ids, j.ID)
			if j.State == queue.Processing {
				c.handles = append(c.handles, j.Handle())
			}
		}
	}
}

// checkJobsAfterStep runs the failover check on the step in which a new
// primary finished recovering (before it logs anything of its own).
func (w *World) checkJobsAfterStep(nd *simNode) {
	c := w.jobs
	if c == nil || !c.killed || c.checked || nd.id == c.primary || nd.node.Role() != sm.RolePrimary {
		return
	}
	if _, _, ok := nd.node.JobState(); ok {
		w.checkFailoverJobs(nd.id)
	}
}

// checkFailoverJobs: the new primary's recovered state is the replay of a
// prefix of the old primary's log that holds every acknowledged record.
func (w *World) checkFailoverJobs(p int) {
	c := w.jobs
	nd := w.nodes[p]
	c.checked = true
	q, _, ok := nd.node.JobState()
	k := nd.node.RecoveredLSN()
	if !ok {
		w.violate("S5", "new primary n%d never recovered its job state", p)
		return
	}
	if k < c.acked {
		w.violate("S5", "new primary n%d holds LSNs 1..%d but LSN %d was acknowledged by the old primary", p, k, c.acked)
		return
	}
	if k > uint64(len(c.issued)) {
		// A standby's sync snapshot may hold records the old primary had
		// applied but not yet written when it died (never acknowledged):
		// allowed, but then the replay below cannot be compared.
		if k > uint64(len(c.issued))+uint64(c.nextID) {
			w.violate("S5", "new primary n%d holds LSN %d, the old primary created at most %d", p, k, uint64(len(c.issued))+c.nextID)
		}
		w.rep.JobsAcked, w.rep.JobsKept = int(c.acked), int(k)
		return
	}
	blob, _, _ := nd.node.Config()
	cfg, err := schema.DecodeClusterConfig(blob)
	if err != nil {
		w.violate("S1", "n%d runs an undecodable config: %v", p, err)
		return
	}
	ref, _ := sm.ReplayRecords(cfg, c.issued[:k])
	if got, want := q.Export(), ref.Export(); !reflect.DeepEqual(got, want) {
		w.violate("S5", "new primary n%d's jobs differ from the replay of the old primary's LSNs 1..%d", p, k)
		return
	}
	w.rep.JobsAcked, w.rep.JobsKept = int(c.acked), int(k)
}
