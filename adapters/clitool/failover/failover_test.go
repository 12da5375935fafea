package failover_test

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"xce/adapters/clitool/failover"
	"xce/adapters/daemon"
	"xce/adapters/tlsconf"
	"xce/adapters/transport/fakenodes"
	"xce/schema"
	"xce/sm"
)

// hangBound is what the tests allow a hung node to cost. The old client
// waited its full request timeout (5 s by default) on a hung node; the
// bound is generous so that a noisy 2-core machine does not fail it,
// while still far below what the old behaviour cost.
const hangBound = 2500 * time.Millisecond

// frozenNode is a TCP front for a node that can be frozen like a
// SIGSTOPped process: the kernel still accepts connections (the listener
// stays open), but no byte goes through any more in either direction.
// With no target it is hung from the start.
type frozenNode struct {
	t        *testing.T
	ln       net.Listener
	target   string
	accepted atomic.Int32
	frozen   atomic.Bool
	stop     chan struct{}

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newFrozenNode(t *testing.T, target string) *frozenNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &frozenNode{t: t, ln: ln, target: target, stop: make(chan struct{})}
	f.frozen.Store(target == "")
	f.wg.Go(f.accept)
	t.Cleanup(func() {
		close(f.stop)
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *frozenNode) Addr() string { return f.ln.Addr().String() }
func (f *frozenNode) Freeze()      { f.frozen.Store(true) }
func (f *frozenNode) Thaw()        { f.frozen.Store(false) }

func (f *frozenNode) track(c net.Conn) {
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.mu.Unlock()
}

func (f *frozenNode) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.accepted.Add(1)
		f.track(c)
		if f.frozen.Load() {
			continue // accepted by the kernel, never served
		}
		up, err := net.Dial("tcp", f.target)
		if err != nil {
			c.Close()
			continue
		}
		f.track(up)
		f.wg.Go(func() { f.pipe(up, c) })
		f.wg.Go(func() { f.pipe(c, up) })
	}
}

// pipe copies src to dst, holding every chunk while frozen.
func (f *frozenNode) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for f.frozen.Load() {
				select {
				case <-f.stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}

type cluster struct {
	nodes []*fakenodes.Node
	mat   *tlsconf.Material
}

func startNodes(t *testing.T, n int) *cluster {
	t.Helper()
	up := make([]bool, n)
	for i := range up {
		up[i] = true
	}
	c := fakenodes.Start(t, up...)
	mat, err := tlsconf.Load(filepath.Join(c.CertDir, "admin.crt"), filepath.Join(c.CertDir, "admin.key"), filepath.Join(c.CertDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{nodes: c.Nodes, mat: mat}
}

// peers parses "name=addr,..." built from pairs.
func peers(t *testing.T, pairs ...string) []daemon.Peer {
	t.Helper()
	var parts []string
	for i := 0; i+1 < len(pairs); i += 2 {
		parts = append(parts, pairs[i]+"="+pairs[i+1])
	}
	ps, _, err := daemon.ParsePeers(strings.Join(parts, ","))
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func standby(primary int32) func(*schema.ClientRequest) *schema.ClientReply {
	return func(*schema.ClientRequest) *schema.ClientReply {
		return &schema.ClientReply{Status: sm.StatusEAGAIN, Error: "Not primary — redirect to primary",
			Body: &schema.ClientReply_JobReply{JobReply: &schema.JobReply{Primary: primary}}}
	}
}

func primaryOK(*schema.ClientRequest) *schema.ClientReply {
	return &schema.ClientReply{Body: &schema.ClientReply_JobReply{JobReply: &schema.JobReply{Ok: true}}}
}

func classify(_ daemon.Peer, rep *schema.ClientReply) (failover.Verdict, error) {
	switch rep.GetStatus() {
	case sm.StatusOK:
		return failover.Done, nil
	case sm.StatusOutcomeUnknown:
		return failover.Unknown, nil
	case sm.StatusEAGAIN:
		return failover.Next, nil
	default:
		return failover.Done, errors.New(rep.GetError())
	}
}

func submit() failover.Request {
	return failover.Request{Msg: &schema.ClientRequest{Op: &schema.ClientRequest_Job{Job: &schema.JobRequest{
		Kind: schema.JobRequest_ENQUEUE, Queue: "batch"}}}, Classify: classify}
}

func get() failover.Request {
	return failover.Request{Msg: &schema.ClientRequest{Op: &schema.ClientRequest_Job{Job: &schema.JobRequest{
		Kind: schema.JobRequest_GET, Id: 1}}}, ReadOnly: true, Classify: classify}
}

func timed(t *testing.T, what string, cl *failover.Client, r failover.Request) (*failover.Result, time.Duration, error) {
	t.Helper()
	start := time.Now()
	res, err := cl.Call(context.Background(), r)
	d := time.Since(start)
	t.Logf("%s: %v", what, d)
	return res, d, err
}

// A first peer that accepts TCP and never answers (a SIGSTOPped
// controller) costs the connect timeout at most, not the request timeout:
// the mutation reaches the primary behind it, and is not "unknown".
func TestHungFirstPeerIsPassedOver(t *testing.T) {
	c := startNodes(t, 2)
	hung := newFrozenNode(t, "")
	c.nodes[0].Set(primaryOK)
	c.nodes[1].Set(standby(1))
	ps := peers(t, "hung", hung.Addr(), "n0", c.nodes[0].Addr, "n1", c.nodes[1].Addr)
	for _, r := range []struct {
		name string
		req  failover.Request
	}{{"mutation", submit()}, {"read", get()}} {
		t.Run(r.name, func(t *testing.T) {
			cl := failover.New(ps, c.mat, 5*time.Second) // the old client waited these 5 s on the hung peer
			before := hung.accepted.Load()
			res, d, err := timed(t, "hung first peer to primary", cl, r.req)
			if err != nil || res.Name != "n0" {
				t.Fatalf("result %+v, err %v", res, err)
			}
			if hung.accepted.Load() == before {
				t.Fatal("the hung peer was never dialled: the test does not test anything")
			}
			if d > hangBound {
				t.Fatalf("reaching the primary past a hung peer took %v, want < %v", d, hangBound)
			}
			if p, ok := cl.Primary(); !ok || p != 1 {
				t.Fatalf("known primary %d, %v; want 1", p, ok)
			}
		})
	}
}

// The peer that last answered as primary is tried first, alone; when it
// hangs later, the others are reached within the bound and the new
// primary becomes the known one.
func TestKnownPrimaryFirst(t *testing.T) {
	c := startNodes(t, 3)
	front := newFrozenNode(t, c.nodes[2].Addr) // n2, the primary, can be frozen
	ps := peers(t, "n0", c.nodes[0].Addr, "n1", c.nodes[1].Addr, "n2", front.Addr())
	c.nodes[0].Set(standby(2))
	c.nodes[1].Set(standby(2))
	c.nodes[2].Set(primaryOK)
	cl := failover.New(ps, c.mat, 5*time.Second)
	cl.ConnectTimeout = 2 * time.Second // a hedge of 500 ms: n1 is not dialled on a noisy machine
	if res, err := cl.Call(context.Background(), submit()); err != nil || res.Name != "n2" {
		t.Fatalf("first request: %+v, %v", res, err)
	}
	if len(c.nodes[0].Requests()) != 1 || len(c.nodes[1].Requests()) != 0 {
		t.Fatalf("first request: n0 asked %d times, n1 %d; want the redirect n0 -> n2 only",
			len(c.nodes[0].Requests()), len(c.nodes[1].Requests()))
	}

	c.nodes[0].Set(standby(2)) // Set also forgets the requests seen
	c.nodes[1].Set(standby(2))
	c.nodes[2].Set(primaryOK)
	if res, err := cl.Call(context.Background(), submit()); err != nil || res.Name != "n2" {
		t.Fatalf("second request: %+v, %v", res, err)
	}
	if len(c.nodes[0].Requests())+len(c.nodes[1].Requests()) != 0 || len(c.nodes[2].Requests()) != 1 {
		t.Fatalf("second request: n0 %d, n1 %d, n2 %d requests; want the known primary n2 only",
			len(c.nodes[0].Requests()), len(c.nodes[1].Requests()), len(c.nodes[2].Requests()))
	}

	// n2 hangs; the cluster fails over to n1.
	front.Freeze()
	c.nodes[0].Set(standby(1))
	c.nodes[1].Set(primaryOK)
	c.nodes[2].Set(primaryOK)
	cl.ConnectTimeout = 0 // the defaults from here on
	res, d, err := timed(t, "hung known primary to the new one", cl, submit())
	if err != nil || res.Name != "n1" {
		t.Fatalf("after the hang: %+v, %v", res, err)
	}
	if d > hangBound {
		t.Fatalf("reaching the new primary past the hung known one took %v, want < %v", d, hangBound)
	}
	if len(c.nodes[2].Requests()) != 0 {
		t.Fatal("the hung node served a request")
	}
	if p, ok := cl.Primary(); !ok || p != 1 {
		t.Fatalf("known primary %d, %v; want 1", p, ok)
	}
}

// A mutation that reached the primary, which then hung before its answer
// came out, has an unknown outcome: reported as such and not sent to the
// node that would have answered it. A read in the same spot goes on.
func TestSentThenHung(t *testing.T) {
	c := startNodes(t, 2)
	front := newFrozenNode(t, c.nodes[0].Addr)
	ps := peers(t, "n0", front.Addr(), "n1", c.nodes[1].Addr)
	hangAfter := func(req *schema.ClientRequest) *schema.ClientReply {
		front.Freeze() // the request arrived; the reply will not leave
		return primaryOK(req)
	}
	c.nodes[0].Set(hangAfter)
	c.nodes[1].Set(primaryOK) // would accept it: must not be asked
	cl := failover.New(ps, c.mat, time.Second)
	_, err := cl.Call(context.Background(), submit())
	var ue *failover.UnknownOutcomeError
	if !errors.Is(err, failover.ErrUnknownOutcome) || !errors.As(err, &ue) || ue.Peer != "n0" {
		t.Fatalf("err %v, want an unknown outcome at n0", err)
	}
	if len(c.nodes[0].Requests()) != 1 || len(c.nodes[1].Requests()) != 0 {
		t.Fatalf("n0 got %d requests, n1 %d: a mutation of unknown outcome was sent elsewhere",
			len(c.nodes[0].Requests()), len(c.nodes[1].Requests()))
	}
	if _, ok := cl.Primary(); ok {
		t.Fatal("a node that never answered became the known primary")
	}

	front.Thaw()
	c.nodes[0].Set(hangAfter)
	res, err := cl.Call(context.Background(), get())
	if err != nil || res.Name != "n1" {
		t.Fatalf("read: %+v, %v; want n1's answer", res, err)
	}
	if len(c.nodes[0].Requests()) != 1 {
		t.Fatalf("n0 got %d reads, want 1", len(c.nodes[0].Requests()))
	}
}

// A caller's cancelled context ends the search with its error, and a
// client without peers says so.
func TestCallEdges(t *testing.T) {
	ps := peers(t, "n0", "127.0.0.1:1")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	cl := failover.New(ps, nil, 0)
	cl.ConnectTimeout = time.Hour
	cl.Dial = func(ctx context.Context, _ string) (failover.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if _, err := cl.Call(ctx, submit()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled: %v", err)
	}
	if _, err := failover.New(nil, nil, 0).Call(context.Background(), submit()); !errors.Is(err, failover.ErrNoPrimary) {
		t.Fatalf("no peers: %v", err)
	}
	if _, err := cl.Call(context.Background(), failover.Request{}); err == nil {
		t.Fatal("a request without a message was accepted")
	}
}

// A request the wire cannot carry (a payload above sm.MaxJobPayload) is
// refused before any node is dialled: ErrRefusedLocally, never "outcome
// unknown" (issue 8 defect 2).
func TestTooLargeRefusedLocally(t *testing.T) {
	ps := peers(t, "n0", "127.0.0.1:1")
	cl := failover.New(ps, nil, 0)
	dialled := false
	cl.Dial = func(context.Context, string) (failover.Conn, error) {
		dialled = true
		return nil, errors.New("no")
	}
	r := submit()
	r.Msg.GetJob().Payload = make([]byte, sm.MaxJobPayload+1)
	_, err := cl.Call(context.Background(), r)
	if !errors.Is(err, failover.ErrRefusedLocally) || errors.Is(err, failover.ErrUnknownOutcome) {
		t.Fatalf("oversized payload: %v, want ErrRefusedLocally", err)
	}
	if dialled {
		t.Fatal("a request refused locally dialled a node")
	}
	r.Msg.GetJob().Payload = make([]byte, sm.MaxJobPayload) // the limit itself travels
	if _, err := cl.Call(context.Background(), r); errors.Is(err, failover.ErrRefusedLocally) {
		t.Fatalf("a payload at the limit was refused: %v", err)
	}
}
