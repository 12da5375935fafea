package main

// Every xce client call of the harness, behind xceConn: swap this file to
// move the benchmark to another client API. This one keeps one TLS
// connection per xceConn to the primary (transport.DialClient), as a
// worker would; clitool's JobClient dials afresh for every request, which
// would measure handshakes rather than the queue.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"xce/adapters/tlsconf"
	"xce/adapters/transport"
	"xce/schema"
	"xce/sm"
)

// xceMaxConns is how many connections one client certificate may hold
// open to a node.
const xceMaxConns = transport.DefaultMaxConnsPerClient

// xceTarget is a cluster to talk to: its nodes' addresses and the client
// certificate files.
type xceTarget struct {
	Addrs            []string
	Cert, Key, CA    string
	Timeout          time.Duration // per call
	WaitServingLimit time.Duration
}

// xceConn is one client connection to the primary.
type xceConn interface {
	Submit(ctx context.Context, queue string, payload []byte) error
	SubmitBatch(ctx context.Context, queue string, payloads [][]byte) error
	// ClaimBatch claims up to max jobs for host; an empty claim is not an error.
	ClaimBatch(ctx context.Context, queue, host string, max int) (xceClaim, error)
	// AckBatch acknowledges every job of c; any refused is an error.
	AckBatch(ctx context.Context, c xceClaim) error
	Close() error
}

// xceClaim is what ClaimBatch got.
type xceClaim interface{ Len() int }

type claimed []*schema.WalHandle

func (c claimed) Len() int { return len(c) }

type wireConn struct{ cl *transport.Client }

// xcePrimary waits until one of t's nodes is a serving primary that
// answers a LIST of queue, and returns its address.
func xcePrimary(ctx context.Context, t xceTarget, queue string) (string, error) {
	mat, err := tlsconf.Load(t.Cert, t.Key, t.CA)
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(t.WaitServingLimit)
	var last error = errors.New("no node asked yet")
	for {
		for _, addr := range t.Addrs {
			if err := servesJobs(ctx, addr, mat, t.Timeout, queue); err != nil {
				last = fmt.Errorf("%s: %w", addr, err)
				continue
			}
			return addr, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no xce primary serving %s within %v (last: %w)", queue, t.WaitServingLimit, last)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func servesJobs(ctx context.Context, addr string, mat *tlsconf.Material, timeout time.Duration, queue string) error {
	cl, err := transport.DialClient(ctx, addr, mat, timeout)
	if err != nil {
		return err
	}
	defer cl.Close()
	st, err := cl.Status(ctx)
	if err != nil {
		return err
	}
	if st.GetRole() != "primary" || !st.GetServing() {
		return fmt.Errorf("role %s, serving %v", st.GetRole(), st.GetServing())
	}
	_, err = (&wireConn{cl}).job(ctx, &schema.JobRequest{Kind: schema.JobRequest_LIST, Queue: queue})
	return err
}

// dialXce opens a connection to the node at addr.
func dialXce(ctx context.Context, t xceTarget, addr string) (xceConn, error) {
	mat, err := tlsconf.Load(t.Cert, t.Key, t.CA)
	if err != nil {
		return nil, err
	}
	cl, err := transport.DialClient(ctx, addr, mat, t.Timeout)
	if err != nil {
		return nil, err
	}
	return &wireConn{cl}, nil
}

// job sends one job request; a non-OK status is an error.
func (w *wireConn) job(ctx context.Context, jr *schema.JobRequest) (*schema.JobReply, error) {
	rep, err := w.cl.Call(ctx, &schema.ClientRequest{Op: &schema.ClientRequest_Job{Job: jr}})
	if err != nil {
		return nil, err
	}
	if st := rep.GetStatus(); st != sm.StatusOK {
		return nil, fmt.Errorf("%s: status %d: %s", jr.GetKind(), st, rep.GetError())
	}
	if rep.GetJobReply() == nil {
		return nil, fmt.Errorf("%s: reply without a job body", jr.GetKind())
	}
	return rep.GetJobReply(), nil
}

func (w *wireConn) Submit(ctx context.Context, queue string, payload []byte) error {
	r, err := w.job(ctx, &schema.JobRequest{Kind: schema.JobRequest_ENQUEUE, Queue: queue, Payload: payload})
	if err == nil && len(r.GetJobs()) != 1 {
		err = fmt.Errorf("ENQUEUE: %d jobs in the reply", len(r.GetJobs()))
	}
	return err
}

func (w *wireConn) SubmitBatch(ctx context.Context, queue string, payloads [][]byte) error {
	r, err := w.job(ctx, &schema.JobRequest{Kind: schema.JobRequest_ENQUEUE_BATCH, Queue: queue, Payloads: payloads})
	if err == nil && len(r.GetJobs()) != len(payloads) {
		err = fmt.Errorf("ENQUEUE_BATCH: %d jobs acknowledged for %d payloads", len(r.GetJobs()), len(payloads))
	}
	return err
}

func (w *wireConn) ClaimBatch(ctx context.Context, queue, host string, max int) (xceClaim, error) {
	r, err := w.job(ctx, &schema.JobRequest{Kind: schema.JobRequest_CLAIM, Queue: queue, Host: host, Max: uint32(max)})
	if err != nil {
		return nil, err
	}
	hs := make(claimed, len(r.GetJobs()))
	for i, j := range r.GetJobs() {
		hs[i] = &schema.WalHandle{Id: j.GetId(), Attempt: j.GetClaims(), ClaimTerm: j.GetClaimTerm(), ClaimLsn: j.GetClaimLsn()}
	}
	return hs, nil
}

func (w *wireConn) AckBatch(ctx context.Context, c xceClaim) error {
	hs, ok := c.(claimed)
	if !ok {
		return fmt.Errorf("AckBatch of a %T, not a claim of this client", c)
	}
	if len(hs) == 0 {
		return nil
	}
	r, err := w.job(ctx, &schema.JobRequest{Kind: schema.JobRequest_ACK_BATCH, Handles: hs})
	if err != nil {
		return err
	}
	if oks := r.GetOks(); len(oks) != len(hs) {
		return fmt.Errorf("ACK_BATCH: %d results for %d handles", len(oks), len(hs))
	}
	for i, ok := range r.GetOks() {
		if !ok {
			return fmt.Errorf("ACK_BATCH: job %d refused", hs[i].GetId())
		}
	}
	return nil
}

func (w *wireConn) Close() error { return w.cl.Close() }
