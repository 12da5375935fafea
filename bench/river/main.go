// Command river (issue 9 item 7, `make bench-river`) runs River on a
// throwaway PostgreSQL and xce side by side with the same load shape:
// insert N jobs in batches, work them with W workers, then time single
// submits with 1 and 16 clients. Rounds alternate River, xce, River, xce
// ... in one run; the table gives each round's figures and the xce/River
// ratios, median over rounds. Everything it starts (PostgreSQL, the xce
// nodes) is stopped and its files removed at the end, on failure or
// interrupt too.
//
//	cd bench/river && go run . -n 200000 -rounds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// side is one system under test; run drives both through the same phases.
type side interface {
	name() string
	reset(ctx context.Context) error
	insertBatch(ctx context.Context, who, k int) error
	work(ctx context.Context, s shape) (time.Duration, error)
	submit(ctx context.Context, who int) error
}

// result is one side's figures in one round.
type result struct {
	Insert, Work float64   // jobs/s
	Lat          []latency // per shape.Clients entry
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-river:", err)
		os.Exit(1)
	}
}

func run() error {
	s := shape{Clients: []int{1, 16}}
	flag.IntVar(&s.Jobs, "n", 200_000, "jobs inserted and then worked per round and system")
	flag.IntVar(&s.Batch, "batch", 1000, "jobs per insert request (River InsertMany, xce ENQUEUE_BATCH; xce takes at most 1000)")
	flag.IntVar(&s.Inserters, "inserters", 4, "concurrent insert clients")
	flag.IntVar(&s.Workers, "workers", 64, "River MaxWorkers; xce claiming goroutines, each on its own connection (at most 64: a node's limit per client certificate)")
	flag.IntVar(&s.Claim, "claim", 16, "xce: jobs per Claim (acked on the next Claim)")
	flag.IntVar(&s.Payload, "payload", 100, "bytes of each job's payload (River: a JSON string field of that length)")
	flag.IntVar(&s.Submits, "submits", 2000, "single submits timed per client count (1 and 16 clients)")
	rounds := flag.Int("rounds", 3, "rounds, each River then xce")
	nodes := flag.Int("xce-nodes", 1, "xce nodes: 1 (a lone primary) or 3 (quorum mode)")
	riverInsert := flag.String("river-insert", "many", "River's batch insert: many (InsertMany) or fast (InsertManyFast, COPY)")
	timeout := flag.Duration("timeout", 50*time.Minute, "bound on the whole run")
	flag.Parse()
	switch {
	case s.Jobs < 1 || s.Batch < 1 || s.Inserters < 1 || s.Workers < 1 || s.Claim < 1 || s.Payload < 1 || s.Submits < 1 || *rounds < 1:
		return errors.New("-n, -batch, -inserters, -workers, -claim, -payload, -submits and -rounds must be positive")
	case s.Batch > 1000:
		return fmt.Errorf("-batch %d: xce takes at most 1000 jobs per ENQUEUE_BATCH", s.Batch)
	case *nodes != 1 && *nodes != 3:
		return fmt.Errorf("-xce-nodes %d: 1 or 3", *nodes)
	case *riverInsert != "many" && *riverInsert != "fast":
		return fmt.Errorf("-river-insert %q: many or fast", *riverInsert)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	maxClients := slices.Max(s.Clients)
	poolConns := max(s.Inserters, maxClients) + 8 // + River's producer, completer, leader and notifier
	pg, err := startPostgres(ctx, poolConns+20)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer pg.stop()
	rs, err := newRiverSide(ctx, pg, s, poolConns, *riverInsert == "fast")
	if err != nil {
		return err
	}
	defer rs.close()
	xc, err := startXce(ctx, *nodes)
	if err != nil {
		return fmt.Errorf("xce: %w", err)
	}
	defer xc.stop()
	xs, err := newXceSide(ctx, xc.target(), s, max(s.Inserters, s.Workers, maxClients))
	if err != nil {
		return fmt.Errorf("xce: %w\n%s", err, xc.logTail())
	}
	defer xs.close()

	sides := []side{rs, xs}
	res := make([][]result, *rounds) // [round][side]
	header(os.Stdout, s, *rounds, *nodes, *riverInsert, pg.version)
	for r := range *rounds {
		for _, sd := range sides {
			got, err := runRound(ctx, sd, s)
			if err != nil {
				if sd == side(xs) {
					err = fmt.Errorf("%w\n%s", err, xc.logTail())
				}
				printTable(os.Stdout, s, res)
				return fmt.Errorf("round %d, %s: %w", r+1, sd.name(), err)
			}
			res[r] = append(res[r], got)
			fmt.Fprintf(os.Stderr, "bench-river: round %d %s: insert %.0f/s, work %.0f/s, submit %v (1) %v (16)\n",
				r+1, sd.name(), got.Insert, got.Work, got.Lat[0], got.Lat[len(got.Lat)-1])
		}
	}
	printTable(os.Stdout, s, res)
	return nil
}

// runRound: reset, insert s.Jobs, work them, then the latency runs.
func runRound(ctx context.Context, sd side, s shape) (result, error) {
	if err := sd.reset(ctx); err != nil {
		return result{}, fmt.Errorf("reset: %w", err)
	}
	d, err := insertAll(ctx, s, sd.insertBatch)
	if err != nil {
		return result{}, fmt.Errorf("insert: %w", err)
	}
	out := result{Insert: rate(s.Jobs, d)}
	if d, err = sd.work(ctx, s); err != nil {
		return result{}, fmt.Errorf("work: %w", err)
	}
	out.Work = rate(s.Jobs, d)
	for _, c := range s.Clients {
		l, err := submitLatency(ctx, s, c, sd.submit)
		if err != nil {
			return result{}, fmt.Errorf("submit latency, %d clients: %w", c, err)
		}
		out.Lat = append(out.Lat, l)
	}
	return out, nil
}

func header(w io.Writer, s shape, rounds, nodes int, riverInsert, pgVersion string) {
	riverV := "?"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/riverqueue/river" {
				riverV = m.Version
			}
		}
	}
	ins := "InsertMany"
	if riverInsert == "fast" {
		ins = "InsertManyFast"
	}
	fmt.Fprintf(w, "River %s (%s, MaxWorkers %d, FetchCooldown %v, FetchPollInterval %v) on %s (initdb defaults: fsync, synchronous_commit on)\n",
		riverV, ins, s.Workers, riverFetchCooldown, riverFetchPollInterval, pgVersion)
	fmt.Fprintf(w, "xce: %d xcecontroller node(s) on loopback TLS, %d workers claiming %d, each claim acking the batch before\n", nodes, s.Workers, s.Claim)
	fmt.Fprintf(w, "shape: %d jobs of %d B per round, inserted by %d clients in batches of %d; submit latency over %d single submits; %d rounds; GOMAXPROCS %d, %s\n\n",
		s.Jobs, s.Payload, s.Inserters, s.Batch, s.Submits, rounds, runtime.GOMAXPROCS(0), time.Now().Format(time.DateOnly))
}

// printTable: each round's figures, then xce/River per round and the
// median of those ratios.
func printTable(w io.Writer, s shape, res [][]result) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	cols := []string{"round", "system", "insert jobs/s", "work jobs/s"}
	for _, c := range s.Clients {
		cols = append(cols, fmt.Sprintf("submit p50 / p99 ms, %d client(s)", c))
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	names := []string{"River", "xce"}
	for r, row := range res {
		for k, got := range row {
			cells := []string{fmt.Sprint(r + 1), names[k], fmt.Sprintf("%.0f", got.Insert), fmt.Sprintf("%.0f", got.Work)}
			for _, l := range got.Lat {
				cells = append(cells, l.String())
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
	}
	// Ratios of complete rounds only.
	var ratios [][]float64 // [round][figure]
	for _, row := range res {
		if len(row) != 2 {
			continue
		}
		rv, xv := row[0], row[1]
		q := []float64{xv.Insert / rv.Insert, xv.Work / rv.Work}
		for k := range rv.Lat {
			q = append(q, float64(xv.Lat[k].P50)/float64(rv.Lat[k].P50), float64(xv.Lat[k].P99)/float64(rv.Lat[k].P99))
		}
		ratios = append(ratios, q)
	}
	for r, q := range ratios {
		fmt.Fprintln(tw, ratioRow(fmt.Sprint(r+1), q))
	}
	if len(ratios) > 0 {
		med := make([]float64, len(ratios[0]))
		for f := range med {
			col := make([]float64, len(ratios))
			for r := range ratios {
				col[r] = ratios[r][f]
			}
			med[f] = median(col)
		}
		fmt.Fprintln(tw, ratioRow("median", med))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nxce/River: above 1 is more throughput for xce; for latency, below 1 is faster for xce.")
}

func ratioRow(round string, q []float64) string {
	cells := []string{round, "github.com/xce-hpc/xce/River", fmt.Sprintf("%.2fx", q[0]), fmt.Sprintf("%.2fx", q[1])}
	for k := 2; k+1 < len(q); k += 2 {
		cells = append(cells, fmt.Sprintf("%.2fx / %.2fx", q[k], q[k+1]))
	}
	return strings.Join(cells, "\t")
}
