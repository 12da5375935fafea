package api_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// seen records the job requests a door was given.
type seen struct {
	mu   sync.Mutex
	reqs []*sm.JobRequest
}

func (s *seen) add(r *wire.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Job != nil {
		s.reqs = append(s.reqs, r.Job)
	}
}

func (s *seen) all() []*sm.JobRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*sm.JobRequest(nil), s.reqs...)
}

// claimAnswer answers a claim with one job and, per handle it carries,
// its ack result (refused for the id refuse); a long poll after delay.
func claimAnswer(s *seen, refuse uint64, delay time.Duration) func(*wire.Request) *wire.Reply {
	return func(r *wire.Request) *wire.Reply {
		s.add(r)
		var oks []bool
		if r.Job != nil { // a status call (a new connection's confirmation) has none
			if r.Job.Wait > 0 {
				time.Sleep(delay) // a long poll that finds a job late
			}
			for _, h := range r.Job.Handles {
				oks = append(oks, h.ID != refuse)
			}
		}
		return &wire.Reply{Job: &sm.Reply{OK: true, OKs: oks,
			Jobs: []queue.Job{{ID: 9, Claims: 1, Claim: queue.ClaimStamp{Term: 1, LSN: 5}}}}}
	}
}

func acks(ids ...uint64) []*schema.WalHandle {
	hs := make([]*schema.WalHandle, len(ids))
	for i, id := range ids {
		hs[i] = &schema.WalHandle{Id: id, Attempt: 1, ClaimTerm: 1, ClaimLsn: 3}
	}
	return hs
}

// newClient is a client of c once its nodes listen.
func newClient(t *testing.T, c *cluster, opt client.Options) *client.Client {
	t.Helper()
	listening(t, c)
	cl, err := client.New(c.peers, c.mats["admin"], opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// A Claim carrying acks is one request to the node (a claim whose handles
// are the acks), and its reply has both the jobs and the per-handle
// results: a refused handle is false there, not an error.
func TestClaimCarriesAcks(t *testing.T) {
	c := startCluster(t, true)
	var s seen
	c.nodes[0].set(claimAnswer(&s, 2, 0))
	cl := newClient(t, c, client.Options{})
	rep, err := cl.Claim(context.Background(), &schema.ClaimRequest{Queue: "q", Host: "h", Max: 16, Ack: acks(1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if oks := rep.GetOks(); len(oks) != 2 || !oks[0] || oks[1] || len(rep.GetJobs()) != 1 || rep.GetJobs()[0].GetId() != 9 {
		t.Fatalf("reply %v: want oks [true false] and job 9", rep)
	}
	reqs := s.all()
	if len(reqs) != 1 || reqs[0].Kind != sm.JobClaim || reqs[0].Max != 16 || len(reqs[0].Handles) != 2 ||
		reqs[0].Handles[0].ID != 1 || reqs[0].Handles[1].ID != 2 || reqs[0].Handles[1].Claim.LSN != 3 {
		t.Fatalf("the node was given %v, want one claim carrying handles 1 and 2", reqs)
	}
}

// More acks than wire.MaxJobHandles: invalid_argument, the node never
// asked.
func TestClaimAcksBounded(t *testing.T) {
	c := startCluster(t, true)
	var s seen
	c.nodes[0].set(claimAnswer(&s, 0, 0))
	cl := newClient(t, c, client.Options{})
	hs := make([]*schema.WalHandle, wire.MaxJobHandles+1)
	for i := range hs {
		hs[i] = &schema.WalHandle{Id: uint64(i + 1)}
	}
	_, err := cl.Claim(context.Background(), &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1, Ack: hs})
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("claim with %d acks: %v, want invalid_argument", len(hs), err)
	}
	if reqs := s.all(); len(reqs) != 0 {
		t.Fatalf("the node was given %d requests, want none", len(reqs))
	}
	if _, err := cl.Claim(context.Background(), &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1, Ack: hs[:wire.MaxJobHandles]}); err != nil {
		t.Fatalf("claim with %d acks: %v", wire.MaxJobHandles, err)
	}
}

// A long poll carrying acks: the node gets both the wait and the acks,
// and a client whose call timeout is shorter than the wait still gets
// the answer.
func TestLongPollClaimCarriesAcks(t *testing.T) {
	c := startCluster(t, true)
	var s seen
	c.nodes[0].set(claimAnswer(&s, 0, 1500*time.Millisecond))
	cl := newClient(t, c, client.Options{Timeout: 500 * time.Millisecond})
	rep, err := cl.Claim(context.Background(), &schema.ClaimRequest{Queue: "q", Host: "h", Max: 1, WaitMs: 3000, Ack: acks(4)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.GetOks()) != 1 || !rep.GetOks()[0] || len(rep.GetJobs()) != 1 {
		t.Fatalf("reply %v: want oks [true] and a job", rep)
	}
	if reqs := s.all(); len(reqs) != 1 || reqs[0].Wait != 3*time.Second || len(reqs[0].Handles) != 1 {
		t.Fatalf("the node was given %v, want one claim waiting 3000 ms with one ack", reqs)
	}
}

// A standby forwards a claim with its acks to the primary.
func TestStandbyForwardsClaimAcks(t *testing.T) {
	c := startCluster(t, true, true)
	c.nodes[0].set(notPrimary(1))
	var s seen
	c.nodes[1].set(claimAnswer(&s, 0, 0))
	listening(t, c)
	cl, err := client.New(c.peers[:1], c.mats["admin"], client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rep, err := cl.Claim(context.Background(), &schema.ClaimRequest{Queue: "q", Host: "h", Max: 2, Ack: acks(5, 6, 7)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.GetOks()) != 3 || len(rep.GetJobs()) != 1 {
		t.Fatalf("reply through the standby %v: want three ack results and a job", rep)
	}
	if reqs := s.all(); len(reqs) != 1 || len(reqs[0].Handles) != 3 {
		t.Fatalf("the primary was given %v, want the claim with its three acks", reqs)
	}
}

// listening waits until every node of c accepts connections.
func listening(t *testing.T, c *cluster) {
	t.Helper()
	for _, p := range c.peers {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			conn, err := net.Dial("tcp", p.Addr)
			if err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never listened: %v", p.Name, err)
			}
		}
	}
}
