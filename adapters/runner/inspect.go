package runner

import (
	"context"
	"errors"

	"github.com/xce-hpc/xce/sm"
)

// ErrNotRunning is returned by Inspect, Do, Upgrade and Switchover
// called once Run has ended: the node never took the call, so nothing
// was applied (unlike ErrStopped).
var ErrNotRunning = errors.New("runner: node stopped; the call was not taken, nothing applied")

// inspectCall runs f on the loop goroutine between two steps.
type inspectCall struct {
	f    func(n *sm.Node)
	done chan struct{}
}

func (c *inspectCall) run(n *sm.Node) {
	c.f(n)
	close(c.done)
}

// Inspect runs f on the node from the loop goroutine, between two steps,
// and returns once it has run: f may call the node's read-only methods
// (never Step) and must not keep n. It fails with ctx's error when the
// loop does not take it in time (so a caller learns the loop is stuck),
// and with ErrNotRunning once Run has ended; f has then not run and never
// will.
func (r *Runner) Inspect(ctx context.Context, f func(n *sm.Node)) error {
	c := &inspectCall{f: f, done: make(chan struct{})}
	if err := r.post(ctx, clientCall{inspect: c}); err != nil {
		return err // ErrNotRunning once Run has ended
	}
	<-c.done // the loop took it (ops is unbuffered) and runs it at once
	return nil
}
