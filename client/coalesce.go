package client

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// coalesceMax bounds what a CoalescingConn holds unwritten: a writer
	// past it waits for the socket, so a peer that does not read still
	// pushes back.
	coalesceMax = 64 << 10
	// closeFlushBound bounds how long Close waits for pending bytes to be
	// written (a peer that reads nothing cannot hold a Close).
	closeFlushBound = time.Second
)

// CoalescingConn sends what its writers hand it in quick succession as
// one write. HTTP/2 in net/http flushes a message's HEADERS and its DATA
// separately, so under TLS a call costs two records, two write syscalls
// and two wake-ups of the reader each way where one would do (the node's
// profile under load: docs/performance.md). Both ends of the API use it
// under TLS: package client on the connections it dials, the node's
// transport on the API connections it accepts.
//
// Once Coalesce is called, Write copies p and returns; the bytes go out
// from one goroutine per burst, after the writers had a chance to add
// more (runtime.Gosched). At most coalesceMax bytes wait: past that a
// Write waits for the socket. A write error is returned by the next
// Write. Close writes out what is pending first, within closeFlushBound.
// Before Coalesce (a TLS handshake, the peer protocol) it writes through.
type CoalescingConn struct {
	net.Conn
	on atomic.Bool

	mu       sync.Mutex
	drained  sync.Cond // signalled when a background write ends
	buf      []byte    // pending, not yet handed to Conn
	spare    []byte    // the last buffer written, for reuse
	flushing bool      // a background write is under way
	err      error     // the first write error, sticky
}

// NewCoalescingConn wraps c (the raw connection under TLS); it writes
// through until Coalesce.
func NewCoalescingConn(c net.Conn) *CoalescingConn {
	cc := &CoalescingConn{Conn: c}
	cc.drained.L = &cc.mu
	return cc
}

// Coalesce turns coalescing on; call it before the connection is shared
// between writers.
func (c *CoalescingConn) Coalesce() { c.on.Store(true) }

func (c *CoalescingConn) Write(p []byte) (int, error) {
	if !c.on.Load() {
		return c.Conn.Write(p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.err == nil && len(c.buf) > 0 && len(c.buf)+len(p) > coalesceMax {
		c.drained.Wait()
	}
	if c.err != nil {
		return 0, c.err
	}
	c.buf = append(c.buf, p...)
	if !c.flushing {
		c.flushing = true
		go c.flush()
	}
	return len(p), nil
}

// flush writes what is pending until nothing is.
func (c *CoalescingConn) flush() {
	runtime.Gosched() // let the writers of this burst add their next frames
	c.mu.Lock()
	for len(c.buf) > 0 && c.err == nil {
		out := c.buf
		c.buf, c.spare = c.spare[:0], nil
		c.mu.Unlock()
		_, err := c.Conn.Write(out)
		c.mu.Lock()
		if cap(out) <= coalesceMax {
			c.spare = out[:0]
		}
		if err != nil {
			c.err = err
		}
		c.drained.Broadcast()
	}
	c.buf = c.buf[:0] // after an error nothing more is written
	c.flushing = false
	c.drained.Broadcast()
	c.mu.Unlock()
}

// Close writes out what is pending (for at most closeFlushBound), then
// closes the connection.
func (c *CoalescingConn) Close() error {
	c.mu.Lock()
	if c.flushing {
		// Unblocks a write to a peer that reads nothing.
		_ = c.Conn.SetWriteDeadline(time.Now().Add(closeFlushBound))
	}
	for c.flushing {
		c.drained.Wait()
	}
	c.mu.Unlock()
	return c.Conn.Close()
}
