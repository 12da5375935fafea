package main

// NATS JetStream's side, in the shape of NATS's own `nats bench js`
// (natscli): a work-queue stream with file storage, R3 on three servers
// (R1 on one); inserts published asynchronously, each batch's
// acknowledgements awaited together (`nats bench js pub async`, its
// --batch set to ours); a durable pull consumer with explicit acks that
// every worker fetches from on its own connection (`nats bench js
// fetch`, its --batch set to our claim size), MaxAckPending the jobs in
// flight (nats bench sets batch x clients, the same product); single
// submits are synchronous publishes (`nats bench js pub sync`). Each
// role's connections go to the server leading what they use — the work
// stream for inserts, the latency stream for submits, the consumer for
// workers — as xce's go to its primary, so no message takes an extra
// route hop.
//
// Acks: nats bench acks with a fire-and-forget +ACK by default and
// counts a message on receipt. A job here counts as worked only once its
// ack is confirmed, as xce counts one once the claim carrying its ack is
// answered: each +ACK is sent with a reply subject, as the client's
// DoubleAck does, but without waiting for one ack before sending the
// next, and the server answers an R3 ack once its consumer's Raft group
// committed it. -nats-ack async sends nats bench's fire-and-forget acks
// instead, and stops the clock once the consumer reports none pending.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
)

const (
	natsAckConfirmed = "confirmed"
	natsAckAsync     = "async"

	natsWorkStream     = "bench"
	natsWorkSubject    = "bench.jobs"
	natsLatencyStream  = "latency"
	natsLatencySubject = "latency.jobs"
	natsConsumer       = "workers"
	natsAckWait        = 5 * time.Minute // xce's visibility timeout in the bench config
	natsFetchWait      = time.Second     // a fetch's longest wait for a full batch
)

var natsAckBody = []byte("+ACK")

type natsConn struct {
	nc *nats.Conn
	js jetstream.JetStream
}

type natsSide struct {
	cluster  *natsCluster
	replicas int
	ack      string
	payload  []byte
	s        shape
	admin    *natsConn
	// Each role's connections and the server they are on.
	ins, subs, workers          []*natsConn
	insOn, subsOn, workersOn    string
	cons                        []jetstream.Consumer // per worker
	streamInfoTimeout, pollTick time.Duration
}

// dialNATS connects n clients to s.
func dialNATS(s *natsServer, n, maxPending int) ([]*natsConn, error) {
	var out []*natsConn
	for range n {
		c, err := nats.Connect(s.url(), nats.Name("bench-peers"), nats.Timeout(5*time.Second))
		if err != nil {
			closeNATS(out)
			return nil, fmt.Errorf("connect to %s: %w", s.node.Name, err)
		}
		js, err := jetstream.New(c, jetstream.WithPublishAsyncMaxPending(maxPending))
		if err != nil {
			c.Close()
			closeNATS(out)
			return nil, err
		}
		out = append(out, &natsConn{c, js})
	}
	return out, nil
}

func closeNATS(cs []*natsConn) {
	for _, c := range cs {
		c.nc.Close()
	}
}

// newNATSSide creates the streams and the consumer on nc and connects
// every role's clients to the right leader.
func newNATSSide(ctx context.Context, nc *natsCluster, s shape, ack string) (_ *natsSide, err error) {
	n := &natsSide{cluster: nc, replicas: len(nc.servers), ack: ack, payload: payloadOf(s.Payload), s: s,
		streamInfoTimeout: 10 * time.Second, pollTick: 2 * time.Millisecond}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	admins, err := dialNATS(nc.servers[0], 1, s.Batch)
	if err != nil {
		return nil, err
	}
	n.admin = admins[0]
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, cfg := range []jetstream.StreamConfig{
		{Name: natsWorkStream, Subjects: []string{natsWorkSubject}, Retention: jetstream.WorkQueuePolicy},
		{Name: natsLatencyStream, Subjects: []string{natsLatencySubject}, Retention: jetstream.LimitsPolicy},
	} {
		cfg.Storage = jetstream.FileStorage
		cfg.Replicas = n.replicas
		if _, err := n.admin.js.CreateOrUpdateStream(cctx, cfg); err != nil {
			return nil, fmt.Errorf("create stream %s: %w", cfg.Name, err)
		}
	}
	_, err = n.admin.js.CreateOrUpdateConsumer(cctx, natsWorkStream, jetstream.ConsumerConfig{
		Durable:       natsConsumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
		AckWait:       natsAckWait,
		MaxAckPending: s.Workers * s.Claim,
		MaxWaiting:    max(512, 2*s.Workers), // 512 is the server's default
	})
	if err != nil {
		return nil, fmt.Errorf("create consumer %s: %w", natsConsumer, err)
	}
	if err := n.connectRoles(cctx); err != nil {
		return nil, err
	}
	return n, nil
}

// leaders names the servers leading the work stream, the latency stream
// and the consumer, waiting until each has one.
func (n *natsSide) leaders(ctx context.Context) (work, latency, consumer string, err error) {
	deadline := time.Now().Add(n.streamInfoTimeout)
	lone := ""
	if len(n.cluster.servers) == 1 {
		lone = n.cluster.servers[0].node.Name
	}
	leaderOf := func(ci *jetstream.ClusterInfo) string {
		if ci != nil && ci.Leader != "" {
			return ci.Leader
		}
		return lone
	}
	for {
		var si, li *jetstream.StreamInfo
		var ci *jetstream.ConsumerInfo
		si, err = n.streamInfo(ctx, natsWorkStream)
		if err == nil {
			li, err = n.streamInfo(ctx, natsLatencyStream)
		}
		if err == nil {
			ci, err = n.consumerInfo(ctx)
		}
		if err == nil {
			work, latency, consumer = leaderOf(si.Cluster), leaderOf(li.Cluster), leaderOf(ci.Cluster)
			if work != "" && latency != "" && consumer != "" {
				return work, latency, consumer, nil
			}
			err = errors.New("a stream or the consumer has no leader yet")
		}
		if time.Now().After(deadline) {
			return "", "", "", fmt.Errorf("leaders of the streams and the consumer: %w", err)
		}
		select {
		case <-ctx.Done():
			return "", "", "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (n *natsSide) streamInfo(ctx context.Context, name string) (*jetstream.StreamInfo, error) {
	st, err := n.admin.js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return st.Info(ctx)
}

func (n *natsSide) consumerInfo(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	c, err := n.admin.js.Consumer(ctx, natsWorkStream, natsConsumer)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// connectRoles (re)connects each role's clients to its leader; a role
// whose leader has not moved keeps its connections.
func (n *natsSide) connectRoles(ctx context.Context) error {
	work, latency, consumer, err := n.leaders(ctx)
	if err != nil {
		return err
	}
	dial := func(conns *[]*natsConn, on *string, leader string, count int) error {
		if *on == leader && len(*conns) == count {
			return nil
		}
		srv := n.cluster.server(leader)
		if srv == nil {
			return fmt.Errorf("leader %q is none of our servers", leader)
		}
		cs, err := dialNATS(srv, count, n.s.Batch)
		if err != nil {
			return err
		}
		closeNATS(*conns)
		*conns, *on = cs, leader
		return nil
	}
	if err := dial(&n.ins, &n.insOn, work, n.s.Inserters); err != nil {
		return err
	}
	if err := dial(&n.subs, &n.subsOn, latency, maxInts(n.s.Clients)); err != nil {
		return err
	}
	before := n.workersOn
	if err := dial(&n.workers, &n.workersOn, consumer, n.s.Workers); err != nil {
		return err
	}
	if before != n.workersOn || len(n.cons) != len(n.workers) {
		n.cons = n.cons[:0]
		for _, c := range n.workers {
			cons, err := c.js.Consumer(ctx, natsWorkStream, natsConsumer)
			if err != nil {
				return fmt.Errorf("consumer %s: %w", natsConsumer, err)
			}
			n.cons = append(n.cons, cons)
		}
	}
	return nil
}

func maxInts(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func (n *natsSide) describe(s shape) string {
	ack := "each ack sent with a reply subject and counted once the server confirmed it (after the consumer's Raft commit)"
	if n.replicas == 1 {
		ack = "each ack sent with a reply subject and counted once the server confirmed it (once applied; the consumer's state file is written by a background flusher)"
	}
	if n.ack == natsAckAsync {
		ack = "fire-and-forget acks, the clock stopped once the consumer has none pending"
	}
	store := "R3 on 3 servers: a publish acknowledged once a majority's Raft log fsynced it"
	if n.replicas == 1 {
		store = "R1 on 1 server: a publish acknowledged once its stream's file fsynced it"
	}
	return fmt.Sprintf("NATS JetStream, %d server(s), %s, nats.go %s: work-queue stream, file storage, sync_interval always, %s; async publishes awaited per batch of %d; %d workers fetching %d from one durable pull consumer (explicit acks, MaxAckPending %d), %s; synchronous publishes for single submits",
		len(n.cluster.servers), n.cluster.version, moduleVersion("github.com/nats-io/nats.go"), store, s.Batch, s.Workers, s.Claim, s.Workers*s.Claim, ack)
}

func (n *natsSide) logTail() string { return n.cluster.logTail() }

// reset: the work stream must be empty (its acked messages removed) and
// each role on its leader's server.
func (n *natsSide) reset(ctx context.Context) error {
	st, err := n.admin.js.Stream(ctx, natsWorkStream)
	if err != nil {
		return err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs != 0 {
		if err := st.Purge(ctx); err != nil {
			return fmt.Errorf("purge %d leftover messages: %w", info.State.Msgs, err)
		}
	}
	return n.connectRoles(ctx)
}

// insertBatch publishes k jobs asynchronously and waits for every one's
// acknowledgement, as nats bench's async publisher does per batch.
func (n *natsSide) insertBatch(ctx context.Context, who, k int) error {
	c := n.ins[who]
	futs := make([]jetstream.PubAckFuture, k)
	for i := range futs {
		f, err := c.js.PublishAsync(natsWorkSubject, n.payload)
		if err != nil {
			return fmt.Errorf("publish %d of %d: %w", i+1, k, err)
		}
		futs[i] = f
	}
	select {
	case <-c.js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	for i, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish %d of %d: %w", i+1, k, err)
		}
	}
	return nil
}

func (n *natsSide) submit(ctx context.Context, who int) error {
	_, err := n.subs[who].js.Publish(ctx, natsLatencySubject, n.payload)
	return err
}

// work runs s.Workers fetchers of s.Claim jobs each until s.Jobs were
// delivered, acking every job as it arrives, and times until the last
// ack was confirmed (or, with async acks, the consumer had none pending).
func (n *natsSide) work(ctx context.Context, s shape) (time.Duration, error) {
	want := int64(s.Jobs)
	var received, confirmed atomic.Int64
	allConfirmed := make(chan struct{})
	var once sync.Once
	var took atomic.Int64
	t0 := time.Now()

	// One reply subscription per worker's connection, kept until every
	// ack is confirmed.
	inboxes := make([]string, len(n.workers))
	if n.ack == natsAckConfirmed {
		for w, c := range n.workers {
			inboxes[w] = c.nc.NewInbox()
			sub, err := c.nc.Subscribe(inboxes[w], func(*nats.Msg) {
				if confirmed.Add(1) == want {
					took.Store(int64(time.Since(t0)))
					once.Do(func() { close(allConfirmed) })
				}
			})
			if err != nil {
				return 0, err
			}
			defer func() { _ = sub.Unsubscribe() }()
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	for w := range s.Workers {
		c, cons := n.workers[w], n.cons[w]
		g.Go(func() error {
			for received.Load() < want && gctx.Err() == nil {
				batch, err := cons.Fetch(s.Claim, jetstream.FetchMaxWait(natsFetchWait))
				if err != nil {
					return fmt.Errorf("worker %d: fetch: %w", w, err)
				}
				for m := range batch.Messages() {
					received.Add(1)
					if n.ack == natsAckConfirmed {
						err = c.nc.PublishRequest(m.Reply(), inboxes[w], natsAckBody)
					} else {
						err = m.Ack()
					}
					if err != nil {
						return fmt.Errorf("worker %d: ack: %w", w, err)
					}
				}
				if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
					return fmt.Errorf("worker %d: fetched batch: %w", w, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	if got := received.Load(); got != want {
		return 0, fmt.Errorf("NATS delivered %d jobs, want %d", got, want)
	}
	if n.ack == natsAckAsync {
		for {
			ci, err := n.consumerInfo(ctx)
			if err != nil {
				return 0, err
			}
			if ci.NumAckPending == 0 && ci.NumPending == 0 {
				return time.Since(t0), nil
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(n.pollTick):
			}
		}
	}
	select {
	case <-allConfirmed:
		return time.Duration(took.Load()), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("NATS confirmed %d of %d acks: %w", confirmed.Load(), want, ctx.Err())
	}
}

func (n *natsSide) close() {
	for _, cs := range [][]*natsConn{n.ins, n.subs, n.workers} {
		closeNATS(cs)
	}
	if n.admin != nil {
		n.admin.nc.Close()
	}
}
