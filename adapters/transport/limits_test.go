package transport

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"xce/adapters/wire"
	"xce/schema"
)

// Connections cannot hold more than their share (issue 8 defect 3): an
// idle one is closed after IdleTimeout; a header whose body does not come
// within BodyTimeout is closed; frame bodies being read are bounded in
// total (MaxBuffered), so a client past the budget waits and is closed;
// a client certificate has at most MaxConnsPerClient connections.
func TestConnectionLimits(t *testing.T) {
	pk, _ := certs(t)
	peers := peersOf(freeAddrs(t, 2))
	a := start(t, 0, peers, pk.mats["n0"], func(c *Config) {
		c.Client = func(string, *schema.ClientRequest) *schema.ClientReply { return &schema.ClientReply{} }
		// Apart, so that each subtest sees the timeout it is about.
		c.IdleTimeout = 1500 * time.Millisecond
		c.BodyTimeout = 200 * time.Millisecond
		c.MaxConnsPerClient = 4
	})
	addr := peers[0].Addr
	clientHello := &schema.Hello{Kind: schema.Hello_CLIENT, Name: "op"}
	hdr := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

	t.Run("idle", func(t *testing.T) {
		c := rawDial(t, addr, pk.mats["operator"], clientHello)
		start := time.Now()
		expectClosed(t, c)
		if d := time.Since(start); d < time.Second || d > 4*time.Second {
			t.Fatalf("idle connection closed after %v, want the 1.5 s idle timeout", d)
		}
	})
	t.Run("stalled body", func(t *testing.T) {
		c := rawDial(t, addr, pk.mats["operator"], clientHello)
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
		peers := peersOf(freeAddrs(t, 2))
		a := start(t, 0, peers, pk.mats["n0"], func(c *Config) {
			c.Client = func(string, *schema.ClientRequest) *schema.ClientReply { return &schema.ClientReply{} }
			c.BodyTimeout = 2 * time.Second
			c.MaxBuffered = 2 * wire.MaxFrameSize
		})
		addr := peers[0].Addr
		var held []*tls.Conn
		for i := 0; i < 2; i++ {
			c := rawDial(t, addr, pk.mats["operator"], clientHello)
			if _, err := c.Write(hdr(wire.MaxFrameSize - 8)); err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		if !eventually(time.Second, func() bool {
			if a.tr.buffered.TryAcquire(16 + 1) {
				a.tr.buffered.Release(16 + 1)
				return false
			}
			return true
		}) {
			t.Fatal("two stalled frames did not take the buffer budget")
		}
		// A frame that cannot get its share within the body timeout fails
		// busy, the connection is not served.
		quick := &Transport{cfg: Config{BodyTimeout: 50 * time.Millisecond}, buffered: a.tr.buffered}
		if _, err := quick.admit(t.Context(), held[0])(wire.MaxFrameSize); !errors.Is(err, ErrBusy) {
			t.Fatalf("admit past the budget: %v, want ErrBusy", err)
		}
		for _, h := range held {
			expectClosed(t, h)
		}
		if !eventually(time.Second, func() bool {
			if a.tr.buffered.TryAcquire(2 * wire.MaxFrameSize) {
				a.tr.buffered.Release(2 * wire.MaxFrameSize)
				return true
			}
			return false
		}) {
			t.Fatal("the budget was not released when the stalled connections closed")
		}
	})
	t.Run("per client", func(t *testing.T) {
		var open []*tls.Conn
		for i := 0; i < 4; i++ {
			open = append(open, rawDial(t, addr, pk.mats["operator"], clientHello))
		}
		time.Sleep(50 * time.Millisecond)
		c := rawDial(t, addr, pk.mats["operator"], clientHello)
		expectClosed(t, c)
		a.log.wait(t, "max 4 per client")
		for _, o := range open {
			o.Close()
		}
	})
}
