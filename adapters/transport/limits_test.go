package transport

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/schema"
)

// Peer connections cannot hold more than their share (issue 8 defect 3):
// an idle one is closed after IdleTimeout; a header whose body does not
// come within BodyTimeout is closed; frame bodies being read are bounded
// in total (MaxBuffered), so a connection past the budget waits and is
// closed. (The API's connections: TestAPIConnectionLimits.)
func TestConnectionLimits(t *testing.T) {
	pk, _ := certs(t)
	peers := peersOf(freeAddrs(t, 2))
	start(t, 0, peers, pk.mats["n0"], func(c *Config) {
		// Apart, so that each subtest sees the timeout it is about.
		c.IdleTimeout = 1500 * time.Millisecond
		c.BodyTimeout = 200 * time.Millisecond
	})
	addr := peers[0].Addr
	peerHello := &schema.Hello{Kind: schema.Hello_PEER, Name: "n1"}
	hdr := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

	t.Run("idle", func(t *testing.T) {
		c := rawDial(t, addr, pk.mats["n1"], peerHello)
		start := time.Now()
		expectClosed(t, c)
		if d := time.Since(start); d < time.Second || d > 4*time.Second {
			t.Fatalf("idle connection closed after %v, want the 1.5 s idle timeout", d)
		}
	})
	t.Run("stalled body", func(t *testing.T) {
		c := rawDial(t, addr, pk.mats["n1"], peerHello)
		start := time.Now()
		if _, err := c.Write(append(hdr(1000), 1, 2, 3)); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a stalled body held its connection %v, past the 200 ms body timeout", d)
		}
	})
	t.Run("buffered bytes", func(t *testing.T) {
		// Two near-maximum frames fill the budget: nothing more may be
		// buffered until they are released (here by their body timeout,
		// long enough on this node for the checks in between).
		peers := peersOf(freeAddrs(t, 3))
		a := start(t, 0, peers, pk.mats["n0"], func(c *Config) {
			c.BodyTimeout = 2 * time.Second
			c.MaxBuffered = 2 * wire.MaxFrameSize
		})
		addr := peers[0].Addr
		var held []*tls.Conn
		for i := 0; i < 2; i++ {
			name := []string{"n1", "n2"}[i] // two peers: a peer's new connection replaces its old one
			c := rawDial(t, addr, pk.mats[name], &schema.Hello{Kind: schema.Hello_PEER, Name: name})
			if _, err := c.Write(hdr(wire.MaxFrameSize - 8)); err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		if !eventually(time.Second, func() bool {
			if a.tr.peerBuffered.TryAcquire(16 + 1) {
				a.tr.peerBuffered.Release(16 + 1)
				return false
			}
			return true
		}) {
			t.Fatal("two stalled frames did not take the buffer budget")
		}
		// A frame that cannot get its share within the body timeout fails
		// busy, the connection is not served.
		quick := &Transport{cfg: Config{BodyTimeout: 50 * time.Millisecond}, peerBuffered: a.tr.peerBuffered}
		if _, err := quick.admit(t.Context(), held[0])(wire.MaxFrameSize); !errors.Is(err, ErrBusy) {
			t.Fatalf("admit past the budget: %v, want ErrBusy", err)
		}
		for _, h := range held {
			expectClosed(t, h)
		}
		if !eventually(time.Second, func() bool {
			if a.tr.peerBuffered.TryAcquire(2 * wire.MaxFrameSize) {
				a.tr.peerBuffered.Release(2 * wire.MaxFrameSize)
				return true
			}
			return false
		}) {
			t.Fatal("the budget was not released when the stalled connections closed")
		}
	})
}

// Peer frames have a budget of their own (issue 20 finding 4, as the
// hostile suite found it): with every byte of the API bodies' budget
// held, as a client's 100 MiB body holds it, a peer's heartbeat is still
// delivered at once, not refused busy after the body timeout.
func TestPeerFramesDoNotWaitForClientBodies(t *testing.T) {
	pk, _ := certs(t)
	peers := peersOf(freeAddrs(t, 2))
	a := start(t, 0, peers, pk.mats["n0"], func(c *Config) {
		c.BodyTimeout = 300 * time.Millisecond
		c.MaxBuffered = 4 * wire.MaxFrameSize
	})
	if !a.tr.buffered.TryAcquire(4 * wire.MaxFrameSize) {
		t.Fatal("the API bodies' budget is not free at start")
	}
	defer a.tr.buffered.Release(4 * wire.MaxFrameSize)
	b := start(t, 1, peers, pk.mats["n1"], nil)
	begin := time.Now()
	in := sendUntil(t, b.tr, 0, payloadMsg(), a.tr)
	if in.From != 1 {
		t.Fatalf("delivered from %d", in.From)
	}
	if d := time.Since(begin); d > 250*time.Millisecond {
		t.Fatalf("a peer frame took %v with the API bodies' budget taken", d)
	}
}
