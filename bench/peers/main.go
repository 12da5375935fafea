// Command peers (issue 23, `make bench-peers`) runs xce beside the best
// peers it is measured against — NATS JetStream (three nats-server
// processes, or one) and River on a throwaway PostgreSQL — through the
// same phases: insert N jobs in batches, work them with the same number
// of jobs in flight, then time single submits with 1 and 16 clients.
// Every round visits every system once (the order reversed in every
// second round); the tables give each round's figures, the xce/peer
// ratios of each round and their medians, and the targets met or
// missed. Everything it starts is stopped and its files removed at the
// end, on failure or interrupt too.
//
//	cd bench/peers && go run . -n 200000 -rounds 2
//	cd bench/peers && go run . -systems river,xce1 -workers 64 -claim 16 -river-workers 64 -river-insert many   # bench-river's shape
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"
)

// side is one system under test; runRound drives each through the same
// phases.
type side interface {
	reset(ctx context.Context) error
	insertBatch(ctx context.Context, who, k int) error
	work(ctx context.Context, s shape) (time.Duration, error)
	submit(ctx context.Context, who int) error
}

// settler is a side that leaves background work behind its round (a
// database's autovacuum and checkpoint writes): settle, untimed, after
// the round, does that work at once, so that it falls in no other
// system's round (fairness rule 8, docs/performance.md).
type settler interface {
	settle(ctx context.Context) error
}

// result is one side's figures in one round.
type result struct {
	Insert, Work float64   // jobs/s
	Lat          []latency // per shape.Clients entry
}

// The systems a run can include, by key; -systems picks and orders them.
const (
	sysRiver = "river"
	sysNATS3 = "nats3"
	sysXce3  = "xce3"
	sysNATS1 = "nats1"
	sysXce1  = "xce1"
)

var allSystems = []string{sysRiver, sysNATS3, sysXce3, sysNATS1, sysXce1}

// labels name the systems in the tables.
var labels = map[string]string{
	sysRiver: "River",
	sysNATS3: "NATS JetStream, 3 nodes",
	sysXce3:  "xce, 3 nodes",
	sysNATS1: "NATS JetStream, 1 node",
	sysXce1:  "xce, 1 node",
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-peers:", err)
		os.Exit(1)
	}
}

func run() error {
	s := shape{Clients: []int{1, 16}}
	flag.IntVar(&s.Jobs, "n", 200_000, "jobs inserted and then worked per round and system")
	flag.IntVar(&s.Batch, "batch", 1000, "jobs per insert request (River InsertManyFast, NATS async publishes awaited together, xce SubmitBatch; xce takes at most 1000)")
	flag.IntVar(&s.Inserters, "inserters", 4, "concurrent insert clients")
	flag.IntVar(&s.Workers, "workers", 16, "xce claiming workers and NATS fetching workers, each on its own connection (at most 64: an xce node's limit per client certificate)")
	flag.IntVar(&s.Claim, "claim", 64, "jobs per xce Claim (acked on the next Claim) and per NATS Fetch (-workers x -claim jobs in flight: 1,024 by default, as 64 x 16, NATS's better shape of the two here too: docs/performance.md)")
	flag.IntVar(&s.RiverWorkers, "river-workers", 0, "River MaxWorkers (0: -workers x -claim, the jobs xce and NATS hold in flight)")
	flag.IntVar(&s.Payload, "payload", 100, "bytes of each job's payload (River: a JSON string field of that length)")
	flag.IntVar(&s.Submits, "submits", 2000, "single submits timed per client count (1 and 16 clients)")
	rounds := flag.Int("rounds", 2, "rounds, each visiting every system once")
	warmup := flag.Int("warmup", 1, "unmeasured rounds before them, in the first round's order: a system's first round on fresh processes pays for growing its memory (on this benchmark's VM a page touched first costs 11-16 µs: BenchmarkFirstTouch); their figures are printed apart, in no median or ratio")
	systems := flag.String("systems", strings.Join(allSystems, ","), "the systems of a round, in order: "+strings.Join(allSystems, ", "))
	riverInsert := flag.String("river-insert", "fast", "River's batch insert: fast (InsertManyFast, COPY) or many (InsertMany)")
	natsAck := flag.String("nats-ack", "confirmed", "NATS acks: confirmed (each ack sent with a reply subject, a job counted once the server confirmed its ack, as xce counts) or async (fire-and-forget acks as nats bench sends them by default; the clock stops when the consumer has none pending)")
	profDir := flag.String("profile-dir", "", "after the rounds, one more insert phase, work phase and run of -submits single submits from one client and from 16 on each xce side with CPU profiles of its nodes and of this client written here (and each node's allocation profiles before and after the phase, for go tool pprof -diff_base), and the CPU per job (per submit) by category (not part of the figures)")
	profJobs := flag.Int("profile-jobs", 0, "jobs of the profiled phases (0: -n)")
	timeout := flag.Duration("timeout", 60*time.Minute, "bound on the whole run")
	flag.Parse()
	sys, err := parseSystems(*systems)
	if err != nil {
		return err
	}
	if s.RiverWorkers == 0 {
		s.RiverWorkers = s.Workers * s.Claim
	}
	switch {
	case s.Jobs < 1 || s.Batch < 1 || s.Inserters < 1 || s.Workers < 1 || s.Claim < 1 || s.RiverWorkers < 1 || s.Payload < 1 || s.Submits < 1 || *rounds < 1:
		return errors.New("-n, -batch, -inserters, -workers, -claim, -river-workers, -payload, -submits and -rounds must be positive")
	case *warmup < 0:
		return fmt.Errorf("-warmup %d: not negative", *warmup)
	case *profJobs < 0:
		return fmt.Errorf("-profile-jobs %d: not negative", *profJobs)
	case s.Batch > 1000:
		return fmt.Errorf("-batch %d: xce takes at most 1000 jobs per SubmitBatch", s.Batch)
	case *riverInsert != "many" && *riverInsert != "fast":
		return fmt.Errorf("-river-insert %q: many or fast", *riverInsert)
	case *natsAck != natsAckConfirmed && *natsAck != natsAckAsync:
		return fmt.Errorf("-nats-ack %q: %s or %s", *natsAck, natsAckConfirmed, natsAckAsync)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	// One temp dir holds every system's files and the built binaries;
	// each system's stop removes its own part, this the rest.
	dir, err := os.MkdirTemp("", "xce-bench-peers-")
	if err != nil {
		return err
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "bench-peers: remove %s: %v\n", dir, err)
		}
	}()
	binDir := filepath.Join(dir, "bin")

	sides := map[string]side{}
	var notes []string
	var xceBin, natsBin string
	for _, key := range sys {
		switch key {
		case sysRiver:
			maxClients := slices.Max(s.Clients)
			poolConns := max(s.Inserters, maxClients) + 8 // + River's producer, completer, leader and notifier
			pg, err := startPostgres(ctx, poolConns+20)
			if err != nil {
				return fmt.Errorf("postgres: %w", err)
			}
			defer pg.stop()
			rs, err := newRiverSide(ctx, pg, s, poolConns, *riverInsert == "fast")
			if err != nil {
				return fmt.Errorf("river: %w", err)
			}
			defer rs.close()
			sides[key] = rs
			notes = append(notes, rs.describe(s, riverVersion(), pg.version))
		case sysXce1, sysXce3:
			if xceBin == "" {
				if xceBin, err = buildXce(ctx, binDir); err != nil {
					return err
				}
			}
			nodes := 1
			if key == sysXce3 {
				nodes = 3
			}
			xc, err := startXce(ctx, dir, xceBin, nodes, *profDir != "")
			if err != nil {
				return fmt.Errorf("%s: %w", labels[key], err)
			}
			defer xc.stop()
			xs, err := newXceSide(ctx, xc, s, max(s.Inserters, s.Workers, slices.Max(s.Clients)))
			if err != nil {
				return fmt.Errorf("%s: %w\n%s", labels[key], err, xc.logTail())
			}
			defer xs.close()
			sides[key] = xs
			notes = append(notes, xs.describe(s, nodes))
		case sysNATS1, sysNATS3:
			if natsBin == "" {
				if natsBin, err = buildNATS(ctx, binDir); err != nil {
					return err
				}
			}
			nodes := 1
			if key == sysNATS3 {
				nodes = 3
			}
			nc, err := startNATS(ctx, dir, natsBin, nodes)
			if err != nil {
				return fmt.Errorf("%s: %w", labels[key], err)
			}
			defer nc.stop()
			ns, err := newNATSSide(ctx, nc, s, *natsAck)
			if err != nil {
				return fmt.Errorf("%s: %w\n%s", labels[key], err, nc.logTail())
			}
			defer ns.close()
			sides[key] = ns
			notes = append(notes, ns.describe(s))
		}
	}

	header(os.Stdout, s, *warmup, *rounds, notes)
	// round runs one round in order, its figures into row.
	round := func(name string, order []string, row map[string]result) error {
		for _, key := range order {
			got, err := runRound(ctx, sides[key], s)
			if err != nil {
				if lt, ok := sides[key].(interface{ logTail() string }); ok {
					err = fmt.Errorf("%w\n%s", err, lt.logTail())
				}
				return fmt.Errorf("%s, %s: %w", name, labels[key], err)
			}
			row[key] = got
			fmt.Fprintf(os.Stderr, "bench-peers: %s %s: insert %.0f/s, work %.0f/s, submit %v (1) %v (16)\n",
				name, labels[key], got.Insert, got.Work, got.Lat[0], got.Lat[len(got.Lat)-1])
		}
		return nil
	}
	warm := make([]map[string]result, *warmup)
	for r := range *warmup {
		warm[r] = map[string]result{}
		if err := round(fmt.Sprintf("warm-up round %d", r+1), roundOrder(sys, 0), warm[r]); err != nil {
			printWarmup(os.Stdout, s, sys, warm)
			return err
		}
	}
	printWarmup(os.Stdout, s, sys, warm)
	res := make([]map[string]result, *rounds)
	for r := range *rounds {
		res[r] = map[string]result{}
		if err := round(fmt.Sprintf("round %d", r+1), roundOrder(sys, r), res[r]); err != nil {
			printTables(os.Stdout, s, sys, res)
			return err
		}
	}
	printTables(os.Stdout, s, sys, res)
	if *profDir != "" {
		for _, key := range sys {
			xs, ok := sides[key].(*xceSide)
			if !ok {
				continue
			}
			if err := profilePass(ctx, xs, s, key, *profDir, cmp.Or(*profJobs, s.Jobs)); err != nil {
				return fmt.Errorf("%s: profile: %w", labels[key], err)
			}
		}
	}
	return nil
}

// parseSystems reads -systems: known keys, each at most once.
func parseSystems(list string) ([]string, error) {
	var out []string
	for k := range strings.SplitSeq(list, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(allSystems, k) {
			return nil, fmt.Errorf("-systems: unknown system %q (known: %s)", k, strings.Join(allSystems, ", "))
		}
		if slices.Contains(out, k) {
			return nil, fmt.Errorf("-systems: %q given twice", k)
		}
		out = append(out, k)
	}
	return out, nil
}

// roundOrder is the order of the systems in round r (from 0): as given
// in even rounds, reversed in odd ones, so no system always runs first
// on a cold page cache or last on a warm one.
func roundOrder(sys []string, r int) []string {
	out := slices.Clone(sys)
	if r%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// runRound: reset, insert s.Jobs, work them, then the latency runs; then
// settle, if the side has background work to finish.
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
	if st, ok := sd.(settler); ok {
		if err := st.settle(ctx); err != nil {
			return result{}, fmt.Errorf("settle: %w", err)
		}
	}
	return out, nil
}

// moduleVersion is the version of module path in this binary ("?" if
// the build carries none).
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "?"
}

func riverVersion() string { return moduleVersion("github.com/riverqueue/river") }

func header(w io.Writer, s shape, warmup, rounds int, notes []string) {
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	fmt.Fprintf(w, "shape: %d jobs of %d B per round, inserted by %d clients in batches of %d; %d jobs in flight while working; submit latency over %d single submits; %d unmeasured warm-up round(s), then %d rounds; GOMAXPROCS %d, %s\n\n",
		s.Jobs, s.Payload, s.Inserters, s.Batch, s.Workers*s.Claim, s.Submits, warmup, rounds, runtime.GOMAXPROCS(0), time.Now().UTC().Format(time.DateOnly))
}
