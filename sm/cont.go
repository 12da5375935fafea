package sm

import (
	"fmt"
	"strings"
)

// A continuation is what resumes when a file operation, or a sequence of
// them, completes. It is data: a kind naming the step and the few fields
// that step needs, so the pending table can print what happens next and a
// test can compare it. Each concern's continuation type resumes through
// its own switch (resume).
type cont interface {
	resume(n *Node, r result)
	String() string
}

// result is what a continuation resumes with: the completion of the
// operation it waited for (of a sequence, its first operation's: a read's
// data), and, when a sequence stopped at an operation that failed, which
// one (failed is "" otherwise).
type result struct {
	IODone
	failed string
	loaded *LoadedSnapshot // a ComputeImport's (Computed.Loaded)
}

// names lists a directory listing's entry names, in the listing's order.
func (r result) names() []string {
	out := make([]string, len(r.Entries))
	for i, e := range r.Entries {
		out[i] = e.Name
	}
	return out
}

// onErr is what a sequence does when one of its operations fails (a
// failed fsync never gets here: it is fatal, pending.go).
type onErr uint8

const (
	errHalt  onErr = iota // stop and resume next with the failure
	errGoOn               // log a warning (key; its text starts with pre) and go on
	errFatal              // the node stops (key)
)

// seqOp is one operation of a sequence and what its failure does.
type seqOp struct {
	op        FileOp
	onErr     onErr
	missingOK bool   // a remove of a file that is not there succeeded
	key       string // errGoOn: the warning's log key; errFatal: the fatal's
	pre       string // errGoOn: what the warning's text starts with
}

// seq is a sequence of file operations in flight, each issued when the one
// before completes: the one durable way to write (write tmp → fsync →
// rename → fsync dir; append → fsync → [fsync dir]), to remove, to make
// directories and to read what is then counted (read → fsync).
type seq struct {
	ops   []seqOp
	at    int
	first IODone // the first operation's completion (a read's data)
	next  cont
}

func (s *seq) String() string {
	var b strings.Builder
	for i := s.at + 1; i < len(s.ops); i++ {
		fmt.Fprintf(&b, "%s %s, ", s.ops[i].op.Op, s.ops[i].op.Path)
	}
	return fmt.Sprintf("seq %d/%d: %sthen %s", s.at+1, len(s.ops), b.String(), s.next)
}

func (s *seq) resume(n *Node, r result) {
	cur := s.ops[s.at]
	if s.at == 0 {
		s.first = r.IODone
	}
	if r.Err != IOOK && !(cur.missingOK && r.Err == IONotExist) {
		switch cur.onErr {
		case errHalt:
			s.next.resume(n, result{IODone: r.IODone, failed: describeOp(cur.op)})
			return
		case errFatal:
			n.die(cur.key, fmt.Sprintf("cannot %s: %s %s", failedTo(cur.op), r.Err, r.Detail))
			return
		case errGoOn:
			n.log(Warn, cur.key, fmt.Sprintf("%scannot %s: %s %s", cur.pre, describeOp(cur.op), r.Err, r.Detail))
		}
	}
	s.at++
	if s.at == len(s.ops) {
		s.next.resume(n, result{IODone: s.first})
		return
	}
	n.io(s.ops[s.at].op, s)
}

// describeOp names an operation the way a failure reports it.
func describeOp(op FileOp) string {
	switch op.Op {
	case OpWrite:
		return "write " + op.Path
	case OpRename:
		return "rename " + op.Path + " -> " + op.To
	case OpRemove:
		return "remove " + op.Path
	case OpMkdir:
		return "mkdir " + op.Path
	case OpRead:
		return "read " + op.Path
	case OpAppend:
		return "append to " + op.Path
	case OpList:
		return "list " + op.Path
	}
	return fmt.Sprintf("%s %s", op.Op, op.Path)
}

// failedTo names what a sequence that stops the node could not do.
func failedTo(op FileOp) string {
	if op.Op == OpMkdir {
		return fmt.Sprintf("create directory '%s'", op.Path)
	}
	return describeOp(op)
}

// --- the sequences ---

// replaceComputed is the one crash-safe replacement (replaceOps) of a file
// the executor computes off Step: a checkpoint, which ComputeEncodeTo
// encodes into the temporary file (write.Path); then fsync it, rename it
// over path, fsync dir. next resumes as after a sequence: with failed set
// if the write or a step after it failed.
func (en *env) replaceComputed(write Compute, path, dir string, next cont) {
	en.compute(write, computedWrite{tmp: write.Path, path: path, dir: dir, next: next})
}

// computedWrite resumes when replaceComputed's temporary file is written.
type computedWrite struct {
	tmp, path, dir string
	next           cont
}

func (c computedWrite) String() string {
	return fmt.Sprintf("computed %s: fsync it, rename it to %s, fsync %s, then %s", c.tmp, c.path, c.dir, c.next)
}

func (c computedWrite) resume(n *Node, r result) {
	if r.Err != IOOK {
		c.next.resume(n, result{IODone: r.IODone, failed: "write " + c.tmp})
		return
	}
	rest := replaceOps(FileOp{Op: OpWrite, Path: c.tmp}, c.path, c.dir)[1:] // the write is done
	n.run(rest, c.next)
}

// replaceOps is the one crash-safe file replacement every writer uses
// (config versions and pointer, term, snapshots, a truncated WAL segment):
// write tmp (write.Path), fsync it, rename it over path, fsync dir. A
// failed write or rename stops the sequence.
func replaceOps(write FileOp, path, dir string) []seqOp {
	return []seqOp{
		{op: write},
		{op: FileOp{Op: OpFsync, Path: write.Path}},
		{op: FileOp{Op: OpRename, Path: write.Path, To: path}},
		{op: FileOp{Op: OpFsyncDir, Path: dir}},
	}
}

// replaceDurably replaces path with data by way of tmp (replaceOps).
func (en *env) replaceDurably(tmp, path, dir string, data []byte, next cont) {
	en.run(replaceOps(FileOp{Op: OpWrite, Path: tmp, Data: data}, path, dir), next)
}

// appendOps appends data to a WAL segment and fsyncs it, and its directory
// when the segment is new. A failed append stops the sequence.
func appendOps(seg string, data []byte, newSeg bool, dir string) []seqOp {
	ops := []seqOp{{op: FileOp{Op: OpAppend, Path: seg, Data: data}}, {op: FileOp{Op: OpFsync, Path: seg}}}
	if newSeg {
		ops = append(ops, seqOp{op: FileOp{Op: OpFsyncDir, Path: dir}})
	}
	return ops
}

// mkdirOps creates each directory (0700), then fsyncs parent so the new
// entries are durable; a directory that cannot be made stops the node.
func mkdirOps(dirs []string, parent string) []seqOp {
	ops := make([]seqOp, 0, len(dirs)+1)
	for _, d := range dirs {
		ops = append(ops, seqOp{op: FileOp{Op: OpMkdir, Path: d}, onErr: errFatal, key: "fatal.mkdir"})
	}
	return append(ops, seqOp{op: FileOp{Op: OpFsyncDir, Path: parent}})
}

// removeOps unlinks paths (a missing one is fine; another failure is
// logged under key and the rest go on), then fsyncs dir.
func removeOps(paths []string, dir, key, pre string) []seqOp {
	ops := make([]seqOp, 0, len(paths)+1)
	for _, p := range paths {
		ops = append(ops, seqOp{op: FileOp{Op: OpRemove, Path: p}, onErr: errGoOn, missingOK: true, key: key, pre: pre})
	}
	return append(ops, seqOp{op: FileOp{Op: OpFsyncDir, Path: dir}})
}

// removeEachOps unlinks paths one at a time, each made durable (an fsync
// of dir) before the next; a failure other than a missing file stops the
// sequence.
func removeEachOps(paths []string, dir string) []seqOp {
	ops := make([]seqOp, 0, 2*len(paths))
	for _, p := range paths {
		ops = append(ops, seqOp{op: FileOp{Op: OpRemove, Path: p}, missingOK: true}, seqOp{op: FileOp{Op: OpFsyncDir, Path: dir}})
	}
	return ops
}

// readDurablyOps reads path and, if that worked, fsyncs it before its
// contents are handed on: what is counted must be durable, even if an
// earlier process died with it only in the page cache. A failed read stops
// the sequence (the next step decides what it means).
func readDurablyOps(path string) []seqOp {
	return []seqOp{{op: FileOp{Op: OpRead, Path: path, MaxSize: maxLogFile}}, {op: FileOp{Op: OpFsync, Path: path}}}
}

// listOps lists dir; a listing that fails stops the node under key.
func listOps(dir, key string) []seqOp {
	return []seqOp{{op: FileOp{Op: OpList, Path: dir}, onErr: errFatal, key: key}}
}
