package transport

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// The tarpit holds a refused connection for its hold time, then closes
// it; one past its capacity is closed at once; and when its run ends,
// every connection it holds is closed.
func TestTarpitHoldsThenCloses(t *testing.T) {
	p := newTarpit(2, 150*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.run(ctx); close(done) }()

	closedAfter := func(c net.Conn, start time.Time) <-chan time.Duration {
		ch := make(chan time.Duration, 1)
		go func() {
			_, _ = io.Copy(io.Discard, c) // returns once the other end is closed
			ch <- time.Since(start)
		}()
		return ch
	}
	start := time.Now()
	a, aPeer := net.Pipe()
	b, bPeer := net.Pipe()
	c, cPeer := net.Pipe()
	defer aPeer.Close()
	defer bPeer.Close()
	defer cPeer.Close()
	aDone := closedAfter(aPeer, start)
	p.put(a, start)
	// The first is taken off the queue by run at once; two more fill it.
	for p.heldNow() != 0 {
		time.Sleep(time.Millisecond)
	}
	bDone := closedAfter(bPeer, start)
	p.put(b, start)
	p.put(c, start)
	d, dPeer := net.Pipe()
	defer dPeer.Close()
	dDone := closedAfter(dPeer, start)
	p.put(d, start) // full: closed now
	if got := <-dDone; got > 100*time.Millisecond {
		t.Fatalf("a connection past the capacity was closed after %v, want at once", got)
	}
	if got := <-aDone; got < 140*time.Millisecond || got > time.Second {
		t.Fatalf("a held connection closed after %v, want its 150 ms hold", got)
	}
	if got := <-bDone; got < 140*time.Millisecond {
		t.Fatalf("the second closed after %v", got)
	}
	if got := <-closedAfter(cPeer, start); got > time.Second {
		t.Fatalf("the third closed after %v", got)
	}
	e, ePeer := net.Pipe()
	defer ePeer.Close()
	now := time.Now()
	eDone := closedAfter(ePeer, now)
	p.put(e, now)
	cancel()
	<-done
	if got := <-eDone; got > 100*time.Millisecond {
		t.Fatalf("a connection held when run ended closed after %v, want at once", got)
	}
}
