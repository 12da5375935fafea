package sim

import (
	"strings"
	"time"

	"xce/sm"
)

// issueIO queues a file operation on the node's one I/O worker, the way
// the daemon's runner executes them: strictly in issue order, each taking
// effect on the disk only when it completes. A crash before then drops it
// (the event carries the incarnation), so a write the process never saw
// complete may never have happened — the window durability bugs hide in.
func (w *World) issueIO(nd *simNode, op sm.FileOp) {
	w.checkSnapshotTerm(nd, op)
	if op.Op == sm.OpFsync && w.sc.FsyncWindowCut > 0 && !w.liveness && !w.faultsOff &&
		strings.HasPrefix(op.Path, "data/wal/") && w.rng.Float64() < w.sc.FsyncWindowCut {
		// The append before this fsync is only in the page cache: a power
		// cut now tears it (torn, zeroed, garbage, hole).
		w.kill(nd.id, "in a WAL fsync window", true)
		return
	}
	done := max(nd.ioBusy, w.now) + w.ioLatency(op.Op)
	nd.ioBusy = done
	w.push(event{at: done, kind: evIO, node: nd.id, inc: nd.inc, op: &op})
}

// completeIO executes the operation on the disk and delivers its result
// in the same instant (the worker posts the completion back).
func (w *World) completeIO(nd *simNode, op sm.FileOp) {
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

func (w *World) ioLatency(op sm.OpKind) time.Duration {
	switch op {
	case sm.OpFsync, sm.OpFsyncDir:
		return time.Duration(500+w.rng.IntN(4500)) * time.Microsecond
	default:
		return time.Duration(20+w.rng.IntN(180)) * time.Microsecond
	}
}
