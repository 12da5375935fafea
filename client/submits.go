package client

import (
	"context"
	"sync"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/schemaconnect"
)

// Submits travel as messages on SubmitStream streams (schema/api.proto):
// a unary call costs both ends an HTTP/2 stream, its headers and a
// handler of its own, which on loopback was three quarters of an empty
// call's time (docs/performance.md). A call takes an idle stream of the
// pool, or opens one, and gives it back when answered; concurrent
// submits each have their own, so none waits for another's answer. A
// stream is a streamer: the same search finds the node, the same rules
// say what an unanswered submit's outcome is.
type submitPool struct {
	mu     sync.Mutex
	idle   []*streamer[schema.SubmitRequest]
	closed bool
}

// maxIdleSubmitStreams bounds the streams kept open between submits: a
// node serves a connection's streams up to its HTTP/2 limit, which the
// other calls need as well.
const maxIdleSubmitStreams = 16

// submit sends r on a stream of the pool (as a call to a node that does
// not serve SubmitStream).
func (c *Client) submit(ctx context.Context, r *schema.SubmitRequest) (*schema.JobResponse, error) {
	p := &c.submits
	p.mu.Lock()
	var s *streamer[schema.SubmitRequest]
	if n := len(p.idle); n > 0 {
		s, p.idle = p.idle[n-1], p.idle[:n-1]
	}
	p.mu.Unlock()
	if s == nil {
		s = &streamer[schema.SubmitRequest]{c: c, open: (*conn).openSubmits, proc: "SubmitStream", unary: schemaconnect.XceClient.Submit}
	}
	rep, err := s.do(ctx, r)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= maxIdleSubmitStreams {
		s.close()
	} else {
		p.idle = append(p.idle, s)
	}
	return rep, err
}

// close ends the pool's idle streams; submits after it open their own and
// close them when answered.
func (p *submitPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, s := range p.idle {
		s.close()
	}
	p.idle = nil
}
