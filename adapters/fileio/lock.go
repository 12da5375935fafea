package fileio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockName is the lock file in a node's base directory.
const LockName = ".lock"

// ErrLocked: another process (a running daemon, an install) holds the
// node's work directory.
var ErrLocked = errors.New("work directory in use by another process")

// Lock takes an exclusive, non-blocking flock(2) on base/.lock, so two
// daemons never share a work directory and `xce-config install` never
// writes under a running node. The lock dies with the process.
func Lock(base string) (release func(), err error) {
	path := filepath.Join(base, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, base)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
