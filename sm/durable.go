package sm

// replaceDurably is the one crash-safe file replacement every writer uses
// (config versions and pointer, term, snapshots, a truncated WAL segment):
// write tmp, fsync it, rename it over path, fsync dir. A failed write or
// rename calls fail with what failed (fsync failures are fatal in io);
// then runs once the replacement is durable.
func (n *Node) replaceDurably(tmp, path, dir string, data []byte, fail func(what string, d IODone), then func()) {
	n.replaceDurablyOp(FileOp{Op: OpWrite, Path: tmp, Data: data}, path, dir, fail, then)
}

// replaceDurablyOp is replaceDurably with the write given: its Path is the
// temporary file.
func (n *Node) replaceDurablyOp(write FileOp, path, dir string, fail func(what string, d IODone), then func()) {
	tmp := write.Path
	n.io(write, func(d IODone) {
		if d.Err != IOOK {
			fail("write "+tmp, d)
			return
		}
		n.io(FileOp{Op: OpFsync, Path: tmp}, func(IODone) {
			n.io(FileOp{Op: OpRename, Path: tmp, To: path}, func(d IODone) {
				if d.Err != IOOK {
					fail("rename "+tmp+" -> "+path, d)
					return
				}
				n.io(FileOp{Op: OpFsyncDir, Path: dir}, func(IODone) { then() })
			})
		})
	})
}
