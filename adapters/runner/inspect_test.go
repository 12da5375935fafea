package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/xce-hpc/xce/adapters/fileio"
	"github.com/xce-hpc/xce/sm"
)

// Inspect runs its function on the loop while Run runs, fails with the
// caller's deadline before Run starts, and with ErrNotRunning after it
// ended.
func TestInspect(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	provision(t, dir, sampleConfig(t))
	node := newNode(t, fastOpts(0, []string{"n0"}))
	r := New(Config{Node: node, Files: &fileio.Executor{Base: dir}, Log: zaptest.NewLogger(t), Seed: 1})
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if err := r.Inspect(short, func(*sm.Node) { t.Error("ran before Run") }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Inspect before Run = %v, want the deadline", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := start(ctx, r)
	<-r.Ready()
	var role sm.Role
	var got *sm.Node
	if err := r.Inspect(context.Background(), func(n *sm.Node) { role, got = n.Role(), n }); err != nil {
		t.Fatalf("Inspect while running: %v", err)
	}
	if got != node || role != sm.RolePrimary {
		t.Errorf("Inspect saw node %p role %v, want %p primary", got, role, node)
	}
	stopRun(t, cancel, errc)
	if err := r.Inspect(context.Background(), func(*sm.Node) { t.Error("ran after Run") }); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Inspect after Run = %v, want ErrNotRunning", err)
	}
}
