package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// ackResults answers a job request with one job and, per handle it
// carries, true except for handle id 2.
func ackResults(req *wire.Request) *wire.Reply {
	var oks []bool
	if req.Job != nil { // a status call (a new connection's confirmation) has none
		for _, h := range req.Job.Handles {
			oks = append(oks, h.ID != 2)
		}
	}
	return &wire.Reply{Job: &sm.Reply{OK: true, OKs: oks, Jobs: []queue.Job{{ID: 3}}}}
}

func claimWithAcks(ctx context.Context, cl *client.Client, ids ...uint64) (*schema.JobResponse, error) {
	r := &schema.ClaimRequest{Queue: "q", Host: "h", Max: 16}
	for _, id := range ids {
		r.Ack = append(r.Ack, &schema.WalHandle{Id: id, Attempt: 1})
	}
	return cl.Claim(ctx, r)
}

// A claim carrying acks is one request, and its reply says per handle
// which acks were taken (a refused one is false, not an error).
func TestClaimWithAcksIsOneCall(t *testing.T) {
	f := startFake(t, true)
	f.c.Nodes[0].Set(ackResults)
	cl := newClient(t, f.peers(), f.mat, client.Options{})
	rep, err := claimWithAcks(context.Background(), cl, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if oks := rep.GetOks(); len(oks) != 2 || !oks[0] || oks[1] || len(rep.GetJobs()) != 1 {
		t.Fatalf("reply %v: want oks [true false] and one job", rep)
	}
	var jobs []*sm.JobRequest
	for _, r := range f.c.Nodes[0].Requests() {
		if r.Job != nil {
			jobs = append(jobs, r.Job)
		}
	}
	if len(jobs) != 1 || jobs[0].Kind != sm.JobClaim || len(jobs[0].Handles) != 2 {
		t.Fatalf("the node got %v, want one claim carrying both acks", jobs)
	}
}

// A claim with acks whose answer is lost after it was sent: the acks'
// outcome is unknown (ErrOutcomeUnknown), and the claim is not sent to
// another node.
func TestClaimWithAcksSentThenHungIsUnknown(t *testing.T) {
	f := startFake(t, true, true)
	front := newFrozenNode(t, f.c.Nodes[0].Addr)
	peers := f.peers()
	peers[0].Addr = front.Addr()
	f.c.Nodes[0].Set(func(req *wire.Request) *wire.Reply {
		if req.Status == nil { // not the client's check of the new connection
			front.Freeze() // the request arrived; the reply will not leave
		}
		return ackResults(req)
	})
	f.c.Nodes[1].Set(ackResults) // would accept it: must not be asked
	cl := newClient(t, peers, f.mat, client.Options{Timeout: time.Second})
	_, err := claimWithAcks(context.Background(), cl, 1)
	var ue *client.OutcomeUnknownError
	if !errors.Is(err, client.ErrOutcomeUnknown) || !errors.As(err, &ue) || ue.Node != "n0" {
		t.Fatalf("err %v, want an unknown outcome at n0", err)
	}
	if f.sentTo() != "n0" {
		t.Fatalf("sent to %q: a claim with acks of unknown outcome was sent elsewhere", f.sentTo())
	}
}
