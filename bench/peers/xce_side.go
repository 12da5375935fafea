package main

// xce's side: the same phases through xceConn (xce_client.go), one kept
// connection per inserter, worker and latency client to the primary, all
// opened before the clock starts (as River's pool and the NATS
// connections are).

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

type xceSide struct {
	cluster  *xceCluster
	primary  string // the address the connections go to
	conns    []xceConn
	payloads [][]byte // one batch's, shared: the client only reads them
	payload  []byte
}

// newXceSide opens n connections to the primary of xc.
func newXceSide(ctx context.Context, xc *xceCluster, s shape, n int) (_ *xceSide, err error) {
	if n > xceMaxConns {
		return nil, fmt.Errorf("%d connections (the most of -inserters, -workers and 16 latency clients): a node takes at most %d per client certificate", n, xceMaxConns)
	}
	t := xc.target()
	addr, err := xcePrimary(ctx, t, xceWorkQueue)
	if err != nil {
		return nil, err
	}
	x := &xceSide{cluster: xc, primary: addr, payload: payloadOf(s.Payload)}
	defer func() {
		if err != nil {
			x.close()
		}
	}()
	for range n {
		c, err := dialXce(ctx, t, addr)
		if err != nil {
			return nil, err
		}
		x.conns = append(x.conns, c)
	}
	x.payloads = make([][]byte, s.Batch)
	for i := range x.payloads {
		x.payloads[i] = x.payload
	}
	return x, nil
}

func (x *xceSide) describe(s shape, nodes int) string {
	mode := "a lone primary"
	if nodes == 3 {
		mode = "quorum mode, a majority's fsync before each reply"
	}
	return fmt.Sprintf("xce, %d node(s) (%s): xcecontroller on loopback TLS, SubmitBatch of %d, %d workers each claiming %d on a Work stream and acking them on its next claim, every record fsynced before its reply",
		nodes, mode, s.Batch, s.Workers, s.Claim)
}

func (x *xceSide) logTail() string { return x.cluster.logTail() }

// reset: nothing to do, the work phase leaves the work queue empty.
func (x *xceSide) reset(context.Context) error { return nil }

func (x *xceSide) insertBatch(ctx context.Context, who, k int) error {
	return x.conns[who].SubmitBatch(ctx, xceWorkQueue, x.payloads[:k])
}

// work runs s.Workers goroutines claiming up to s.Claim jobs, each claim
// carrying the acks of the batch before (ClaimRequest.ack), until s.Jobs
// are acknowledged; the time is taken when the last ack was answered,
// not when the workers have all noticed.
func (x *xceSide) work(ctx context.Context, s shape) (time.Duration, error) {
	var worked atomic.Int64
	want := int64(s.Jobs)
	var took atomic.Int64 // ns from t0 to the ack of the last job
	g, gctx := errgroup.WithContext(ctx)
	t0 := time.Now()
	for w := range s.Workers {
		cn := x.conns[w]
		g.Go(func() error {
			var held xceClaim // claimed, acked on the next claim
			for worked.Load() < want {
				c, err := cn.ClaimBatch(gctx, xceWorkQueue, xceHost, s.Claim, held)
				if err != nil {
					return fmt.Errorf("worker %d: %w", w, err)
				}
				if held != nil && worked.Add(int64(held.Len())) == want {
					took.Store(int64(time.Since(t0)))
				}
				held = nil
				if c.Len() == 0 {
					// The others hold the last jobs: do not spin on the node.
					select {
					case <-time.After(time.Millisecond):
					case <-gctx.Done():
						return nil
					}
					continue
				}
				held = c
			}
			return nil
		})
	}
	err := g.Wait()
	if err == nil && worked.Load() != want {
		err = fmt.Errorf("xce worked %d jobs, want %d", worked.Load(), want)
	}
	return time.Duration(took.Load()), err
}

func (x *xceSide) submit(ctx context.Context, who int) error {
	return x.conns[who].Submit(ctx, xceLatencyQueue, x.payload)
}

func (x *xceSide) close() {
	for _, c := range x.conns {
		_ = c.Close()
	}
}
