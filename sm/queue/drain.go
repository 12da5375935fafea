package queue

// Sidelined reports whether j waits for an operator: it is in the queue
// named lf, or pinned to the host named lf (sm's lost_and_found, seed 002
// §6.5, where recovery routes the jobs of removed queues and hosts).
func (j Job) Sidelined(lf string) bool { return j.Queue == lf || j.Pin == lf }

// CountSidelined is how many jobs are Sidelined(lf). O(jobs).
func (q *Queues) CountSidelined(lf string) int {
	n := 0
	for _, e := range q.jobs.all() {
		if e.sidelined(lf) {
			n++
		}
	}
	return n
}

// DrainSidelined is the operator's drain of every job Sidelined(lf),
// whatever its state, in ID order; it returns how many it handled. With
// cancel they are deleted (a processing job's claim ends with it: its
// handle is then refused). Otherwise each job of queue lf moves to queue
// toQueue and each job pinned to lf is pinned to toHost ("" = any host);
// everything else of the job (state, stamps, attempts, claim) is kept, so
// a claimant's handle stays valid and a dead job stays dead (redrive it).
// A toQueue of "" or lf, or a toHost of lf, with cancel false, is refused
// (0, nothing changes).
func (q *Queues) DrainSidelined(now int64, lf, toQueue, toHost string, cancel bool) int {
	if !cancel && (toQueue == "" || toQueue == lf || toHost == lf) {
		return 0
	}
	var es []*job
	for _, e := range q.jobs.all() {
		if e.sidelined(lf) {
			es = append(es, e)
		}
	}
	for _, e := range es {
		if cancel {
			q.drop(e)
			continue
		}
		q.unplace(e)
		e = q.own(e)
		e.lane.count(e.State, e.RunAt, -1)
		if l := e.lane; l.pending == 0 && l.processing == 0 && l.dead == 0 {
			q.dropLane(l)
		}
		to := e.Queue()
		if to == lf {
			to = toQueue
		}
		if e.pin() == lf {
			e.more().Pin = q.name(toHost)
		}
		q.setLane(e, to)
		if e.State != Dead {
			q.place(e, now)
		}
	}
	return len(es)
}
