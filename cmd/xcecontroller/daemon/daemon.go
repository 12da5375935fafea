package daemon

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sdnotify "github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"

	"github.com/xce-hpc/xce/adapters/api"
	"github.com/xce-hpc/xce/adapters/authz"
	"github.com/xce-hpc/xce/adapters/fileio"
	"github.com/xce-hpc/xce/adapters/logging"
	"github.com/xce-hpc/xce/adapters/metrics"
	"github.com/xce-hpc/xce/adapters/runner"
	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/transport"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/peerlist"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// Config is everything xcecontroller takes on its command line.
type Config struct {
	Peers, Name, Workdir string
	Cert, Key, CA        string
	KeepN                int
	StaleTimeout         time.Duration
	ElectionTimeout      time.Duration
	PriorityStep         time.Duration
	Jitter               time.Duration
	Heartbeat            time.Duration
	FailureTimeout       time.Duration
	DialTimeout          time.Duration
	MaxWALRecords        int
	RetainWALRecords     int
	SyncStandbys         int
	Mode                 string // auto, quorum or seed
	WALRepair            bool
	LogLevel, LogFormat  string
	// AdminCN and ClientCN are the allowlists of package authz; ClientCN
	// nil admits any CA-signed client that is not a peer as a worker.
	// OP_upgradeConfig is enabled only when AdminCN is not empty.
	AdminCN, ClientCN []string
	// LogLevelFile holds the log level, read at start and on SIGHUP.
	LogLevelFile string
	// MetricsAddr serves /metrics, /healthz and /readyz on plain HTTP
	// (--metrics-addr); "" serves nothing.
	MetricsAddr string
	// Pprof adds Go's profiles under /debug/pprof/ on the metrics
	// listener (--pprof; needs MetricsAddr).
	Pprof bool
	// GCHeadroom and GCHeadroomMinMiB are the collector's policy
	// (gcheadroom.go): the heap goal after each collection is the live
	// heap + max(GCHeadroomMinMiB MiB, GCHeadroom% of it); 0: Go's default.
	GCHeadroom, GCHeadroomMinMiB int
	// BulkWriteMiB paces every write of a large file (a checkpoint, a
	// snapshot received from the primary) to that many MiB a second
	// (--bulk-write-rate, fileio.Executor.WriteRate); 0: unpaced.
	BulkWriteMiB int
	// BackgroundNice lowers the CPU priority of the node's background
	// work (a checkpoint's encode and a standby checkpoint's reads, a
	// standby's sync snapshot, a received snapshot's check as it is read
	// back)
	// by this many nice steps
	// (--background-nice, fileio.Executor.BackgroundNice); 0: none.
	BackgroundNice int
	// HandshakesPerSource and NewConnsPerSecond are the transport's
	// admission of connections from a source address that is not a
	// --peers host's (transport.Config; 0: its default).
	HandshakesPerSource, NewConnsPerSecond int
}

// DefaultConfig carries the seed's defaults.
func DefaultConfig() Config {
	d := sm.DefaultOptions(0, []string{"x"})
	return Config{
		KeepN: d.KeepN, StaleTimeout: d.StaleTimeout,
		ElectionTimeout: d.ElectionTimeout, PriorityStep: d.PriorityStep, Jitter: d.JitterMax,
		Heartbeat: d.HeartbeatInterval, FailureTimeout: d.FailureTimeout, DialTimeout: 500 * time.Millisecond,
		MaxWALRecords: d.MaxWALRecords, RetainWALRecords: d.RetainWALRecords, SyncStandbys: d.SyncStandbys,
		LogLevel: "info", LogFormat: "console",
		GCHeadroom: 10, GCHeadroomMinMiB: 32,
		BackgroundNice: fileio.DefaultBackgroundNice,
	}
}

// Run runs one node until ctx ends (clean stop, exit code 0) or the node
// exits (its code: 0 for a requested restart, 1 for FATAL). Setup errors
// are FATAL too: logged, and exit code 1.
func Run(ctx context.Context, cfg Config, logOut io.Writer) int {
	log, level, err := logging.New(cfg.LogLevel, cfg.LogFormat, logOut)
	if err != nil {
		fmt.Fprintln(logOut, "FATAL", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	code, err := run(ctx, cfg, log, level)
	if err != nil {
		log.Error("FATAL "+err.Error(), zap.String("key", "fatal.startup"))
		return 1
	}
	return code
}

// run is the node's life in its steps: the flags checked, the node built,
// its listener bound, the loops started, the runner run until it ends,
// then everything stopped in order.
func run(ctx context.Context, cfg Config, log *zap.Logger, level zap.AtomicLevel) (int, error) {
	if err := checkFlags(cfg, level); err != nil {
		return 1, err
	}
	gcMsg, gcStop, gcHold, gcHoldRead, gcSyncs := gcPolicy(cfg.GCHeadroom, cfg.GCHeadroomMinMiB)
	defer gcStop()
	log.Info(gcMsg, zap.String("key", "gc.policy"))
	d, err := newDaemon(cfg, log)
	if err != nil {
		return 1, err
	}
	// A standby forwards a primary-only call with its own certificate,
	// waiting as long as the node itself does for an answer.
	fwd, err := client.New(d.cpeers, d.mat, client.Options{Timeout: requestTimeout})
	if err != nil {
		return 1, err
	}
	defer fwd.Close()
	if err := d.newTransport(fwd); err != nil {
		return 1, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer watchSIGHUP(ctx, &reloader{cfg: cfg, tr: d.tr, level: level, log: log, now: time.Now})()
	// Bind before the node runs: a node that cannot be reached must not
	// stand for election (it would promote with no peer able to see it).
	if err := d.tr.Bind(ctx); err != nil {
		logging.Fatal(log, fmt.Sprintf("cannot listen on %s: %v — another process holds the port, or the address is not this machine's; not starting", d.peers[d.self].Addr(), err), zap.String("key", "fatal.listen"))
		_ = d.tr.Close()
		return 1, err
	}
	mx, mln, err := newMetrics(cfg.MetricsAddr, cfg.Pprof, &d.rnp, d.tr)
	if err != nil {
		_ = d.tr.Close()
		return 1, err
	}
	d.mx = mx // before the listener starts: no request is served yet
	metricsDone := d.serveMetrics(ctx, mln)
	listenErr := d.listen(ctx, cancel)
	rn := d.newRunner(ctx, gcHold, gcHoldRead, gcSyncs)
	d.rnp.Store(rn)
	log.Info(fmt.Sprintf("xcecontroller %s (priority %d of %d) listening on %s, work dir %s", cfg.Name, d.self, len(d.peers), d.peers[d.self].Addr(), d.opt.BaseDir), zap.String("key", "start"))
	if mln != nil {
		log.Info("metrics and health on http://"+mln.Addr().String()+" (/metrics, /healthz, /readyz)", zap.String("key", "metrics.listen"))
	}
	err = rn.Run(ctx)
	var ee *runner.ExitError
	if errors.As(err, &ee) && ee.Code == 0 {
		// A restart after OP_upgradeConfig: the admin's ACK was handed to
		// its waiter in the step that ended Run; let the transport write
		// it before the connections close (seed 002 §6.4 step 8).
		d.flight.drain(replyFlushBound)
	}
	_, _ = sdnotify.SdNotify(false, sdnotify.SdNotifyStopping)
	cancel()
	_ = d.tr.Close()
	lerr := <-listenErr
	<-metricsDone
	return exitCode(log, err, ee, lerr)
}

// checkFlags reads --log-level-file into level and checks the flags whose
// range alone makes them wrong.
func checkFlags(cfg Config, level zap.AtomicLevel) error {
	if cfg.LogLevelFile != "" {
		lvl, err := readLevelFile(cfg.LogLevelFile)
		if err != nil {
			return fmt.Errorf("--log-level-file: %w", err)
		}
		level.SetLevel(lvl)
	}
	if cfg.GCHeadroom < 0 || cfg.GCHeadroom > 100 || cfg.GCHeadroomMinMiB < 0 {
		return fmt.Errorf("--gc-headroom %d (want 0 to 100) or --gc-headroom-min-mib %d (want >= 0) out of range", cfg.GCHeadroom, cfg.GCHeadroomMinMiB)
	}
	if cfg.HandshakesPerSource < 0 || cfg.NewConnsPerSecond < 0 {
		return fmt.Errorf("--handshakes-per-source %d or --new-conns-per-source %d: want >= 0 (0: the default)", cfg.HandshakesPerSource, cfg.NewConnsPerSecond)
	}
	if cfg.BulkWriteMiB < 0 {
		return fmt.Errorf("--bulk-write-rate %d: want >= 0 (MiB/s; 0: unpaced)", cfg.BulkWriteMiB)
	}
	if cfg.BackgroundNice < 0 || cfg.BackgroundNice > fileio.MaxNice {
		return fmt.Errorf("--background-nice %d: want 0 to %d (0: background work at the node's priority)", cfg.BackgroundNice, fileio.MaxNice)
	}
	return nil
}

// daemon is what the steps of run share: the node and its options, the
// peers, the TLS material, the authorisation policy, and the pieces the
// client door reaches (set before the listener serves its first call).
type daemon struct {
	cfg    Config
	log    *zap.Logger
	peers  []peerlist.Peer
	cpeers []client.Peer
	tpeers []transport.Peer
	self   int
	mat    *tlsconf.Material
	policy *authz.Policy
	opt    sm.Options
	node   *sm.Node
	// The listener may call the door before the runner is built: it
	// answers "starting" until then.
	rnp    atomic.Pointer[runner.Runner]
	flight clientFlight
	mx     *metrics.Metrics     // nil without --metrics-addr; set before Listen
	tr     *transport.Transport // set before the listener starts
}

// newDaemon parses --peers, prepares the work directory, loads the TLS
// material, and builds the node's options, policy and node.
func newDaemon(cfg Config, log *zap.Logger) (*daemon, error) {
	peers, warnings, err := peerlist.Parse(cfg.Peers)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		log.Warn(w, zap.String("key", "peers.suspect"))
	}
	self, err := peerlist.IndexOf(peers, cfg.Name)
	if err != nil {
		return nil, err
	}
	base := filepath.Join(cfg.Workdir, cfg.Name)
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("create work dir: %w", err)
	}
	if err := fileio.CheckLocalFS(base); err != nil {
		return nil, err
	}
	mat, err := tlsconf.Load(cfg.Cert, cfg.Key, cfg.CA)
	if err != nil {
		return nil, err
	}
	if msg, warn := tlsconf.ExpiryWarning(mat.Leaf, time.Now(), tlsconf.CertWarnDays); warn {
		if tlsconf.Expired(mat.Leaf, time.Now()) {
			// Not a warning: no peer or client can complete a handshake.
			log.Error(msg, zap.String("key", "tls.cert-expired"))
		} else {
			log.Warn(msg, zap.String("key", "tls.cert-expiry"))
		}
	}
	d := &daemon{cfg: cfg, log: log, peers: peers, cpeers: client.PeersOf(peers), self: self, mat: mat}
	names := make([]string, len(peers))
	d.tpeers = make([]transport.Peer, len(peers))
	for i, p := range peers {
		names[i] = p.Name
		d.tpeers[i] = transport.Peer{Name: p.Name, Addr: p.Addr()}
	}
	if d.policy, err = authz.NewPolicy(names, cfg.AdminCN, cfg.ClientCN); err != nil {
		return nil, err
	}
	if d.opt, err = nodeOptions(cfg, self, names, peerlist.Hash(peers), d.policy); err != nil {
		return nil, err
	}
	if cfg.Pprof && cfg.MetricsAddr == "" {
		return nil, errors.New("--pprof serves on the metrics listener: it needs --metrics-addr")
	}
	if d.opt.SeedMode {
		log.Warn("seed durability mode: a primary may serve alone and acknowledge writes that no standby holds; a failover, partition or pause can lose them (use --mode quorum with 3 or more nodes to rule that out)", zap.String("key", "mode.seed"))
	}
	d.opt.BaseDir, d.opt.Workdir = base, cfg.Workdir
	if d.node, err = sm.NewNode(d.opt); err != nil {
		return nil, err
	}
	return d, nil
}

// nodeOptions are the node's options from the flags.
func nodeOptions(cfg Config, self int, names []string, peersHash uint64, policy *authz.Policy) (sm.Options, error) {
	opt := sm.DefaultOptions(self, names)
	opt.PeersHash = peersHash
	opt.KeepN, opt.StaleTimeout = cfg.KeepN, cfg.StaleTimeout
	opt.ElectionTimeout, opt.PriorityStep, opt.JitterMax = cfg.ElectionTimeout, cfg.PriorityStep, cfg.Jitter
	opt.HeartbeatInterval, opt.FailureTimeout = cfg.Heartbeat, cfg.FailureTimeout
	opt.MaxWALRecords, opt.WALRepair, opt.SyncStandbys = cfg.MaxWALRecords, cfg.WALRepair, cfg.SyncStandbys
	opt.RetainWALRecords = cfg.RetainWALRecords
	opt.EnableUpgrade = policy.UpgradeEnabled()
	switch cfg.Mode {
	case "", "auto":
	case "quorum":
		opt.SeedMode = false
	case "seed":
		opt.SeedMode = true
	default:
		return opt, fmt.Errorf("--mode %q: want auto, quorum or seed", cfg.Mode)
	}
	return opt, nil
}

// door is the one door of client requests: authorised here, or refused
// with a definite error (nothing was applied); counted when metrics are
// on.
func (d *daemon) door(ctx context.Context, c api.Caller, req *wire.Request) *wire.Reply {
	start := time.Now()
	rep := d.authorised(ctx, c, req)
	if d.mx != nil { // refusals count too: errors by operation and code
		code := metrics.CodeName(api.CodeOf(req, rep))
		if rep.NotPrimary {
			code = metrics.CodeRedirect
		}
		d.mx.ObserveRequestCode(metrics.Op(req), code, time.Since(start))
	}
	return rep
}

// authorised answers req if the policy lets c make it.
func (d *daemon) authorised(ctx context.Context, c api.Caller, req *wire.Request) *wire.Reply {
	if c.Ignored != "" {
		d.log.Warn(fmt.Sprintf("ignored %s %q from %s: only a node's own certificate may forward a call; the call runs as that certificate",
			client.OnBehalfHeader, tlsconf.SanitizeCN(c.Ignored), c), zap.String("key", "authz.on-behalf-ignored"))
	}
	var dec authz.Decision
	if c.Via != "" {
		dec = d.policy.DecideOnBehalf(c.Via, c.CN, authz.ParseRole(c.Role), req)
	} else {
		dec = d.policy.Decide(c.CN, req)
	}
	if !dec.Allowed {
		d.log.Warn(dec.Reason, zap.String("key", "authz.refused"))
		return &wire.Reply{Status: authz.StatusForbidden, Error: dec.Reason}
	}
	d.flight.enter()
	defer d.flight.leave(req.Upgrade != nil)
	// Only a direct call reaches an upgrade (DecideOnBehalf refuses admin
	// operations), so its audit line's CN is the caller's own.
	return answer(ctx, req, tlsconf.SanitizeCN(c.CN), d.rnp.Load(), d.tr.TLS().Leaf, d.peers, d.self)
}

// newTransport builds the peer and client transport, its HTTP side the
// API served through the door.
func (d *daemon) newTransport(fwd *client.Client) error {
	_, apiHandler := api.Handler(api.Config{Door: d.door, Self: d.self, Peers: d.cpeers, Forward: fwd, Policy: d.policy})
	tr, err := transport.New(transport.Config{
		Self: d.self, Peers: d.tpeers, TLS: d.mat, DialTimeout: d.cfg.DialTimeout,
		HandshakesPerSource: d.cfg.HandshakesPerSource, NewConnsPerSecond: d.cfg.NewConnsPerSecond,
		Logf: func(format string, args ...any) {
			d.log.Debug(fmt.Sprintf(format, args...), zap.String("key", "transport"))
		},
		HTTP: apiHandler,
	})
	d.tr = tr
	return err
}

// watchSIGHUP reloads on each SIGHUP until ctx ends; the returned func
// stops the signal's delivery.
func watchSIGHUP(ctx context.Context, rl *reloader) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-hup:
				rl.reload()
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { signal.Stop(hup) }
}

// serveMetrics serves mln (nil: nothing) until ctx ends; the channel
// closes when it has stopped.
func (d *daemon) serveMetrics(ctx context.Context, mln net.Listener) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if d.mx == nil {
			return
		}
		if err := d.mx.Serve(ctx, mln); err != nil {
			d.log.Error(err.Error()+" — /metrics, /healthz and /readyz are gone; the node goes on", zap.String("key", "metrics.failed"))
		}
	}()
	return done
}

// listen serves the bound transport until ctx ends; a listener that
// fails otherwise cancels the node. The channel gets Listen's error.
func (d *daemon) listen(ctx context.Context, cancel context.CancelFunc) <-chan error {
	listenErr := make(chan error, 1)
	go func() {
		err := d.tr.Listen(ctx)
		if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			logging.Fatal(d.log, "listener failed: "+err.Error()+" — stopping", zap.String("key", "fatal.listen"))
			cancel() // a node nobody can reach stops rather than serve deaf
		}
		listenErr <- err
	}()
	return listenErr
}

// newRunner builds the node's event loop over the transport's inbound
// messages and the file executor, and tells systemd once it is ready.
func (d *daemon) newRunner(ctx context.Context, gcHold, gcHoldRead func() func(), gcSyncs *syncHold) *runner.Runner {
	inbound := make(chan runner.Inbound, 1024)
	go func() {
		for m := range d.tr.Inbound() {
			select {
			case inbound <- runner.Inbound{From: m.From, Msg: m.Msg}:
			case <-ctx.Done():
				return
			}
		}
	}()
	var niceWarned sync.Once
	files := &fileio.Executor{Base: d.opt.BaseDir, WriteRate: int64(d.cfg.BulkWriteMiB) << 20, AroundLarge: gcHold, AroundRead: gcHoldRead,
		BackgroundNice: d.cfg.BackgroundNice,
		BackgroundError: func(err error) {
			niceWarned.Do(func() {
				d.log.Warn(fmt.Sprintf("cannot lower the CPU priority of background work (--background-nice %d): %v; checkpoints and syncs run at the node's priority", d.cfg.BackgroundNice, err), zap.String("key", "files.background-nice"))
			})
		},
		TrashError: func(path string, err error) {
			d.log.Warn(fmt.Sprintf("cannot delete %s (a removed file, kept in %s until the next removal): %v", path, fileio.TrashDir, err), zap.String("key", "files.trash"))
		}}
	afterStep := func(n *sm.Node, in sm.Input, took time.Duration) {
		gcSyncs.update(n.SnapshotSyncing())
		if d.mx != nil {
			d.mx.AfterStep(n, in, took)
		}
	}
	files.ObserveSync = slowSyncLogger(d.log, d.mx)
	rn := runner.New(runner.Config{Node: d.node, Files: files, Transport: d.tr, Inbound: inbound, Log: d.log, Seed: randomSeed(), AfterStep: afterStep})
	go func() {
		select {
		case <-rn.Ready():
			if ok, err := sdnotify.SdNotify(false, sdnotify.SdNotifyReady); err != nil {
				d.log.Warn("systemd notify READY=1 failed: "+err.Error(), zap.String("key", "systemd"))
			} else if ok {
				d.log.Info("systemd notified READY=1", zap.String("key", "systemd"))
			}
		case <-ctx.Done():
		}
	}()
	return rn
}

// exitCode is run's result once everything stopped: the runner's exit
// code, a listener failure (logged FATAL when it failed), or a clean stop.
func exitCode(log *zap.Logger, err error, ee *runner.ExitError, lerr error) (int, error) {
	switch {
	case lerr != nil && !errors.Is(lerr, context.Canceled) && ee == nil:
		return 1, lerr // logged FATAL when it failed
	case ee != nil:
		return ee.Code, nil
	case err == nil || errors.Is(err, context.Canceled):
		log.Info("stopped", zap.String("key", "stop"))
		return 0, nil
	default:
		return 1, err
	}
}

// answer serves an authorised client request from the runner's published
// status; caller is the client certificate's CN, sanitised, and own the
// node's certificate in use.
func answer(ctx context.Context, req *wire.Request, caller string, rn *runner.Runner, own *x509.Certificate, peers []peerlist.Peer, self int) *wire.Reply {
	rep := &wire.Reply{}
	if rn == nil {
		rep.Status, rep.Error = int32(sm.StatusEAGAIN), "starting"
		return rep
	}
	switch {
	case req.Status != nil:
		st := rn.Status()
		pname := ""
		if st.Primary >= 0 && st.Primary < len(peers) {
			pname = peers[st.Primary].Name
		}
		sr := &schema.StatusReply{
			Name: peers[self].Name, Priority: uint32(self), Role: st.Role.String(), Term: st.Term,
			Primary: int32(st.Primary), PrimaryName: pname, ConfigTag: st.ConfigTag, ConfigGeneration: st.Generation,
			ConfigStale: st.Stale, Serving: st.Serving,
			Mode: "seed", AckedWithoutStandby: st.AckedWithoutStandby, Degraded: st.AckedWithoutStandby > 0,
			DurableLsn: st.DurableLSN, CommitLsn: st.CommitLSN, CertNotAfter: own.NotAfter.Unix(),
		}
		for _, p := range st.PeersMismatch {
			if p >= 0 && p < len(peers) {
				sr.PeersMismatch = append(sr.PeersMismatch, peers[p].Name)
			}
		}
		if st.Quorum {
			sr.Mode = "quorum"
		}
		for _, s := range st.Standbys {
			if s.Peer >= 0 && s.Peer < len(peers) {
				sr.Standbys = append(sr.Standbys, &schema.StandbyState{Name: peers[s.Peer].Name, State: s.State, AckedLsn: s.Acked, Behind: s.Behind})
			}
		}
		if st.Role == sm.RolePrimary && req.Status.GetQueues() {
			sr.Queues, sr.QueuesError = queueDepths(ctx, rn)
		}
		rep.StatusReply = sr
	case req.Config:
		st := rn.Status()
		if len(st.Config) == 0 {
			rep.Status, rep.Error = int32(sm.StatusEAGAIN), "no config loaded yet"
			return rep
		}
		rep.Config = &schema.ConfigReply{Blob: st.Config, VersionTag: st.ConfigTag}
	case req.Upgrade != nil:
		return answerUpgrade(rep, req.Upgrade, caller, rn, self)
	case req.Switchover != nil:
		return answerSwitchover(rep, *req.Switchover, caller, rn, self)
	case req.Job != nil:
		// The caller's context: a client that goes away takes its long
		// poll with it (sm.ClientGone); a claim's wait extends the bound.
		ctx, cancel := context.WithTimeout(ctx, requestTimeout+req.Job.Wait)
		defer cancel()
		r, err := rn.Do(ctx, *req.Job)
		if errors.Is(err, runner.ErrNotRunning) {
			prim := stoppedPrimary(rn, self)
			redirectStopped(rep)
			rep.Job = &sm.Reply{Status: rep.Status, Error: rep.Error, NotPrimary: true, Primary: prim}
			return rep
		}
		if err != nil { // sent to the node, never answered: maybe applied
			rep.Status, rep.Error = sm.StatusOutcomeUnknown, err.Error()
			return rep
		}
		rep.Status, rep.Error, rep.NotPrimary = r.Status, r.Error, r.NotPrimary
		rep.Job = &r // the API handler renders it
	default:
		rep.Status, rep.Error = int32(sm.StatusEINVAL), "unsupported request"
	}
	return rep
}

// queueDepths reads a primary's queue depths on its event loop (the
// published status does not carry them: they would be copied at every
// step for the rare status call); the text says why when the loop did not
// take the look within queueLookTimeout.
func queueDepths(ctx context.Context, rn *runner.Runner) ([]*schema.QueueDepth, string) {
	ctx, cancel := context.WithTimeout(ctx, queueLookTimeout)
	defer cancel()
	var ds []sm.QueueDepth
	if err := rn.Inspect(ctx, func(n *sm.Node) { ds = n.QueueDepths() }); err != nil {
		return nil, "queue depths not read: " + err.Error()
	}
	out := make([]*schema.QueueDepth, len(ds))
	for i, d := range ds {
		out[i] = &schema.QueueDepth{Queue: d.Queue, Pending: uint64(d.Pending), Processing: uint64(d.Processing), Dead: uint64(d.Dead)}
	}
	return out, ""
}

// queueLookTimeout bounds status's wait for the event loop: a node whose
// loop is stuck still answers status, without its queues.
const queueLookTimeout = time.Second

// requestTimeout bounds the node's answer to one client request.
const requestTimeout = 30 * time.Second

// answerUpgrade runs OP_upgradeConfig (seed 002 §6) through the node. The
// body always carries the seed's UpgradeConfigReply; a refusal also sets
// the status (EAGAIN for the §10.12 redirect, as job operations) and the
// error text.
func answerUpgrade(rep *wire.Reply, req *schema.UpgradeConfigRequest, caller string, rn *runner.Runner, self int) *wire.Reply {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	r, err := rn.Upgrade(ctx, sm.UpgradeConfig{Bytes: req.GetBytes(), SHA256: req.GetSha256(), Peer: caller, Restart: req.GetRestart()})
	if errors.Is(err, runner.ErrNotRunning) {
		prim := stoppedPrimary(rn, self)
		redirectStopped(rep)
		rep.Upgrade = &schema.UpgradeConfigReply{Error: rep.Error, Primary: int32(prim)}
		return rep
	}
	if err != nil { // sent to the node, never answered: maybe saved
		rep.Status, rep.Error = sm.StatusOutcomeUnknown, err.Error()
		return rep
	}
	rep.Upgrade = &schema.UpgradeConfigReply{
		VersionTag: r.VersionTag, Error: r.Error, AckedCount: uint32(max(r.AckedCount, 0)), Primary: int32(r.Primary),
	}
	if r.Outcome != sm.UpgradeOK {
		rep.Status, rep.Error, rep.NotPrimary = upgradeStatus(r.Outcome), r.Error, r.Outcome == sm.UpgradeNotPrimary
	}
	return rep
}

// upgradeStatus is the client status of an upgrade that did not succeed.
func upgradeStatus(o sm.UpgradeOutcome) int32 {
	switch o {
	case sm.UpgradeNotPrimary:
		return sm.StatusEAGAIN
	case sm.UpgradeDisabled:
		return authz.StatusForbidden
	case sm.UpgradeBusy:
		return wire.StatusBusy
	case sm.UpgradeSaveFailed:
		return sm.StatusEIO
	case sm.UpgradeUnknown: // stepped down after the save may have begun
		return sm.StatusOutcomeUnknown
	default: // UpgradeInvalid, and an outcome this build does not know
		return sm.StatusEINVAL
	}
}

// answerSwitchover runs a switchover through the node. The body always
// carries the node's SwitchoverReply; a refusal also sets the status
// (EAGAIN for the redirect, as job operations) and the error text.
func answerSwitchover(rep *wire.Reply, req sm.Switchover, caller string, rn *runner.Runner, self int) *wire.Reply {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	req.Peer = caller
	r, err := rn.Switchover(ctx, req.To, req.Peer)
	if errors.Is(err, runner.ErrNotRunning) {
		prim := stoppedPrimary(rn, self)
		redirectStopped(rep)
		rep.Switchover = &sm.SwitchoverReply{Outcome: sm.SwitchoverNotPrimary, Error: rep.Error, Primary: prim}
		return rep
	}
	if err != nil { // sent to the node, never answered: maybe handed over
		rep.Status, rep.Error = sm.StatusOutcomeUnknown, err.Error()
		return rep
	}
	rep.Switchover = &r
	if r.Outcome != sm.SwitchoverOK {
		rep.Status, rep.Error, rep.NotPrimary = switchoverStatus(r.Outcome), r.Error, r.Outcome == sm.SwitchoverNotPrimary
	}
	return rep
}

// stoppedPrimary is the primary a node that has stopped last followed
// (-1: none known, or the node itself).
func stoppedPrimary(rn *runner.Runner, self int) int {
	if p := rn.Status().Primary; p >= 0 && p != self {
		return p
	}
	return -1
}

// redirectStopped answers a call that reached the node after it stopped
// (to restart after a config upgrade, or to shut down) and that it never
// took: nothing was applied, so it is the "not primary" redirect a
// standby answers (the body of the call's kind names the primary), which
// the API forwards, not an unknown outcome.
func redirectStopped(rep *wire.Reply) {
	rep.Status, rep.Error, rep.NotPrimary = sm.StatusEAGAIN, "Not primary — redirect to primary", true
}

// switchoverStatus is the client status of a switchover that did not
// succeed (the API's code: docs/client-api.md). Disabled is seed mode
// here: without an admin the policy refuses the call before the node
// sees it.
func switchoverStatus(o sm.SwitchoverOutcome) int32 {
	switch o {
	case sm.SwitchoverNotPrimary:
		return sm.StatusEAGAIN // unavailable, naming the primary
	case sm.SwitchoverDisabled, sm.SwitchoverNotInSync:
		return wire.StatusNotInSync // failed_precondition
	case sm.SwitchoverBusy, sm.SwitchoverFailed:
		return wire.StatusBusy // aborted: nothing to undo, try again later
	default: // SwitchoverInvalid, and an outcome this build does not know
		return sm.StatusEINVAL
	}
}

// Bounds of the wait for client replies after the node exited 0.
const (
	replyFlushBound = time.Second
	// replyFlushGrace: after the upgrade handler returned its reply, the
	// transport still writes it; the handler has no hook for "written".
	replyFlushGrace = 100 * time.Millisecond
)

// clientFlight counts client handlers in progress, so that a restarting
// node lets the replies being answered reach their clients.
type clientFlight struct {
	mu       sync.Mutex
	n        int
	upgraded time.Time // when an upgrade handler last returned its reply
}

func (f *clientFlight) enter() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *clientFlight) leave(upgrade bool) {
	f.mu.Lock()
	f.n--
	if upgrade {
		f.upgraded = time.Now()
	}
	f.mu.Unlock()
}

// drain waits, at most bound, until no handler is running and the last
// upgrade reply was handed to the transport replyFlushGrace ago.
func (f *clientFlight) drain(bound time.Duration) {
	deadline := time.Now().Add(bound)
	for {
		f.mu.Lock()
		n, up := f.n, f.upgraded
		f.mu.Unlock()
		now := time.Now()
		if n == 0 && now.Sub(up) >= replyFlushGrace || now.After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func randomSeed() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint64(time.Now().UnixNano()) ^ uint64(os.Getpid())<<16
	}
	return binary.LittleEndian.Uint64(b[:])
}
