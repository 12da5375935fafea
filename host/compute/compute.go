// Package compute is the one executor of sm's Computes: the work on the
// job state that takes time with the number of jobs (a snapshot encoded,
// encoded into its file, imported, verified), which sm hands off its Step
// to run on a lane of its own (host/loop.LaneCompute). Exec runs one and
// classifies the result into the completion sm receives. The daemon, the
// tools and the simulator share it, as they share host/fileop; the one
// Compute that writes a file (ComputeEncodeTo) and the one that reads
// one (ComputeVerify) do so on the FS they are given, with fileop's path
// rules.
package compute

import (
	"errors"
	"fmt"
	"io"

	"github.com/xce-hpc/xce/host/fileop"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// Exec executes c and returns its completion (ID = c.ID). It never panics
// on a malformed Compute: one without what its kind works on fails with
// IOFailed. fsys is used by ComputeEncodeTo and ComputeVerify only (nil
// is refused there).
func Exec(fsys fileop.FS, c sm.Compute) sm.Computed {
	r := sm.Computed{ID: c.ID}
	var err error
	switch c.Kind {
	case sm.ComputeEncode:
		if c.Snapshot == nil {
			return failed(c.ID, errors.New("encode without a snapshot"))
		}
		if r.Data, err = c.Snapshot.Encode(); err != nil {
			return failed(c.ID, fmt.Errorf("cannot encode the snapshot: %w", err))
		}
	case sm.ComputeEncodeTo:
		err = encodeTo(fsys, c)
	case sm.ComputeImport:
		if c.Load == nil {
			return failed(c.ID, errors.New("import without a snapshot load"))
		}
		r.Loaded = importPiped(c.Load, c.Data)
	case sm.ComputeBuild:
		if c.Snapshot == nil {
			return failed(c.ID, errors.New("build without a snapshot"))
		}
		if err = c.Snapshot.Build(); err != nil {
			return failed(c.ID, fmt.Errorf("cannot build the snapshot's state: %w", err))
		}
	case sm.ComputeVerify:
		if c.Check == nil {
			return failed(c.ID, errors.New("verify without a snapshot check"))
		}
		bad, rerr := verify(fsys, c)
		if rerr != nil {
			return failed(c.ID, rerr)
		}
		if bad != nil {
			return sm.Computed{ID: c.ID, Err: sm.IOCorrupt, Detail: fmt.Sprintf("%s: %v", c.Path, bad)}
		}
	default:
		err = fmt.Errorf("unknown compute %s (%d)", c.Kind, c.Kind)
	}
	if err != nil {
		return failed(c.ID, err)
	}
	return r
}

// verify reads the file c.Path and checks it as c.Check describes:
// through the file a window at a time on a ReadStreamFS (a received
// snapshot is hundreds of MB at a million jobs, and a fresh buffer that
// size cost a second of page faults), else read whole. bad is what is
// wrong with the file's bytes; rerr, that they could not be read.
func verify(fsys fileop.FS, c sm.Compute) (bad, rerr error) {
	if fsys == nil {
		return nil, fmt.Errorf("verify %s without a file system", c.Path)
	}
	if err := fileop.CheckPath(c.Path, true); err != nil {
		return nil, err
	}
	if sfs, ok := fsys.(fileop.ReadStreamFS); ok {
		err := sfs.ReadStream(c.Path, c.MaxSize, func(r io.ReaderAt, size int64) error {
			bad = c.Check.VerifyAt(r, size)
			if errors.Is(bad, wal.ErrSnapshotRead) {
				return bad
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return bad, nil
	}
	data, _, err := fsys.Read(c.Path, c.MaxSize)
	if err != nil {
		return nil, err
	}
	return c.Check.Verify(data), nil
}

// encodeTo writes c.Snapshot's encoding to c.Path: as it is encoded on a
// StreamFS (sm.SnapshotData.EncodeTo, never held whole), else encoded
// first and written in one Write.
func encodeTo(fsys fileop.FS, c sm.Compute) error {
	if c.Snapshot == nil {
		return errors.New("encode-to without a snapshot")
	}
	if fsys == nil {
		return fmt.Errorf("encode-to %s without a file system", c.Path)
	}
	if err := fileop.CheckPath(c.Path, false); err != nil {
		return err
	}
	if sfs, ok := fsys.(fileop.StreamFS); ok {
		if err := sfs.WriteStream(c.Path, c.Snapshot.EncodeTo); err != nil {
			return fmt.Errorf("cannot write the snapshot: %w", err)
		}
		return nil
	}
	data, err := c.Snapshot.Encode()
	if err != nil {
		return fmt.Errorf("cannot encode the snapshot: %w", err)
	}
	return fsys.Write(c.Path, data, false)
}

// failed is the completion of a Compute that failed with err, classified
// as a file operation's error is (fileop.Class).
func failed(id uint64, err error) sm.Computed {
	return sm.Computed{ID: id, Err: fileop.Class(err), Detail: err.Error()}
}

// importInFlight is how many batches an import's stages share.
const importInFlight = 4

// importPiped is l.Import(data) with its two stages (sm's Decode and
// ImportBuild) on two goroutines, batches of jobs handed from one to the
// other in file order: decoding the file and building the state are each
// about half of a large recovery's import. The result is Import's,
// however the goroutines are scheduled (the build stops at the first
// error in file order, and then the decoder is stopped).
func importPiped(l *sm.SnapshotLoad, data []byte) *sm.LoadedSnapshot {
	full := make(chan *sm.ImportBatch, importInFlight)
	free := make(chan *sm.ImportBatch, importInFlight)
	for range importInFlight - 1 {
		free <- sm.NewImportBatch()
	}
	stop := make(chan struct{})
	go func() {
		defer close(full)
		last := l.Decode(data, sm.NewImportBatch(), func(b *sm.ImportBatch) *sm.ImportBatch {
			select {
			case full <- b:
			case <-stop:
				return nil
			}
			select {
			case b = <-free:
				return b
			case <-stop:
				return nil
			}
		})
		if last != nil {
			select {
			case full <- last:
			case <-stop:
			}
		}
	}()
	b := l.NewBuild()
	for x := range full {
		if !b.Add(x) {
			close(stop)
			for range full { // until the decoder has stopped
			}
			break
		}
		free <- x // never blocks: there are importInFlight batches in all
	}
	return b.Done()
}
