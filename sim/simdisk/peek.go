package simdisk

import "strings"

// Peek calls fn with the path and contents of every file under dir (a
// directory path such as "data/wal") in the current view, or in the
// durable view (what a crash with no luck keeps) when durable is set. It
// does not copy: fn must not modify data nor operate on the disk
// meanwhile; it may keep data, whose bytes never change. A checker reading
// a log after every fsync uses it instead of DurableFiles, which copies the
// whole disk.
func (d *Disk) Peek(dir string, durable bool, fn func(path string, data []byte)) {
	var v view = currentView{}
	if durable {
		v = durableView{}
	}
	n := d.rootDir()
	for _, name := range strings.Split(dir, "/") {
		if n == nil || !n.isDir {
			return
		}
		n = v.entries(n)[name]
	}
	if n == nil || !n.isDir {
		return
	}
	walk(n, dir+"/", v, 1, func(p string, f *inode) {
		if !f.isDir {
			fn(p, v.file(f).data)
		}
	})
}

// DurableData is DurableFile without the copy: the caller must not modify
// the bytes, which never change, and may keep them. A checker mirroring a
// log after every fsync uses it (a copy of the whole segment per fsync was
// a sixth of what the simulator allocated).
func (d *Disk) DurableData(path string) ([]byte, bool) {
	n := d.rootDir()
	for more := true; more; {
		if n == nil || !n.isDir {
			return nil, false
		}
		var name string
		name, path, more = strings.Cut(path, "/")
		n = n.durEntries[name]
	}
	if n == nil || n.isDir {
		return nil, false
	}
	return n.durable, true
}
