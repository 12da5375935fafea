package transport

import (
	"context"
	"net"
	"time"
)

// tarpit holds refused connections open, unread, for a while before it
// closes them. A flood that reopens each connection as soon as it is
// closed would otherwise turn every refusal into another accept at once:
// a thousand connections refused and reopened made tens of thousands of
// accepts a second, which cost the node the CPU its other work needed.
// Held, each costs a file descriptor and the kernel's buffers, no
// goroutine and no TLS work; past its capacity a refused connection is
// closed at once.
type tarpit struct {
	q    chan held
	hold time.Duration
}

type held struct {
	c     net.Conn
	until time.Time
}

// Defaults of the tarpit: how long a refused connection is held, and how
// many are held at once.
const (
	tarpitHold = 2 * time.Second
	tarpitCap  = 4096
)

func newTarpit(capacity int, hold time.Duration) *tarpit {
	return &tarpit{q: make(chan held, capacity), hold: hold}
}

// put holds c, or closes it now when the tarpit is full.
func (p *tarpit) put(c net.Conn, now time.Time) {
	select {
	case p.q <- held{c: c, until: now.Add(p.hold)}:
	default:
		c.Close()
	}
}

// run closes each held connection when its time is up (they come in the
// order they expire: one hold for all), and every one still held when ctx
// ends.
func (p *tarpit) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		var h held
		select {
		case h = <-p.q:
		case <-ctx.Done():
			p.drain()
			return
		}
		if d := time.Until(h.until); d > 0 {
			t.Reset(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				h.c.Close()
				p.drain()
				return
			}
		}
		h.c.Close()
	}
}

func (p *tarpit) drain() {
	for {
		select {
		case h := <-p.q:
			h.c.Close()
		default:
			return
		}
	}
}

// heldNow is how many connections the tarpit holds, for tests.
func (p *tarpit) heldNow() int { return len(p.q) }
