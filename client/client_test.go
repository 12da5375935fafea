package client_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/transport/fakenodes"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// Each fake node serves the real API handler (package api) in front of
// a door answering from a function; "down" nodes refuse connections.

type door = func(*wire.Request) *wire.Reply

func notPrimary(p int) door {
	return func(*wire.Request) *wire.Reply {
		return &wire.Reply{Status: sm.StatusEAGAIN, Error: "Not primary — redirect to primary", NotPrimary: true,
			Job: &sm.Reply{Primary: p}}
	}
}

func okReply(*wire.Request) *wire.Reply {
	return &wire.Reply{Job: &sm.Reply{OK: true}}
}

func unknownReply(*wire.Request) *wire.Reply {
	return &wire.Reply{Status: sm.StatusOutcomeUnknown, Error: "stepped down: outcome unknown"}
}

type fake struct {
	c   *fakenodes.Cluster
	mat *tlsconf.Material
}

func startFake(t *testing.T, up ...bool) *fake {
	t.Helper()
	return startFakeWithout(t, nil, up...)
}

// startFakeWithout is startFake with the procedures in without answered
// as by a version without them (fakenodes.StartWithout).
func startFakeWithout(t *testing.T, without []string, up ...bool) *fake {
	t.Helper()
	c := fakenodes.StartWithout(t, without, up...)
	mat, err := tlsconf.Load(filepath.Join(c.CertDir, "admin.crt"), filepath.Join(c.CertDir, "admin.key"), filepath.Join(c.CertDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return &fake{c: c, mat: mat}
}

func (f *fake) peers() []client.Peer {
	out := make([]client.Peer, len(f.c.Nodes))
	for i, n := range f.c.Nodes {
		out[i] = client.Peer{Name: n.Name, Addr: n.Addr}
	}
	return out
}

// newClient: the hedge never fires, so the others are dialled only once
// the preferred node failed, and the order of the sends is fixed whenever
// a single node is up after the fan-out.
func newClient(t *testing.T, peers []client.Peer, mat *tlsconf.Material, opt client.Options) *client.Client {
	t.Helper()
	if opt.HedgeDelay == 0 {
		opt.HedgeDelay = time.Hour
	}
	cl, err := client.New(peers, mat, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// sentTo is the nodes that got a request since the last Set, in --peers
// order (each test case has at most one request per node).
func (f *fake) sentTo() string {
	var got []string
	for _, n := range f.c.Nodes {
		for range n.Requests() {
			got = append(got, n.Name)
		}
	}
	return strings.Join(got, " ")
}

func ack(ctx context.Context, cl *client.Client) (*schema.JobResponse, error) {
	return cl.Ack(ctx, &schema.AckRequest{Handle: &schema.WalHandle{Id: 1, Attempt: 1}})
}

func get(ctx context.Context, cl *client.Client) (*schema.JobResponse, error) {
	return cl.Get(ctx, &schema.GetRequest{Id: 1})
}

// The search: redirects followed (chains too, loops not), down nodes
// passed over, an unknown outcome ends a mutation and not a read, a
// node's refusal ends it with its code.
func TestRouting(t *testing.T) {
	type call = func(context.Context, *client.Client) (*schema.JobResponse, error)
	cases := []struct {
		name    string
		up      []bool
		doors   []door // nil: "starting" (never reached in these cases)
		call    call
		sent    string // who got the request
		primary int    // known afterwards, -1 none
		wantErr error
	}{
		{"first is primary", []bool{true, true, false, false}, []door{okReply, okReply}, ack, "n0", 0, nil},
		{"redirect followed", []bool{true, true, false, true}, []door{notPrimary(3), okReply, nil, okReply}, ack, "n0 n3", 3, nil},
		{"unknown primary: the others", []bool{true, false, true, false}, []door{notPrimary(-1), nil, okReply}, ack, "n0 n2", 2, nil},
		{"a redirect chain is followed", []bool{true, false, true, true}, []door{notPrimary(3), nil, okReply, notPrimary(2)}, ack, "n0 n2 n3", 2, nil},
		{"redirect loop ends", []bool{true, true, false, false}, []door{notPrimary(1), notPrimary(0)}, ack, "n0 n1", -1, client.ErrNoPrimary},
		{"redirect to a down node, then the others", []bool{true, true, false, false}, []door{notPrimary(2), okReply}, ack, "n0 n1", 1, nil},
		{"nobody", []bool{true, false, false, false}, []door{notPrimary(-1)}, ack, "n0", -1, client.ErrNoPrimary},
		{"mutation, outcome unknown: stop", []bool{true, true, false, false}, []door{unknownReply, okReply}, ack, "n0", -1, client.ErrOutcomeUnknown},
		{"read, outcome unknown: the others", []bool{true, true, false, false}, []door{unknownReply, okReply}, get, "n0 n1", 1, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := startFake(t, c.up...)
			for i, d := range c.doors {
				if d != nil {
					f.c.Nodes[i].Set(d)
				}
			}
			cl := newClient(t, f.peers(), f.mat, client.Options{})
			_, err := c.call(context.Background(), cl)
			if got := f.sentTo(); got != c.sent {
				t.Errorf("sent to %q, want %q", got, c.sent)
			}
			if c.wantErr == nil && err != nil || c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
			p, ok := cl.Primary()
			if c.primary < 0 && ok || c.primary >= 0 && (!ok || p != c.primary) {
				t.Fatalf("known primary %d, %v; want %d", p, ok, c.primary)
			}
		})
	}
}

// A node's refusal of the input stops the search with its code and text;
// with nobody primary the error names every node and why.
func TestRefusalAndNoPrimaryList(t *testing.T) {
	f := startFake(t, true, true, false)
	f.c.Nodes[0].Set(func(*wire.Request) *wire.Reply {
		return &wire.Reply{Status: sm.StatusEINVAL, Error: `unknown queue "nope"`}
	})
	f.c.Nodes[1].Set(okReply)
	cl := newClient(t, f.peers(), f.mat, client.Options{})
	_, err := ack(context.Background(), cl)
	var ne *client.NodeError
	if !errors.As(err, &ne) || ne.Node != "n0" || ne.Code() != connect.CodeInvalidArgument ||
		connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), `unknown queue "nope"`) || f.sentTo() != "n0" {
		t.Fatalf("node error: %v, sent to %q", err, f.sentTo())
	}

	// A refused handle is failed_precondition, a missing job not_found.
	f.c.Nodes[0].Set(func(*wire.Request) *wire.Reply {
		return &wire.Reply{Job: &sm.Reply{OK: false}}
	})
	if _, err := ack(context.Background(), cl); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("refused handle: %v", err)
	}
	if _, err := get(context.Background(), cl); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("missing job: %v", err)
	}

	f.c.Nodes[0].Set(notPrimary(-1))
	f.c.Nodes[1].Set(notPrimary(-1))
	_, err = ack(context.Background(), cl)
	for _, want := range []string{"n0: Not primary", "n1: Not primary", "n2: dial"} {
		if !errors.Is(err, client.ErrNoPrimary) || !strings.Contains(err.Error(), want) {
			t.Errorf("no-primary error %q lacks %q", err, want)
		}
	}
}

// hangBound is what the tests allow a hung node to cost: far below the
// call timeout (5 s) that a blind wait would cost, generous for a noisy
// 2-core machine.
const hangBound = 2500 * time.Millisecond

// A first node that accepts TCP and never answers (a SIGSTOPped
// controller) costs the connect timeout at most, not the call timeout:
// the hedged dials reach the primary behind it, and the mutation is not
// "unknown".
func TestHungFirstNodeIsPassedOver(t *testing.T) {
	f := startFake(t, true, true)
	hung := newFrozenNode(t, "")
	f.c.Nodes[0].Set(okReply)
	f.c.Nodes[1].Set(notPrimary(1))
	// The hung node is "n1" to TLS, but hung before any handshake.
	peers := []client.Peer{{Name: "n1", Addr: hung.Addr()}, {Name: "n0", Addr: f.c.Nodes[0].Addr}}
	for _, r := range []struct {
		name string
		call func(context.Context, *client.Client) (*schema.JobResponse, error)
	}{{"mutation", ack}, {"read", get}} {
		t.Run(r.name, func(t *testing.T) {
			cl := newClient(t, peers, f.mat, client.Options{Timeout: 5 * time.Second, HedgeDelay: 100 * time.Millisecond})
			before := hung.accepted.Load()
			start := time.Now()
			_, err := r.call(context.Background(), cl)
			d := time.Since(start)
			t.Logf("past the hung node in %v", d)
			if err != nil {
				t.Fatal(err)
			}
			if hung.accepted.Load() == before {
				t.Fatal("the hung node was never dialled: the test does not test anything")
			}
			if d > hangBound {
				t.Fatalf("reaching the primary past a hung node took %v, want < %v", d, hangBound)
			}
			if p, ok := cl.Primary(); !ok || p != 1 {
				t.Fatalf("known primary %d, %v; want 1", p, ok)
			}
		})
	}
}

// The node that last answered as primary is tried first, alone, on its
// kept connection; when it hangs later, the others are reached within the
// bound and the new primary becomes the known one.
func TestKnownPrimaryFirst(t *testing.T) {
	f := startFake(t, true, true, true)
	front := newFrozenNode(t, f.c.Nodes[2].Addr) // n2, the primary, can be frozen
	peers := f.peers()
	peers[2].Addr = front.Addr()
	f.c.Nodes[0].Set(notPrimary(2))
	f.c.Nodes[1].Set(notPrimary(2))
	f.c.Nodes[2].Set(okReply)
	cl := newClient(t, peers, f.mat, client.Options{Timeout: 5 * time.Second})
	if _, err := ack(context.Background(), cl); err != nil || f.sentTo() != "n0 n2" {
		t.Fatalf("first call: %v, sent to %q; want the redirect n0 -> n2 only", err, f.sentTo())
	}
	for i := range f.c.Nodes {
		f.c.Nodes[i].Set([]door{notPrimary(2), notPrimary(2), okReply}[i]) // Set forgets the requests seen
	}
	accepted := front.accepted.Load()
	if _, err := ack(context.Background(), cl); err != nil || f.sentTo() != "n2" {
		t.Fatalf("second call: %v, sent to %q; want the known primary n2 only", err, f.sentTo())
	}
	if front.accepted.Load() != accepted {
		t.Fatal("the second call dialled n2 again instead of using the kept connection")
	}

	// n2 hangs; the cluster fails over to n1.
	front.Freeze()
	f.c.Nodes[0].Set(notPrimary(1))
	f.c.Nodes[1].Set(okReply)
	f.c.Nodes[2].Set(okReply)
	time.Sleep(1500 * time.Millisecond) // idle: the kept connection's ping notices the hang
	start := time.Now()
	_, err := ack(context.Background(), cl)
	d := time.Since(start)
	t.Logf("past the hung known primary in %v", d)
	if err != nil {
		t.Fatal(err)
	}
	if d > hangBound {
		t.Fatalf("reaching the new primary past the hung known one took %v, want < %v", d, hangBound)
	}
	if len(f.c.Nodes[2].Requests()) != 0 {
		t.Fatal("the hung node served a request")
	}
	if p, ok := cl.Primary(); !ok || p != 1 {
		t.Fatalf("known primary %d, %v; want 1", p, ok)
	}
}

// A mutation that reached the primary, which then hung before its answer
// came out, has an unknown outcome: reported as such, and not sent to the
// node that would have answered it. A read in the same spot goes on.
func TestSentThenHungIsNotRetried(t *testing.T) {
	f := startFake(t, true, true)
	front := newFrozenNode(t, f.c.Nodes[0].Addr)
	peers := f.peers()
	peers[0].Addr = front.Addr()
	hangAfter := func(req *wire.Request) *wire.Reply {
		if req.Status == nil { // not the client's check of the new connection
			front.Freeze() // the request arrived; the reply will not leave
		}
		return okReply(req)
	}
	f.c.Nodes[0].Set(hangAfter)
	f.c.Nodes[1].Set(okReply) // would accept it: must not be asked
	cl := newClient(t, peers, f.mat, client.Options{Timeout: time.Second})
	_, err := ack(context.Background(), cl)
	var ue *client.OutcomeUnknownError
	if !errors.Is(err, client.ErrOutcomeUnknown) || !errors.As(err, &ue) || ue.Node != "n0" {
		t.Fatalf("err %v, want an unknown outcome at n0", err)
	}
	if f.sentTo() != "n0" {
		t.Fatalf("sent to %q: a mutation of unknown outcome was sent elsewhere", f.sentTo())
	}
	if _, ok := cl.Primary(); ok {
		t.Fatal("a node that never answered became the known primary")
	}

	front.Thaw()
	f.c.Nodes[0].Set(hangAfter)
	f.c.Nodes[1].Set(okReply)
	if _, err := get(context.Background(), cl); err != nil || f.sentTo() != "n0 n1" {
		t.Fatalf("read: %v, sent to %q; want n0 then n1", err, f.sentTo())
	}
}

// A caller's cancelled context ends the search with its error; a client
// without peers says so; a request over the API's size limit is refused
// before anything is sent (never "outcome unknown").
func TestCallEdges(t *testing.T) {
	f := startFake(t, true)
	f.c.Nodes[0].Set(okReply)
	hung := newFrozenNode(t, "")
	cl := newClient(t, []client.Peer{{Name: "n0", Addr: hung.Addr()}}, f.mat, client.Options{ConnectTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := ack(ctx, cl); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled: %v", err)
	}
	if _, err := ack(context.Background(), newClient(t, nil, f.mat, client.Options{})); !errors.Is(err, client.ErrNoPrimary) {
		t.Fatalf("no peers: %v", err)
	}

	cl = newClient(t, f.peers(), f.mat, client.Options{})
	_, err := cl.Submit(context.Background(), &schema.SubmitRequest{Queue: "q", Payload: make([]byte, client.MaxMessageBytes)})
	if !errors.Is(err, client.ErrRefusedLocally) || errors.Is(err, client.ErrOutcomeUnknown) || len(f.c.Nodes[0].Requests()) != 0 {
		t.Fatalf("oversized request: %v (%d requests seen), want ErrRefusedLocally", err, len(f.c.Nodes[0].Requests()))
	}
	// Over the payload limit but within the message limit: the node's
	// one validation refuses it, definitely.
	_, err = cl.Submit(context.Background(), &schema.SubmitRequest{Queue: "q", Payload: make([]byte, sm.MaxJobPayload+1)})
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "payload") || len(f.c.Nodes[0].Requests()) != 0 {
		t.Fatalf("payload over the limit: %v", err)
	}
	if _, err := cl.Submit(context.Background(), &schema.SubmitRequest{Queue: "q", Payload: make([]byte, sm.MaxJobPayload)}); err != nil {
		t.Fatalf("a payload at the limit: %v", err)
	}
}

// The check of a new connection asks for no queue depths (the node then
// answers from its published status, with no look at its event loop);
// ClusterStatus asks for them.
func TestStatusAsksForQueuesOnlyWhenCalled(t *testing.T) {
	f := startFake(t, true)
	var mu sync.Mutex
	var asked []bool
	f.c.Nodes[0].Set(func(req *wire.Request) *wire.Reply {
		if st := req.Status; st != nil {
			mu.Lock()
			asked = append(asked, st.GetQueues())
			mu.Unlock()
			return &wire.Reply{StatusReply: &schema.StatusReply{}}
		}
		return okReply(req)
	})
	cl := newClient(t, f.peers(), f.mat, client.Options{Timeout: time.Second})
	if _, err := cl.ClusterStatus(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0] || !asked[1] {
		t.Fatalf("status requests asked for queues %v, want [false true]: the connection check, then the call", asked)
	}
}
