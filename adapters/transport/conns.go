package transport

// OpenConns counts the accepted connections open now: the API's clients
// (handed to the HTTP server), and peers (each other controller dials us
// for what it sends, so this is how many of them reach us). Connections
// still in their TLS handshake or Hello are in neither.
func (t *Transport) OpenConns() (clients, peers int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.perCN {
		clients += n
	}
	return clients, len(t.peerConn)
}
