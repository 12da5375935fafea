package main

// The load shapes every system runs, so that each gets the same one: n
// jobs inserted in batches by a fixed number of inserters, and single
// submits by 1 or 16 clients timed one by one.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// shape is one round's load, the same for every system.
type shape struct {
	Jobs         int // inserted then worked
	Batch        int // jobs per insert request
	Inserters    int // concurrent insert clients
	Workers      int // xce claiming and NATS fetching goroutines
	Claim        int // jobs per xce claim and per NATS fetch
	RiverWorkers int // River MaxWorkers
	Payload      int // bytes of each job's payload
	Submits      int // single submits per latency measurement
	Clients      []int
}

// insertAll calls insert(ctx, inserter, k) with k jobs until s.Jobs have
// been handed out, from s.Inserters goroutines; it returns the elapsed time.
func insertAll(ctx context.Context, s shape, insert func(ctx context.Context, who, k int) error) (time.Duration, error) {
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	t0 := time.Now()
	for who := range s.Inserters {
		g.Go(func() error {
			for {
				from := int(next.Add(int64(s.Batch))) - s.Batch
				if from >= s.Jobs {
					return nil
				}
				k := min(s.Batch, s.Jobs-from)
				if err := insert(gctx, who, k); err != nil {
					return fmt.Errorf("inserter %d, jobs %d..%d: %w", who, from, from+k-1, err)
				}
			}
		})
	}
	err := g.Wait()
	return time.Since(t0), err
}

// latency is the p50 and p99 of one submit.
type latency struct{ P50, P99 time.Duration }

func (l latency) String() string {
	return fmt.Sprintf("%s / %s", ms(l.P50), ms(l.P99))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// submitLatency times s.Submits single submits spread over clients
// goroutines, each calling submit(ctx, client) in turn.
func submitLatency(ctx context.Context, s shape, clients int, submit func(ctx context.Context, who int) error) (latency, error) {
	var mu sync.Mutex
	var all []time.Duration
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for who := range clients {
		g.Go(func() error {
			var mine []time.Duration
			for next.Add(1) <= int64(s.Submits) {
				t0 := time.Now()
				if err := submit(gctx, who); err != nil {
					return fmt.Errorf("client %d, submit %d: %w", who, len(mine), err)
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return latency{}, err
	}
	p50, err := percentile(all, 50)
	if err != nil {
		return latency{}, err
	}
	p99, err := percentile(all, 99)
	return latency{p50, p99}, err
}

// payloadOf is size bytes of filler: the same job body for every system.
func payloadOf(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}
