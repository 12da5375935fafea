package sm

import "xce/sm/wal"

// Closure-taking forms of the sequences in cont.go, while the callers'
// continuations are converted to data.

func (n *Node) replaceDurablyFn(tmp, path, dir string, data []byte, fail func(what string, d IODone), then func()) {
	n.replaceDurablyOp(FileOp{Op: OpWrite, Path: tmp, Data: data}, path, dir, fail, then)
}

func (n *Node) replaceDurablyOp(write FileOp, path, dir string, fail func(what string, d IODone), then func()) {
	n.run(replaceOps(write, path, dir), fn(func(r result) {
		if r.failed != "" {
			fail(r.failed, r.IODone)
			return
		}
		then()
	}))
}

// replaceComputed is replaceDurablyOp for a file the executor computes
// off Step (a checkpoint: ComputeEncodeTo writes the temporary file):
// once it is written, the rest of the one replacement sequence (fsync it,
// rename it over path, fsync dir) makes it durable.
func (n *Node) replaceComputed(write Compute, path, dir string, fail func(what string, d IODone), then func()) {
	n.compute(write, fn(func(r result) {
		if r.Err != IOOK {
			fail("write "+write.Path, r.IODone)
			return
		}
		rest := replaceOps(FileOp{Op: OpWrite, Path: write.Path}, path, dir)[1:] // the write is done
		n.run(rest, fn(func(r result) {
			if r.failed != "" {
				fail(r.failed, r.IODone)
				return
			}
			then()
		}))
	}))
}

func (n *Node) mkdirs(dirs []string, then func()) { n.mkdirs2(dirs, "", then) }

func (n *Node) mkdirs2(dirs []string, parent string, then func()) {
	n.run(mkdirOps(dirs, parent), fn(func(result) { then() }))
}

func (n *Node) removeFiles(paths []string, dir string, then func()) {
	n.run(removeOps(paths, dir, "wal.remove-failed", ""), fn(func(result) { then() }))
}

func (n *Node) removeEach(paths []string, fail func(what string, d IODone), then func()) {
	n.run(removeEachOps(paths, wal.WALDir), fn(func(r result) {
		if r.failed != "" {
			fail(r.failed, r.IODone)
			return
		}
		then()
	}))
}

func (n *Node) readDurably(path string, k func(IODone)) {
	n.run(readDurablyOps(path), fn(func(r result) { k(r.IODone) }))
}

func (n *Node) listNames(dir string, then func([]string)) {
	n.run(listOps(dir, "fatal.recovery"), fn(func(r result) { then(r.names()) }))
}

// as runs f with o as the owner of the operations it starts.
func (n *Node) as(o owner, f func()) {
	prev := n.own(o)
	f()
	n.cur = prev
}
