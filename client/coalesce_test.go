package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// countingConn records the writes that reach it.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func pipe(t *testing.T) (*CoalescingConn, *countingConn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	cc := &countingConn{Conn: a}
	return NewCoalescingConn(cc), cc, b
}

// TestCoalescingConnJoinsBursts: a message written as two pieces back to
// back reaches the socket as fewer writes, every byte in order.
func TestCoalescingConnJoinsBursts(t *testing.T) {
	for _, on := range []bool{false, true} {
		c, under, peer := pipe(t)
		if on {
			c.Coalesce()
		}
		const bursts = 200
		var want bytes.Buffer
		for i := range bursts {
			fmt.Fprintf(&want, "head%03d", i)
			fmt.Fprintf(&want, "body%03d", i)
		}
		got := make(chan []byte)
		go func() {
			b, _ := io.ReadAll(io.LimitReader(peer, int64(want.Len())))
			got <- b
		}()
		for i := range bursts {
			for _, part := range []string{"head", "body"} {
				if _, err := fmt.Fprintf(c, "%s%03d", part, i); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(100 * time.Microsecond) // the next message comes later
		}
		if b := <-got; !bytes.Equal(b, want.Bytes()) {
			t.Fatalf("coalescing %v: the bytes arrived changed: %q", on, b)
		}
		under.mu.Lock()
		n := under.writes
		under.mu.Unlock()
		switch {
		case !on && n != 2*bursts:
			t.Errorf("not coalescing: %d writes reached the socket, want %d", n, 2*bursts)
		case on && n > bursts*3/2:
			t.Errorf("coalescing: %d writes reached the socket for %d two-piece messages", n, bursts)
		}
	}
}

// TestCoalescingConnPushesBack: a peer that reads nothing holds at most
// coalesceMax bytes; the writer then waits.
func TestCoalescingConnPushesBack(t *testing.T) {
	c, _, peer := pipe(t)
	c.Coalesce()
	wrote := make(chan int, 1)
	go func() {
		n := 0
		chunk := make([]byte, 4<<10)
		for n < 4*coalesceMax {
			if _, err := c.Write(chunk); err != nil {
				break
			}
			n += len(chunk)
		}
		wrote <- n
	}()
	select {
	case n := <-wrote:
		t.Fatalf("%d bytes taken with nobody reading", n)
	case <-time.After(200 * time.Millisecond):
	}
	// Reading lets the writer finish.
	go func() { _, _ = io.Copy(io.Discard, peer) }()
	select {
	case n := <-wrote:
		if n != 4*coalesceMax {
			t.Fatalf("wrote %d bytes, want %d", n, 4*coalesceMax)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer never finished once the peer read")
	}
}

// TestCoalescingConnErrors: a failed background write fails the next
// Write; Close writes out what is pending first, and does not wait
// forever for a peer that reads nothing.
func TestCoalescingConnErrors(t *testing.T) {
	c, _, peer := pipe(t)
	c.Coalesce()
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(peer); got <- b }()
	if _, err := c.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; string(b) != "last words" {
		t.Fatalf("the peer read %q before the close, want the pending bytes", b)
	}
	var err error
	for range 100 {
		if _, err = c.Write([]byte("x")); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("a write after the connection failed: %v, want its error", err)
	}

	c2, _, _ := pipe(t) // nobody reads
	c2.Coalesce()
	if _, err := c2.Write([]byte("never read")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = c2.Close()
	if d := time.Since(start); d > closeFlushBound+time.Second {
		t.Fatalf("Close took %v with a peer that reads nothing (bound %v)", d, closeFlushBound)
	}
}
