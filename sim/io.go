package sim

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"xce/host/loop"
	"xce/sm"
)

// issueIO queues a file operation on its lane's worker (loop.LaneOf), the
// way the daemon's runner executes them: strictly in issue order within
// the lane, each taking effect on the disk only when it completes. A
// crash before then drops it (the event carries the incarnation), so a
// write the process never saw complete may never have happened — the
// window durability bugs hide in.
func (w *World) issueIO(nd *simNode, op sm.FileOp) {
	if op.Snapshot != nil && op.Data == nil {
		// A checkpoint, encoded off the node's Step from a copy-on-write
		// view: encode it now for the checkers, and again when it
		// completes, after the node went on changing its state — the two
		// must be the same bytes (sm/queue View).
		// (One that does not encode — a standby's log it cannot rebuild —
		// fails when it completes, as the executor reports it.)
		if data, err := op.Snapshot.Encode(); err == nil {
			if nd.snapAt == nil {
				nd.snapAt = map[uint64][]byte{}
			}
			nd.snapAt[op.ID] = data
			withData := op
			withData.Data = data
			w.checkSnapshotTerm(nd, withData)
		}
	} else {
		w.checkSnapshotTerm(nd, op)
	}
	if op.Op == sm.OpFsync && w.sc.FsyncWindowCut > 0 && !w.liveness && !w.faultsOff &&
		strings.HasPrefix(op.Path, "data/wal/") && w.rng.Float64() < w.sc.FsyncWindowCut {
		// The append before this fsync is only in the page cache: a power
		// cut now tears it (torn, zeroed, garbage, hole).
		w.kill(nd.id, "in a WAL fsync window", true)
		return
	}
	lane := loop.LaneOf(op)
	lat := w.ioLatency(op.Op)
	switch lane {
	case loop.LaneSnapshot:
		// A checkpoint is encoded and written, and a snapshot imported at
		// recovery, on a lane of its own, as the runner does: it takes
		// time with the number of jobs, and in one of four much longer,
		// so the node goes on changing its state (or, recovering, sending
		// heartbeats) meanwhile (the copy-on-write view must not see it).
		lat += time.Duration(snapJobs(op)) * 5 * time.Microsecond
		if w.rng.IntN(4) == 0 {
			lat += time.Duration(w.rng.IntN(300)) * time.Millisecond
		}
	default:
		if w.sc.DiskStall > 0 && !w.liveness && !w.faultsOff && w.rng.Float64() < w.sc.DiskStall {
			stall := time.Duration(200+w.rng.IntN(3800)) * time.Millisecond
			if w.now+stall >= w.sc.Safety {
				stall = 0 // a fault ends with the safety phase
			}
			lat += stall
			w.tr.line(w.now, nd.id, fmt.Sprintf("disk stall of %v at %s %s", stall, op.Op, op.Path))
		}
	}
	// Each lane completes its operations in issue order, apart from the
	// other lane (loop.Host's contract).
	done := max(nd.busy[lane], w.now) + lat
	nd.busy[lane] = done
	w.push(event{at: done, kind: evIO, node: nd.id, inc: nd.inc, op: &op})
}

// completeIO executes the operation on the disk and delivers its result
// in the same instant (the worker posts the completion back).
func (w *World) completeIO(nd *simNode, op sm.FileOp) {
	if want, ok := nd.snapAt[op.ID]; ok && op.Snapshot != nil && op.Data == nil {
		delete(nd.snapAt, op.ID)
		data, err := op.Snapshot.Encode()
		if err != nil || !bytes.Equal(data, want) {
			w.violate("S7", "n%d: the checkpoint view written to %s changed after it was taken (%d bytes at issue, %d now, %v): copy on write is broken", nd.id, op.Path, len(want), len(data), err)
			return
		}
		if op.Op == sm.OpWrite {
			op.Data, op.Snapshot = data, nil
		}
	}
	w.checkFileOp(nd, op)
	res := nd.disk.Exec(op, w.wall(nd.id))
	res.ID = op.ID
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

// snapJobs is how many jobs a LaneSnapshot op handles: a checkpoint's
// count, or for an import an estimate from the bytes (as SnapshotData.Jobs
// makes for a standby's checkpoint).
func snapJobs(op sm.FileOp) int {
	if op.Snapshot != nil {
		return op.Snapshot.Jobs()
	}
	return len(op.Data) / 256
}

func (w *World) ioLatency(op sm.OpKind) time.Duration {
	switch op {
	case sm.OpFsync, sm.OpFsyncDir:
		return time.Duration(500+w.rng.IntN(4500)) * time.Microsecond
	default:
		return time.Duration(20+w.rng.IntN(180)) * time.Microsecond
	}
}
