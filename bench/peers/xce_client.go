package main

// Every xce client call of the harness, behind xceConn: swap this file to
// move the benchmark to another client API. Each xceConn is a client of
// package client (the Connect API) held to the primary alone, so it keeps
// one connection, as a worker would.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/transport"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
)

// xceMaxConns is how many connections one client certificate may hold
// open to a node.
const xceMaxConns = transport.DefaultMaxConnsPerClient

// xceTarget is a cluster to talk to: its nodes' addresses and the client
// certificate files.
type xceTarget struct {
	Addrs            []string
	Names            []string // the nodes' names (their certificates'), by index
	Cert, Key, CA    string
	Timeout          time.Duration // per call
	WaitServingLimit time.Duration
}

// xceConn is one client connection to the primary.
type xceConn interface {
	Submit(ctx context.Context, queue string, payload []byte) error
	SubmitBatch(ctx context.Context, queue string, payloads [][]byte) error
	// ClaimBatch acknowledges every job of acks (nil: none; any refused
	// is an error) and claims up to max jobs for host, in one call; an
	// empty claim is not an error.
	ClaimBatch(ctx context.Context, queue, host string, max int, acks xceClaim) (xceClaim, error)
	Close() error
}

// xceClaim is what ClaimBatch got.
type xceClaim interface{ Len() int }

type claimed []*schema.WalHandle

func (c claimed) Len() int { return len(c) }

// apiConn is one client; its claims go on a Work stream (wk).
type apiConn struct {
	cl *client.Client
	wk *client.Worker
}

// xcePrimary waits until one of t's nodes is a serving primary that
// answers a List of queue, and returns its address.
func xcePrimary(ctx context.Context, t xceTarget, queue string) (string, error) {
	deadline := time.Now().Add(t.WaitServingLimit)
	var last error = errors.New("no node asked yet")
	for {
		for i, addr := range t.Addrs {
			if err := servesJobs(ctx, t, i, queue); err != nil {
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

func servesJobs(ctx context.Context, t xceTarget, i int, queue string) error {
	c, err := dialXce(ctx, t, t.Addrs[i])
	if err != nil {
		return err
	}
	defer c.Close()
	cl := c.(*apiConn).cl
	st, err := cl.ClusterStatus(ctx, 0)
	if err != nil {
		return err
	}
	if st.GetRole() != "primary" || !st.GetServing() {
		return fmt.Errorf("role %s, serving %v", st.GetRole(), st.GetServing())
	}
	_, err = cl.List(ctx, &schema.ListRequest{Queue: queue})
	return err
}

// dialXce makes a client of the node at addr alone.
func dialXce(_ context.Context, t xceTarget, addr string) (xceConn, error) {
	mat, err := tlsconf.Load(t.Cert, t.Key, t.CA)
	if err != nil {
		return nil, err
	}
	name := addr
	for i, a := range t.Addrs {
		if a == addr {
			name = t.Names[i]
		}
	}
	cl, err := client.New([]client.Peer{{Name: name, Addr: addr}}, mat, client.Options{Timeout: t.Timeout})
	if err != nil {
		return nil, err
	}
	return &apiConn{cl: cl, wk: cl.Worker()}, nil
}

func (w *apiConn) Submit(ctx context.Context, queue string, payload []byte) error {
	r, err := w.cl.Submit(ctx, &schema.SubmitRequest{Queue: queue, Payload: payload})
	if err == nil && len(r.GetJobs()) != 1 {
		err = fmt.Errorf("a submit answered with %d jobs", len(r.GetJobs()))
	}
	return err
}

func (w *apiConn) SubmitBatch(ctx context.Context, queue string, payloads [][]byte) error {
	r, err := w.cl.SubmitBatch(ctx, &schema.SubmitBatchRequest{Queue: queue, Payloads: payloads})
	if err == nil && len(r.GetIds()) != len(payloads) {
		err = fmt.Errorf("a batch submit acknowledged %d jobs for %d payloads", len(r.GetIds()), len(payloads))
	}
	return err
}

func (w *apiConn) ClaimBatch(ctx context.Context, queue, host string, max int, acks xceClaim) (xceClaim, error) {
	var hs claimed
	if acks != nil {
		var ok bool
		if hs, ok = acks.(claimed); !ok {
			return nil, fmt.Errorf("acks of a %T, not a claim of this client", acks)
		}
	}
	r, err := w.wk.Claim(ctx, &schema.ClaimRequest{Queue: queue, Host: host, Max: uint32(max), Ack: hs})
	if err != nil {
		return nil, err
	}
	if oks := r.GetOks(); len(oks) != len(hs) {
		return nil, fmt.Errorf("a claim answered %d ack results for %d handles", len(oks), len(hs))
	}
	for i, ok := range r.GetOks() {
		if !ok {
			return nil, fmt.Errorf("a claim refused the ack of job %d", hs[i].GetId())
		}
	}
	out := make(claimed, len(r.GetJobs()))
	for i, j := range r.GetJobs() {
		out[i] = &schema.WalHandle{Id: j.GetId(), Attempt: j.GetClaims(), ClaimTerm: j.GetClaimTerm(), ClaimLsn: j.GetClaimLsn()}
	}
	return out, nil
}

func (w *apiConn) Close() error {
	_ = w.wk.Close() // its stream ends with the client's connections anyway
	return w.cl.Close()
}
