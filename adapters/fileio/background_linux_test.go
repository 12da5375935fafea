package fileio

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// niceOf is the nice value of this process's thread tid (/proc stat
// field 19).
func niceOf(t *testing.T, tid int) (int, bool) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		return 0, false // the thread has ended
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	n, err := strconv.Atoi(f[19-3])
	if err != nil {
		t.Fatalf("stat of thread %d: %q", tid, s)
	}
	return n, true
}

// TestInBackgroundLowersOnlyItsThread: f runs on a thread whose nice
// value is the caller's plus nice (at most MaxNice), the caller's is
// unchanged, and no thread of the process keeps the lowered priority
// once it returns.
func TestInBackgroundLowersOnlyItsThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self := unix.Gettid()
	base, _ := niceOf(t, self)
	for _, nice := range []int{3, MaxNice + 5} {
		want := min(base+nice, MaxNice)
		var tid, inside int
		if err := inBackground(nice, func() {
			tid = unix.Gettid()
			inside, _ = niceOf(t, tid)
		}); err != nil {
			t.Fatal(err)
		}
		if tid == self || inside != want {
			t.Fatalf("nice %d: ran on thread %d (caller %d) at nice %d, want another at %d", nice, tid, self, inside, want)
		}
		if got, _ := niceOf(t, self); got != base {
			t.Fatalf("the caller's thread went from nice %d to %d", base, got)
		}
		// The thread ends with its goroutine, shortly after f returns.
		for deadline := time.Now().Add(2 * time.Second); ; {
			if _, alive := niceOf(t, tid); !alive {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("thread %d still runs after its background work", tid)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
