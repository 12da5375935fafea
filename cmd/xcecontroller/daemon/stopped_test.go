package daemon

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/xce-hpc/xce/adapters/fileio"
	"github.com/xce-hpc/xce/adapters/runner"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/peerlist"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// stoppedRunner is a runner whose Run has ended: a single node with no
// config dies at its first election.
func stoppedRunner(t *testing.T) *runner.Runner {
	t.Helper()
	n, err := sm.NewNode(sm.DefaultOptions(0, []string{"n0"}))
	if err != nil {
		t.Fatal(err)
	}
	rn := runner.New(runner.Config{Node: n, Files: &fileio.Executor{Base: t.TempDir()}, Log: zap.NewNop(), Seed: 1})
	errc := make(chan error, 1)
	go func() { errc <- rn.Run(context.Background()) }()
	select {
	case err := <-errc:
		if ee := new(runner.ExitError); !errors.As(err, &ee) {
			t.Fatalf("Run ended with %v, want the node's exit", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a node without a config did not stop")
	}
	return rn
}

// A call that reaches a node after its runner stopped (a restart after a
// config upgrade, a shutdown) was never taken: it is answered as a
// standby's "not primary" redirect, which the API forwards, never as an
// unknown outcome.
func TestStoppedNodeRedirects(t *testing.T) {
	rn := stoppedRunner(t)
	peers := []peerlist.Peer{{Name: "n0"}}
	for _, req := range []*wire.Request{
		{Job: &sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q", Payload: []byte("x")}},
		{Switchover: &sm.Switchover{To: -1}},
		{Upgrade: &schema.UpgradeConfigRequest{Bytes: []byte{1}, Sha256: make([]byte, 32)}},
	} {
		rep := answer(context.Background(), req, "admin", rn, &x509.Certificate{}, peers, 0)
		if rep.Status != sm.StatusEAGAIN || !rep.NotPrimary || rep.Error != "Not primary — redirect to primary" {
			t.Fatalf("%+v: reply %+v, want a not-primary redirect", req, rep)
		}
		switch {
		case req.Job != nil && (rep.Job == nil || !rep.Job.NotPrimary || rep.Job.Primary != -1):
			t.Fatalf("job reply body %+v", rep.Job)
		case req.Switchover != nil && (rep.Switchover == nil || rep.Switchover.Outcome != sm.SwitchoverNotPrimary || rep.Switchover.Primary != -1):
			t.Fatalf("switchover reply body %+v", rep.Switchover)
		case req.Upgrade != nil && (rep.Upgrade == nil || rep.Upgrade.GetPrimary() != -1 || rep.Upgrade.GetVersionTag() != 0):
			t.Fatalf("upgrade reply body %+v", rep.Upgrade)
		}
	}
}
