package client_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
