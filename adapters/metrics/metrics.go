// Package metrics serves a controller's Prometheus metrics and its health
// endpoints on plain HTTP (--metrics-addr): /metrics, /healthz, /readyz.
//
// Where each figure comes from (docs/operations.md, "Metrics and health",
// lists them all):
//   - the node's state (role, term, config, queues, WAL, replication) is
//     read at scrape time through the node's read-only methods, on the
//     daemon's event loop goroutine (Config.Inspect), so one scrape sees
//     one consistent state and sm stays pure;
//   - fsync latency where the I/O worker runs fsync (ObserveSync, for
//     fileio.Executor), checkpoint latency from the node's state after
//     each step (AfterStep, for runner.Config), and requests where the
//     daemon answers them (ObserveRequestCode);
//   - connections from the transport at scrape time (Config.Conns).
//
// Every method of a nil *Metrics does nothing, so a daemon without
// --metrics-addr wires nil.
package metrics

import (
	"context"
	"errors"
	"github.com/xce-hpc/xce/buildinfo"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xce-hpc/xce/sm"
)

// DefaultLoopTimeout bounds how long a scrape or a health check waits for
// the event loop to take its look at the node.
const DefaultLoopTimeout = 2 * time.Second

// Config wires Metrics to a node.
type Config struct {
	// Inspect runs f on the node from its event loop goroutine and returns
	// once it ran, or an error if the loop did not take it before ctx
	// ended or has stopped (runner.Runner.Inspect). Required.
	Inspect func(ctx context.Context, f func(n *sm.Node)) error
	// Conns counts open client and peer connections (transport
	// OpenConns); nil reports none.
	Conns func() (clients, peers int)
	// Refused counts refused connections by reason (transport Refused);
	// nil reports none.
	Refused func() map[string]uint64
	// LoopTimeout: 0 means DefaultLoopTimeout.
	LoopTimeout time.Duration
	// Profiling adds Go's profiles under /debug/pprof/ (--pprof): CPU,
	// heap, goroutines, the execution trace, for finding where a real
	// node's time goes.
	Profiling bool
}

// Metrics is one node's registry and the hooks that feed it.
type Metrics struct {
	cfg Config
	reg *prometheus.Registry

	requests   *prometheus.CounterVec
	claim      prometheus.Histogram
	fsync      *prometheus.HistogramVec
	checkpoint prometheus.Histogram
	step       prometheus.Histogram

	// Owned by the event loop goroutine (AfterStep).
	ckptRunning bool
	ckptStart   time.Time
}

// ErrNoInspect: Config.Inspect is required.
var ErrNoInspect = errors.New("metrics: Config.Inspect is nil")

// New builds the registry: the node collector, the request, claim, fsync
// and checkpoint instruments, and the Go runtime and process collectors.
func New(cfg Config) (*Metrics, error) {
	if cfg.Inspect == nil {
		return nil, ErrNoInspect
	}
	if cfg.LoopTimeout <= 0 {
		cfg.LoopTimeout = DefaultLoopTimeout
	}
	m := &Metrics{
		cfg: cfg,
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xce_requests_total",
			Help: "Client requests answered by this node, by operation and the gRPC code the API answered (OK, InvalidArgument, Unavailable, Unknown = outcome unknown, ...; redirect: a standby handed the call to the primary).",
		}, []string{"op", "code"}),
		claim: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "xce_claim_duration_seconds",
			Help:    "Time to answer a claim request on this node, from its arrival to its reply (durable on the required copies).",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 19), // 100 µs .. 26 s
		}),
		fsync: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "xce_fsync_duration_seconds",
			Help:    "Time of each fsync the node asked for, of a file or of a directory.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50 µs .. 1.6 s
		}, []string{"target"}),
		checkpoint: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "xce_checkpoint_duration_seconds",
			Help:    "Time of each completed checkpoint of the job log, which bounds its replay: a snapshot of the job state written and synced, then the WAL segments it covers released.",
			Buckets: prometheus.ExponentialBuckets(1e-3, 2, 14), // 1 ms .. 8 s
		}),
		step: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "xce_step_duration_seconds",
			Help:    "Time of each step of the node's event loop (one input and its effects): every request and heartbeat waits for the step ahead of it.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 4, 11), // 10 µs .. 10.5 s
		}),
	}
	bi := buildinfo.Read()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xce_build_info",
		Help: "Always 1: the build this node runs, by module version, VCS revision and Go version (the labels --version prints).",
	}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(bi.Version, bi.Revision, bi.GoVersion).Set(1)
	m.reg.MustRegister(
		build,
		&nodeCollector{view: m.view, conns: cfg.Conns, refused: cfg.Refused},
		m.requests, m.claim, m.fsync, m.checkpoint, m.step,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m, nil
}

// Registry is the registry /metrics serves.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves /metrics, /healthz and /readyz. A scrape whose look at the
// node fails (the loop is stuck) still serves the other metrics.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/healthz", m.healthz)
	mux.HandleFunc("/readyz", m.readyz)
	if m.cfg.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index) // and every named profile under it
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// inspect runs f on the node within the loop timeout.
func (m *Metrics) inspect(f func(n *sm.Node)) error {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.LoopTimeout)
	defer cancel()
	return m.cfg.Inspect(ctx, f)
}

// view takes one look at the node for a scrape.
func (m *Metrics) view() (View, error) {
	var v View
	if err := m.inspect(func(n *sm.Node) { v = ViewOf(n) }); err != nil {
		return View{}, errLoop(err, m.cfg.LoopTimeout)
	}
	v.At = time.Now() // the daemon's clock, as the node's records' times are
	return v, nil
}

// ObserveSync records one fsync (fileio.Executor.ObserveSync).
func (m *Metrics) ObserveSync(dir bool, took time.Duration) {
	if m == nil {
		return
	}
	target := "file"
	if dir {
		target = "dir"
	}
	m.fsync.WithLabelValues(target).Observe(took.Seconds())
}

// AfterStep times steps and checkpoints (runner.Config.AfterStep): a
// checkpoint starts when the node's CheckpointInProgress turns true and is
// observed when it turns false while the node is still primary (a primary
// that stepped down abandoned its checkpoint). Called on the event loop
// goroutine only.
func (m *Metrics) AfterStep(n *sm.Node, _ sm.Input, took time.Duration) {
	if m == nil {
		return
	}
	m.step.Observe(took.Seconds())
	running := n.CheckpointInProgress()
	if running == m.ckptRunning {
		return
	}
	m.ckptRunning = running
	now := time.Now()
	if running {
		m.ckptStart = now
	} else if n.Role() == sm.RolePrimary {
		m.checkpoint.Observe(now.Sub(m.ckptStart).Seconds())
	}
}
