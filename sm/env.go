package sm

import (
	"fmt"
	"time"
)

// env is the small context every concern reaches: the options, the
// clock, the effects of this step, the file operations in flight, the
// timers, the role, and the job log's position that every message
// carries. What only the router may do, a concern asks of node.
type env struct {
	opt      Options
	now      Clock
	out      []Effect
	role     Role   // written by Node only (boot, role changes, die)
	rng      uint64 // xorshift64 state (seed 002 §9.0)
	fatal    string // reason, once stopped
	timerGen [timerKinds]uint64
	ops      ioTable     // file operations in flight and their owners (pending.go)
	disk     *jobLog     // the Node's diskLog
	node     roleChanger // the Node
}

// roleChanger is what a concern asks of the Node: the role changes, which
// reset every concern's role state, the stop, and resuming a continuation
// at once (a continuation resumes on the Node: it may reach any concern).
type roleChanger interface {
	becomePrimary(term uint64)
	becomeStandby(p int, term uint64, format string)
	die(key, text string)
	resumeNow(c cont, r result)
}

func (en *env) emit(e Effect) { en.out = append(en.out, e) }

func (en *env) log(l Level, key, text string) { en.emit(Log{Level: l, Key: key, Text: text}) }

// io issues a file operation and registers its continuation. An fsync that
// fails is fatal (never retry and trust it).
func (en *env) io(op FileOp, next cont) {
	en.disk.forgetScanned(op)
	op.ID = en.ops.id()
	en.ops.pending[op.ID] = pendingOp{op: FileOp{ID: op.ID, Op: op.Op, Path: op.Path, To: op.To, Bulk: op.Bulk}, owner: en.ops.cur, next: next} // the running continuation's owner (pending.go)
	if op.Bulk {
		en.ops.bulk[op.Path]++
	}
	if en.ops.fenced(op) {
		en.ops.held = append(en.ops.held, op) // bulkfence.go
		return
	}
	en.emit(op)
}

// compute issues work on the state (off Step, on its own lane) and
// registers its continuation, as io does for a file operation: it is
// pending, owned and abandoned the same way. It returns the Compute's ID.
func (en *env) compute(c Compute, next cont) uint64 {
	if c.Kind == ComputeEncodeTo {
		en.disk.forgetScanned(FileOp{Op: OpWrite, Path: c.Path}) // it writes the file
	}
	c.ID = en.ops.id()
	en.ops.pending[c.ID] = pendingOp{op: FileOp{ID: c.ID, Path: c.Path}, compute: c.Kind, owner: en.ops.cur, next: next}
	en.emit(c)
	return c.ID
}

func (en *env) setTimer(k TimerKind, after time.Duration) {
	en.timerGen[k]++
	en.emit(SetTimer{Kind: k, Gen: en.timerGen[k], After: after})
}

func (en *env) cancelTimer(k TimerKind) {
	en.timerGen[k]++
	en.emit(CancelTimer{Kind: k})
}

func (en *env) peerName(i int) string {
	if i >= 0 && i < len(en.opt.Peers) {
		return en.opt.Peers[i]
	}
	return fmt.Sprintf("peer#%d", i)
}

// run starts a sequence; with no operations it resumes next at once.
func (en *env) run(ops []seqOp, next cont) {
	if len(ops) == 0 {
		en.node.resumeNow(next, result{})
		return
	}
	s := &seq{ops: ops, next: next}
	en.io(ops[0].op, s)
}
