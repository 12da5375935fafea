package transport

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Admission before authentication (issue 20). Every accepted connection
// holds a handshake slot from the moment it is accepted until its TLS
// handshake and its first byte or Hello tell what it is (at most
// HandshakeTimeout); a connection without a slot is closed at once, before
// any TLS work. Slots come from two kinds of pool, so that no stranger can
// take the peers' way in:
//
//   - a source whose address is a --peers host's address has a pool of its
//     own (PeerHandshakes per such address), and no rate limit: the other
//     controllers dial from their --peers address (see Transport.dial);
//   - every other source address may hold HandshakesPerSource slots, all of
//     them together Handshakes, and may open NewConnsPerSecond connections
//     a second (a burst of twice that), which bounds the handshakes a
//     certificate holder can make a node compute.
//
// A flood from one stranger address therefore costs that address its own
// few slots and the accept loop's closes; a flood from many addresses takes
// the strangers' pool but never a peer address's. What a pool cannot tell
// apart is two sources behind one address: a program on a controller's own
// host shares that host's peer pool (docs/operations.md, "Threat model").

// Defaults of the admission limits (Config's zero values).
const (
	DefaultHandshakes          = 256
	DefaultHandshakesPerSource = 16
	DefaultPeerHandshakes      = 128
	DefaultNewConnsPerSecond   = 64
	// sourceIdle: a stranger address with no slot and a full bucket this
	// long is forgotten, so the table stays as small as the addresses that
	// are active now.
	sourceIdle = 10 * time.Second
	// maxSources bounds the strangers' table; past it, the addresses with
	// no slot held are pruned at once.
	maxSources = 4096
)

// Refusal reasons of the gate, for logs and metrics.
const (
	RefusedSource   = "source"    // the address holds its HandshakesPerSource slots
	RefusedPool     = "pool"      // the strangers hold all Handshakes slots
	RefusedRate     = "rate"      // the address opened connections faster than NewConnsPerSecond
	RefusedPeerPool = "peer-pool" // a peer address holds its PeerHandshakes slots
	RefusedClients  = "clients"   // MaxConns API connections are open
	RefusedPerCN    = "per-cn"    // the certificate holds MaxConnsPerClient API connections
	// Evicted counts slots taken from connections that had read the
	// least of a full pool (not a refusal of the new connection).
	Evicted = "evicted"
)

// RefusalReasons lists every reason, in a fixed order.
var RefusalReasons = []string{RefusedSource, RefusedPool, RefusedRate, RefusedPeerPool, RefusedClients, RefusedPerCN, Evicted}

type gateLimits struct {
	handshakes, perSource, peerPool int
	rate                            rate.Limit
	burst                           int
}

// evictAge: a slot this old may be taken by a new connection when its
// pool is full, the one that has read the fewest bytes first. A client's
// handshake sends its ClientHello at once and is done within a few round
// trips, so by then it has been read from; a connection that sent nothing
// (or three bytes) in that time is the flood's, and gives way. Without
// this, a flood from a peer's own address kept that address's pool full
// and a restarted standby could not rejoin until the flood ended.
const evictAge = 100 * time.Millisecond

// gate hands out handshake slots. Its methods are safe for concurrent use.
type gate struct {
	lim     gateLimits
	peerIPs map[netip.Addr]bool

	mu        sync.Mutex
	sources   map[netip.Addr]*source
	strangers []*slot // the slots strangers hold, all sources

	refused sync.Map // reason -> *atomic.Uint64
}

type source struct {
	slots []*slot
	last  time.Time // last connection accepted or refused
	lim   *rate.Limiter
}

// slot is one connection's place while it is not yet known what it is.
type slot struct {
	src   *source
	peer  bool          // from a --peers address's pool
	c     net.Conn      // closed when the slot is taken from it
	read  *atomic.Int64 // bytes its handshake has read
	since time.Time
	gone  bool // given back or taken (g.mu)
}

func newGate(lim gateLimits, peerIPs map[netip.Addr]bool) *gate {
	return &gate{lim: lim, peerIPs: peerIPs, sources: make(map[netip.Addr]*source)}
}

// addrOf is the source address of a connection, IPv4-in-IPv6 unmapped so
// that one host has one key.
func addrOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// enter takes a slot for connection c from addr at now, whose handshake
// counts the bytes it reads in read. When the pool is full, a slot older
// than evictAge that has read the fewest bytes is taken from its
// connection, which is closed. enter returns the function that gives the
// slot back (idempotent), or the refusal reason.
func (g *gate) enter(addr netip.Addr, now time.Time, c net.Conn, read *atomic.Int64) (leave func(), refused string) {
	var victim *slot
	defer func() {
		if victim != nil {
			victim.c.Close() // outside g.mu: its handshake fails and it goes
		}
	}()
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sources[addr]
	peer := g.peerIPs[addr]
	if s == nil {
		if !peer && len(g.sources) >= maxSources {
			g.prune(now, 0)
		}
		s = &source{lim: rate.NewLimiter(g.lim.rate, g.lim.burst)}
		g.sources[addr] = s
	}
	s.last = now
	switch {
	case peer && len(s.slots) >= g.lim.peerPool:
		if victim = pick(s.slots, now); victim == nil {
			return nil, g.refuse(RefusedPeerPool)
		}
	case peer:
	case !s.lim.AllowN(now, 1):
		return nil, g.refuse(RefusedRate)
	case len(s.slots) >= g.lim.perSource:
		if victim = pick(s.slots, now); victim == nil {
			return nil, g.refuse(RefusedSource)
		}
	case len(g.strangers) >= g.lim.handshakes:
		if victim = pick(g.strangers, now); victim == nil {
			return nil, g.refuse(RefusedPool)
		}
	}
	if victim != nil {
		g.release(victim)
		g.refuse(Evicted)
	}
	sl := &slot{src: s, peer: peer, c: c, read: read, since: now}
	s.slots = append(s.slots, sl)
	if !peer {
		g.strangers = append(g.strangers, sl)
	}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.release(sl)
	}, ""
}

// pick is the slot of slots to take for a new connection: of those older
// than evictAge, the one that has read the fewest bytes, the oldest of
// those; nil when none is that old.
func pick(slots []*slot, now time.Time) *slot {
	var best *slot
	var bestRead int64
	for _, sl := range slots {
		if now.Sub(sl.since) < evictAge {
			continue
		}
		n := sl.read.Load()
		if best == nil || n < bestRead || n == bestRead && sl.since.Before(best.since) {
			best, bestRead = sl, n
		}
	}
	return best
}

// release gives sl back (g.mu held); a second call does nothing.
func (g *gate) release(sl *slot) {
	if sl.gone {
		return
	}
	sl.gone = true
	sl.src.slots = without(sl.src.slots, sl)
	if !sl.peer {
		g.strangers = without(g.strangers, sl)
	}
}

// without is slots with sl removed (order is not kept).
func without(slots []*slot, sl *slot) []*slot {
	for i, x := range slots {
		if x == sl {
			last := len(slots) - 1
			slots[i] = slots[last]
			slots[last] = nil
			return slots[:last]
		}
	}
	return slots
}

// prune forgets the stranger addresses that hold no slot and were last
// seen idle ago or earlier (0: all of them). A forgotten address starts
// again with a full bucket, so only those whose bucket would be full again
// are forgotten by age.
func (g *gate) prune(now time.Time, idle time.Duration) {
	for a, s := range g.sources {
		if len(s.slots) == 0 && !g.peerIPs[a] && now.Sub(s.last) >= idle {
			delete(g.sources, a)
		}
	}
}

// sweep is prune by age, run by the accept loop now and then.
func (g *gate) sweep(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prune(now, sourceIdle)
}

// refuse counts a refusal (g.mu held or not: the counters are atomic).
func (g *gate) refuse(reason string) string {
	c, _ := g.refused.LoadOrStore(reason, new(atomic.Uint64))
	c.(*atomic.Uint64).Add(1)
	return reason
}

// refusedCount is how many connections were refused for reason.
func (g *gate) refusedCount(reason string) uint64 {
	if c, ok := g.refused.Load(reason); ok {
		return c.(*atomic.Uint64).Load()
	}
	return 0
}

// held is how many slots strangers hold and how many addresses the table
// holds, for tests.
func (g *gate) held() (pending, sources int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.strangers), len(g.sources)
}

// countingConn counts the bytes read from a connection, so that the gate
// can tell a handshake that is under way from one that is not (a slot's
// progress).
type countingConn struct {
	net.Conn
	read atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}
