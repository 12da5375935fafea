package fileio

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// inBackground runs f on an operating-system thread of its own whose nice
// value is raised by nice, and waits for it. The goroutine never unlocks
// the thread, so the thread ends with the goroutine and its priority with
// it: no other goroutine ever runs at the lowered priority (raising a
// thread's priority back needs a privilege the node may not have). f runs
// whether or not the priority could be lowered; the error says it could
// not.
func inBackground(nice int, f func()) error {
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if perr := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice); perr != nil {
			err = fmt.Errorf("setpriority(%d) of a background compute's thread: %w", nice, perr)
		}
		f()
	}()
	<-done
	return err
}
