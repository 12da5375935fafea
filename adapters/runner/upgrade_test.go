package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/xce-hpc/xce/adapters/fileio"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// upgradedConfig is a valid config different from sampleConfig.
func upgradedConfig(t testing.TB) []byte {
	t.Helper()
	c := &schema.ClusterConfig{ConfigGeneration: 40, ClusterName: "runner-upgraded", Port: 7001}
	c.Queues = []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 30, MaxAttempts: 5}, {Id: 2, Name: "q1", VisibilityTimeoutS: 60, MaxAttempts: 3}}
	b, err := schema.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bootSingle runs a provisioned single node until it is ready.
func bootSingle(t *testing.T, enable bool) (*Runner, string, <-chan error, context.CancelFunc) {
	t.Helper()
	dir := t.TempDir()
	provision(t, dir, sampleConfig(t))
	o := fastOpts(0, []string{"n0"})
	o.EnableUpgrade = enable
	r := New(Config{Node: newNode(t, o), Files: &fileio.Executor{Base: dir}, Log: zaptest.NewLogger(t), Seed: 1})
	ctx, cancel := context.WithCancel(context.Background())
	errc := start(ctx, r)
	select {
	case <-r.Ready():
	case err := <-errc:
		t.Fatalf("Run returned %v before ready", err)
	case <-time.After(waitBound):
		t.Fatal("not ready")
	}
	return r, dir, errc, cancel
}

// A single node with EnableUpgrade: Upgrade gets the reply (new tag, no
// standby) even though the node exits in the same step, and Run then
// returns *ExitError{Code: 0}; conf/current names the saved config with
// generation current+1.
func TestUpgradeRepliesThenExits(t *testing.T) {
	defer goleak.VerifyNone(t)
	r, dir, errc, cancel := bootSingle(t, true)
	defer cancel()
	blob := upgradedConfig(t)
	sum := sha256.Sum256(blob)
	ctx, stop := context.WithTimeout(context.Background(), waitBound)
	defer stop()
	rep, err := r.Upgrade(ctx, sm.UpgradeConfig{Bytes: blob, SHA256: sum[:], Peer: "admin"})
	if err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	if rep.Error != "" || rep.VersionTag == 0 || rep.AckedCount != 0 || rep.Primary != 0 {
		t.Fatalf("reply %+v", rep)
	}
	select {
	case err := <-errc:
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != 0 {
			t.Fatalf("Run = %v, want *ExitError code 0", err)
		}
	case <-time.After(waitBound):
		t.Fatal("Run did not return after the upgrade")
	}
	ptr, err := os.ReadFile(filepath.Join(dir, sm.PointerPath))
	if err != nil {
		t.Fatal(err)
	}
	name, err := sm.ParsePointer(ptr)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(filepath.Join(dir, sm.ConfDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if sm.TagOf(saved) != rep.VersionTag {
		t.Fatalf("conf/current names tag %016x, reply says %016x", sm.TagOf(saved), rep.VersionTag)
	}
	c, err := schema.DecodeClusterConfig(saved)
	if err != nil || c.GetConfigGeneration() != 2 || c.GetClusterName() != "runner-upgraded" {
		t.Fatalf("saved config %v, %v; want generation 2 of the upgraded config", c, err)
	}
	if bytes.Equal(saved, blob) {
		t.Fatal("saved the caller's bytes: the generation was not rewritten")
	}
	if st := r.Status(); st.Role != sm.RoleStopped || st.ConfigTag != rep.VersionTag {
		t.Fatalf("status after exit %+v", st)
	}
	// After Run: a late call is told the node stopped without taking
	// it (nothing applied), not that its outcome is unknown.
	if _, err := r.Upgrade(context.Background(), sm.UpgradeConfig{Bytes: blob, SHA256: sum[:], Peer: "admin"}); !errors.Is(err, ErrNotRunning) || errors.Is(err, ErrStopped) {
		t.Fatalf("Upgrade after exit: %v", err)
	}
	if _, err := r.Do(context.Background(), sm.JobRequest{Kind: sm.JobGet, ID: 1}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Do after exit: %v", err)
	}
	if _, err := r.Switchover(context.Background(), -1, "admin"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Switchover after exit: %v", err)
	}
}

// Without EnableUpgrade (the default, seed §5.3) the node refuses and
// keeps running.
func TestUpgradeRefusedWhenDisabled(t *testing.T) {
	defer goleak.VerifyNone(t)
	r, _, errc, cancel := bootSingle(t, false)
	blob := upgradedConfig(t)
	sum := sha256.Sum256(blob)
	rep, err := r.Upgrade(context.Background(), sm.UpgradeConfig{Bytes: blob, SHA256: sum[:], Peer: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Error == "" || rep.VersionTag != 0 {
		t.Fatalf("reply %+v, want a refusal", rep)
	}
	select {
	case err := <-errc:
		t.Fatalf("Run returned %v after a refused upgrade", err)
	case <-time.After(50 * time.Millisecond):
	}
	stopRun(t, cancel, errc)
}

// await prefers a delivered reply to a closed stop or a done ctx: the
// reply of the step that ended Run is never reported as ErrStopped.
func TestAwaitPrefersReply(t *testing.T) {
	stopped := make(chan struct{})
	close(stopped)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 {
		ch := make(chan int, 1)
		ch <- i
		ctx := context.Background()
		if i%2 == 1 {
			ctx = done
		}
		if v, err := await(ctx, ch, stopped); err != nil || v != i {
			t.Fatalf("iteration %d: %v, %v", i, v, err)
		}
	}
	if _, err := await(context.Background(), make(chan int, 1), stopped); !errors.Is(err, ErrStopped) {
		t.Fatalf("no reply, stopped: %v", err)
	}
	if _, err := await(done, make(chan int, 1), make(chan struct{})); !errors.Is(err, context.Canceled) {
		t.Fatalf("no reply, ctx done: %v", err)
	}
}
