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
	DefaultPeerHandshakes      = 32
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
)

// RefusalReasons lists every reason, in a fixed order.
var RefusalReasons = []string{RefusedSource, RefusedPool, RefusedRate, RefusedPeerPool, RefusedClients, RefusedPerCN}

type gateLimits struct {
	handshakes, perSource, peerPool int
	rate                            rate.Limit
	burst                           int
}

// gate hands out handshake slots. Its methods are safe for concurrent use.
type gate struct {
	lim     gateLimits
	peerIPs map[netip.Addr]bool

	mu      sync.Mutex
	sources map[netip.Addr]*source
	pending int // slots held by strangers

	refused sync.Map // reason -> *atomic.Uint64
}

type source struct {
	pending int
	last    time.Time // last connection accepted or refused
	lim     *rate.Limiter
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

// enter takes a slot for a connection from addr at now. It returns the
// function that gives the slot back (idempotent), or the refusal reason.
func (g *gate) enter(addr netip.Addr, now time.Time) (leave func(), refused string) {
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
	case peer && s.pending >= g.lim.peerPool:
		return nil, g.refuse(RefusedPeerPool)
	case peer:
	case s.pending >= g.lim.perSource:
		return nil, g.refuse(RefusedSource)
	case g.pending >= g.lim.handshakes:
		return nil, g.refuse(RefusedPool)
	case !s.lim.AllowN(now, 1):
		return nil, g.refuse(RefusedRate)
	default:
		g.pending++
	}
	s.pending++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			s.pending--
			if !peer {
				g.pending--
			}
		})
	}, ""
}

// prune forgets the stranger addresses that hold no slot and were last
// seen idle ago or earlier (0: all of them). A forgotten address starts
// again with a full bucket, so only those whose bucket would be full again
// are forgotten by age.
func (g *gate) prune(now time.Time, idle time.Duration) {
	for a, s := range g.sources {
		if s.pending == 0 && !g.peerIPs[a] && now.Sub(s.last) >= idle {
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
	return g.pending, len(g.sources)
}
