package sim

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/xce-hpc/xce/host/loop"
	"github.com/xce-hpc/xce/sm"
)

// issueIO queues a file operation on its lane's worker (loop.LaneOf), the
// way the daemon's runner executes them: strictly in issue order within
// the lane, each taking effect on the disk only when it completes. A
// crash before then drops it (the event carries the incarnation), so a
// write the process never saw complete may never have happened — the
// window durability bugs hide in.
func (w *World) issueIO(nd *simNode, op sm.FileOp) {
	w.checkSnapshotTerm(nd, op)
	if op.Op == sm.OpFsync && w.sc.FsyncWindowCut > 0 && !w.liveness && !w.faultsOff &&
		strings.HasPrefix(op.Path, "data/wal/") && w.rng.Float64() < w.sc.FsyncWindowCut {
		// The append before this fsync is only in the page cache: a power
		// cut now tears it (torn, zeroed, garbage, hole).
		w.kill(nd.id, "in a WAL fsync window", true)
		return
	}
	lat := w.ioLatency(op.Op)
	if w.sc.DiskStall > 0 && !w.liveness && !w.faultsOff && w.rng.Float64() < w.sc.DiskStall {
		stall := time.Duration(200+w.rng.IntN(3800)) * time.Millisecond
		if w.now+stall >= w.sc.Safety {
			stall = 0 // a fault ends with the safety phase
		}
		lat += stall
		w.tr.line(w.now, nd.id, fmt.Sprintf("disk stall of %v at %s %s", stall, op.Op, op.Path))
	}
	if lane, _ := loop.LaneOf(op); lane == loop.LaneBulk && w.rng.IntN(4) == 0 {
		// A bulk read is of a file of up to hundreds of MB: 0.3–1.9 s at
		// 1M jobs (docs/performance.md); in one of four, much longer.
		lat += time.Duration(w.rng.IntN(1500)) * time.Millisecond
	}
	w.checkBulk(nd, op, 1)
	w.push(event{at: w.laneDone(nd, op, lat), kind: evIO, node: nd.id, inc: nd.inc, op: w.keepOp(op)})
}

// fileAt is a file of one incarnation of a node.
type fileAt struct {
	inc  int
	path string
}

// checkBulk follows the bulk reads and the operations that change a file
// (opened, +1, when issued; closed, -1, when they complete). A bulk read
// (loop.LaneBulk) runs beside the I/O lane, so sm issues one only of a
// file that nothing changes while it runs (FileOp.Bulk): on a real disk
// a read that raced a write may see any mix of the two versions. S12
// fails a bulk read issued while an operation changing its file is in
// flight, on any lane, and such an operation issued while a bulk read of
// the file is.
func (w *World) checkBulk(nd *simNode, op sm.FileOp, open int) {
	if nd.openBulk == nil {
		nd.openBulk, nd.openChange = map[fileAt]int{}, map[fileAt]int{}
	}
	if lane, _ := loop.LaneOf(op); lane == loop.LaneBulk {
		k := fileAt{nd.inc, op.Path}
		if open > 0 && nd.openChange[k] > 0 {
			w.violate("S12", "n%d issued a bulk read of %s while %d operations changing it were in flight", nd.id, op.Path, nd.openChange[k])
		}
		countOpen(nd.openBulk, k, open)
		return
	}
	for _, p := range changedPaths(op) {
		k := fileAt{nd.inc, p}
		if open > 0 && nd.openBulk[k] > 0 {
			w.violate("S12", "n%d issued %s of %s while a bulk read of it was in flight", nd.id, op.Op, p)
		}
		countOpen(nd.openChange, k, open)
	}
}

// countOpen adds open to m[k], dropping the entry at zero (a node's
// files and incarnations come and go).
func countOpen(m map[fileAt]int, k fileAt, open int) {
	if m[k] += open; m[k] == 0 {
		delete(m, k)
	}
}

// changedPaths are the files op changes.
func changedPaths(op sm.FileOp) []string {
	switch op.Op {
	case sm.OpWrite, sm.OpAppend, sm.OpRemove:
		return []string{op.Path}
	case sm.OpRename:
		return []string{op.Path, op.To}
	default:
		return nil
	}
}

// keepOp is a copy of op for its completion event, from an array shared
// by the next ones (an operation allocated each was a tenth of the
// simulator's allocations; the event only reads it).
func (w *World) keepOp(op sm.FileOp) *sm.FileOp {
	if len(w.opSlab) == cap(w.opSlab) {
		w.opSlab = make([]sm.FileOp, 0, 128)
	}
	w.opSlab = append(w.opSlab, op)
	return &w.opSlab[len(w.opSlab)-1]
}

// issueCompute queues a Compute on its lane (loop.LaneOf), as the runner
// does: a checkpoint encoded and written, a snapshot encoded for a sync,
// imported at recovery or verified at an install takes time with the
// number of jobs, and in one of four much longer, so the node goes on
// changing its state (or, recovering, sending heartbeats) meanwhile (the
// copy-on-write view must not see it).
func (w *World) issueCompute(nd *simNode, c sm.Compute) {
	if c.Snapshot != nil && c.Kind != sm.ComputeBuild {
		// Encoded off the node's Step from a copy-on-write view: encode it
		// now for the checkers, and again when it completes, after the
		// node went on changing its state — the two must be the same
		// bytes (sm/queue View). (One that does not encode — a standby's
		// log it cannot rebuild — fails when it completes, as the
		// executor reports it.)
		if data, err := c.Snapshot.Encode(); err == nil {
			if nd.snapAt == nil {
				nd.snapAt = map[uint64][]byte{}
			}
			nd.snapAt[c.ID] = data
			if c.Kind == sm.ComputeEncodeTo {
				w.checkSnapshotTerm(nd, sm.FileOp{ID: c.ID, Op: sm.OpWrite, Path: c.Path, Data: data})
			}
		}
	}
	if c.Kind == sm.ComputeEncodeTo {
		w.checkBulk(nd, sm.FileOp{Op: sm.OpWrite, Path: c.Path}, 1) // it writes c.Path
	}
	lat := w.ioLatency(0) + time.Duration(computeJobs(c))*5*time.Microsecond
	if w.rng.IntN(4) == 0 {
		lat += time.Duration(w.rng.IntN(300)) * time.Millisecond
	}
	w.push(event{at: w.laneDone(nd, c, lat), kind: evIO, node: nd.id, inc: nd.inc, comp: &c})
}

// laneDone is when e, issued now and taking lat, completes: each lane
// (loop.LaneOf) completes its effects in issue order, apart from the
// other (loop.Host's contract).
func (w *World) laneDone(nd *simNode, e sm.Effect, lat time.Duration) time.Duration {
	lane, _ := loop.LaneOf(e)
	done := max(nd.busy[lane], w.now) + lat
	nd.busy[lane] = done
	return done
}

// completeIO executes the operation on the disk and delivers its result
// in the same instant (the worker posts the completion back).
func (w *World) completeIO(nd *simNode, op sm.FileOp) {
	w.checkFileOp(nd, op)
	res := nd.disk.Exec(op, w.wall(nd.id))
	res.ID = op.ID
	w.noteRotRead(nd, op)
	w.checkBulk(nd, op, -1)
	if res.Err == sm.IOOK && isDataSync(op) {
		w.durableSynced(nd, &op)
	}
	if res.Err != sm.IOOK && res.Err != sm.IONotExist && len(op.Path) > 5 && op.Path[:5] == "conf/" {
		nd.chk.excuse() // an injected conf/ read/write fault may hide the config
	}
	w.tr.ioDone(w.now, nd.id, op, res)
	w.deliver(nd.id, res)
	w.checkRotTerm(nd, op, res)
}

// completeCompute executes the Compute and delivers its result in the
// same instant. A checkpoint (ComputeEncodeTo) is the write of the bytes
// its view encoded to at issue, once they are checked unchanged: the
// disk's checkers see it as the OpWrite it is.
func (w *World) completeCompute(nd *simNode, c sm.Compute) {
	if c.Kind == sm.ComputeEncodeTo {
		w.checkBulk(nd, sm.FileOp{Op: sm.OpWrite, Path: c.Path}, -1)
	}
	var res sm.Computed
	want, ok := nd.snapAt[c.ID]
	if ok {
		delete(nd.snapAt, c.ID)
		data, err := c.Snapshot.Encode()
		if err != nil || !bytes.Equal(data, want) {
			w.violate("S7", "n%d: the snapshot view encoded for %s %s changed after it was taken (%d bytes at issue, %d now, %v): copy on write is broken", nd.id, c.Kind, c.Path, len(want), len(data), err)
			return
		}
	}
	if ok && c.Kind == sm.ComputeEncodeTo {
		op := sm.FileOp{ID: c.ID, Op: sm.OpWrite, Path: c.Path, Data: want}
		w.checkFileOp(nd, op)
		d := nd.disk.Exec(op, w.wall(nd.id))
		res = sm.Computed{Err: d.Err, Detail: d.Detail}
	} else {
		res = nd.disk.Compute(c, w.wall(nd.id))
	}
	res.ID = c.ID
	w.tr.computed(w.now, nd.id, c, res)
	w.deliver(nd.id, res)
}

// computeJobs is how many jobs a Compute handles: its snapshot's count,
// or an estimate from the bytes (as SnapshotData.Jobs makes for a
// standby's checkpoint).
func computeJobs(c sm.Compute) int {
	if c.Snapshot != nil {
		return c.Snapshot.Jobs()
	}
	return len(c.Data) / 256
}

func (w *World) ioLatency(op sm.OpKind) time.Duration {
	switch op {
	case sm.OpFsync, sm.OpFsyncDir:
		return time.Duration(500+w.rng.IntN(4500)) * time.Microsecond
	default:
		return time.Duration(20+w.rng.IntN(180)) * time.Microsecond
	}
}
