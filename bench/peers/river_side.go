package main

// River's side: River v0.51 with its pgx driver on the throwaway
// PostgreSQL. Inserts go through an insert-only client (InsertManyFast,
// or InsertMany with -river-insert many); the work phase starts a client
// whose one worker does nothing, with MaxWorkers = -river-workers (by
// default the jobs xce and NATS hold in flight) and the fetch settings of
// River's own benchmark (`river bench`, cmd/river/riverbench), and counts
// completions on a subscription as that benchmark does. Each round starts
// from an empty job table, truncated and vacuumed as that benchmark's
// resetJobsTable does.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

const riverLatencyQueue = "latency" // no worker serves it

// River's benchmark's fetch settings (the defaults are 100 ms / 1 s).
const (
	riverFetchCooldown     = 2 * time.Millisecond
	riverFetchPollInterval = 20 * time.Millisecond
)

type benchArgs struct {
	P string `json:"p"`
}

func (benchArgs) Kind() string { return "bench" }

type noopWorker struct {
	river.WorkerDefaults[benchArgs]
}

func (noopWorker) Work(context.Context, *river.Job[benchArgs]) error { return nil }

type riverSide struct {
	pool    *pgxpool.Pool
	inserts *river.Client[pgx.Tx]
	fast    bool
	args    benchArgs
	logger  *slog.Logger
}

// newRiverSide connects a pool of maxConns to pg and runs River's migrations.
func newRiverSide(ctx context.Context, pg *postgres, s shape, maxConns int, fast bool) (*riverSide, error) {
	cfg, err := pgxpool.ParseConfig(pg.connString())
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
	if err == nil {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	ins, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &riverSide{pool: pool, inserts: ins, fast: fast, args: benchArgs{P: string(payloadOf(s.Payload))}, logger: logger}, nil
}

// reset empties the job table, so every round starts from the same state.
func (r *riverSide) reset(ctx context.Context) error {
	if _, err := r.pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return err
	}
	_, err := r.pool.Exec(ctx, "VACUUM FULL river_job")
	return err
}

// settle empties the job table and checkpoints PostgreSQL after River's
// round. Left alone, the round's 200,000 completed rows drew an
// autovacuum (a minute after, by default) and the checkpointer wrote the
// round's dirty pages over minutes: both on the disk and CPUs of the
// next system's round. The next River round truncates the table anyway
// (reset); River's own figures did not get worse (docs/performance.md,
// fairness rule 8).
func (r *riverSide) settle(ctx context.Context) error {
	if _, err := r.pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return err
	}
	_, err := r.pool.Exec(ctx, "CHECKPOINT")
	return err
}

func (r *riverSide) describe(s shape, version, pgVersion string) string {
	ins := "InsertMany"
	if r.fast {
		ins = "InsertManyFast"
	}
	return fmt.Sprintf("River %s: %s, MaxWorkers %d, FetchCooldown %v, FetchPollInterval %v, on %s (initdb defaults: fsync, synchronous_commit on)",
		version, ins, s.RiverWorkers, riverFetchCooldown, riverFetchPollInterval, pgVersion)
}

func (r *riverSide) insertBatch(ctx context.Context, _, k int) error {
	params := make([]river.InsertManyParams, k)
	for i := range params {
		params[i].Args = r.args
	}
	if r.fast {
		n, err := r.inserts.InsertManyFast(ctx, params)
		if err == nil && n != k {
			err = fmt.Errorf("InsertManyFast inserted %d of %d", n, k)
		}
		return err
	}
	res, err := r.inserts.InsertMany(ctx, params)
	if err == nil && len(res) != k {
		err = fmt.Errorf("InsertMany inserted %d of %d", len(res), k)
	}
	return err
}

// work starts a working client and times it from Start until s.Jobs
// completions were reported.
func (r *riverSide) work(ctx context.Context, s shape) (time.Duration, error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	cl, err := river.NewClient(riverpgxv5.New(r.pool), &river.Config{
		Logger:            r.logger,
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: s.RiverWorkers}},
		Workers:           workers,
	})
	if err != nil {
		return 0, err
	}
	events, cancel := cl.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: s.Jobs, // none dropped
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancel()
	t0 := time.Now()
	if err := cl.Start(ctx); err != nil {
		return 0, err
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		if err := cl.Stop(sctx); err != nil {
			fmt.Fprintf(os.Stderr, "bench-peers: stop the River client: %v\n", err)
		}
	}()
	for done := 0; done < s.Jobs; {
		select {
		case ev, ok := <-events:
			if !ok {
				return 0, fmt.Errorf("river subscription closed after %d completions", done)
			}
			if ev.Kind != river.EventKindJobCompleted {
				return 0, fmt.Errorf("river job %d: %s", ev.Job.ID, ev.Kind)
			}
			done++
		case <-ctx.Done():
			return 0, fmt.Errorf("river work phase after %d of %d: %w", done, s.Jobs, ctx.Err())
		}
	}
	return time.Since(t0), nil
}

func (r *riverSide) submit(ctx context.Context, _ int) error {
	_, err := r.inserts.Insert(ctx, r.args, &river.InsertOpts{Queue: riverLatencyQueue})
	return err
}

func (r *riverSide) close() { r.pool.Close() }
