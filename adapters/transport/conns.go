package transport

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// OpenConns counts the accepted connections open now: the API's clients
// (handed to the HTTP server), and peers (each other controller dials us
// for what it sends, so this is how many of them reach us). Connections
// still in their TLS handshake or Hello are in neither.
func (t *Transport) OpenConns() (clients, peers int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clients, len(t.peerConn)
}

// Refused counts the connections refused so far, by reason
// (RefusalReasons): before their handshake by the gate, after it by the
// API's connection limits.
func (t *Transport) Refused() map[string]uint64 {
	out := make(map[string]uint64, len(RefusalReasons))
	for _, r := range RefusalReasons {
		out[r] = t.gate.refusedCount(r)
	}
	return out
}

// refused logs a refused connection: the first and then at powers of two,
// since under a flood each line would cost more than the refusal.
func (t *Transport) refused(why, remote string) {
	if n := t.refusals.Add(1); n&(n-1) == 0 {
		t.logf("refused a connection from %s (%s); %d refused so far (see the refused-connection counters)", remote, why, n)
	}
}

// hostIPs resolves the host of addr (host:port) to its addresses, once at
// start: an IP literal is itself; a name is looked up with a short
// deadline.
func hostIPs(addr string) ([]netip.Addr, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	for i := range ips {
		ips[i] = ips[i].Unmap()
	}
	return ips, nil
}
