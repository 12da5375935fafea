package daemon

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sdnotify "github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"

	"xce/adapters/api"
	"xce/adapters/authz"
	"xce/adapters/fileio"
	"xce/adapters/logging"
	"xce/adapters/metrics"
	"xce/adapters/runner"
	"xce/adapters/tlsconf"
	"xce/adapters/transport"
	"xce/adapters/wire"
	"xce/client"
	"xce/peerlist"
	"xce/schema"
	"xce/sm"
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
		GCHeadroom: 10, GCHeadroomMinMiB: 16,
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

func run(ctx context.Context, cfg Config, log *zap.Logger, level zap.AtomicLevel) (int, error) {
	if cfg.LogLevelFile != "" {
		lvl, err := readLevelFile(cfg.LogLevelFile)
		if err != nil {
			return 1, fmt.Errorf("--log-level-file: %w", err)
		}
		level.SetLevel(lvl)
	}
	if cfg.GCHeadroom < 0 || cfg.GCHeadroom > 100 || cfg.GCHeadroomMinMiB < 0 {
		return 1, fmt.Errorf("--gc-headroom %d (want 0 to 100) or --gc-headroom-min-mib %d (want >= 0) out of range", cfg.GCHeadroom, cfg.GCHeadroomMinMiB)
	}
	if cfg.HandshakesPerSource < 0 || cfg.NewConnsPerSecond < 0 {
		return 1, fmt.Errorf("--handshakes-per-source %d or --new-conns-per-source %d: want >= 0 (0: the default)", cfg.HandshakesPerSource, cfg.NewConnsPerSecond)
	}
	if cfg.BulkWriteMiB < 0 {
		return 1, fmt.Errorf("--bulk-write-rate %d: want >= 0 (MiB/s; 0: unpaced)", cfg.BulkWriteMiB)
	}
	gcMsg, gcStop, gcHold, gcSyncs := gcPolicy(cfg.GCHeadroom, cfg.GCHeadroomMinMiB)
	defer gcStop()
	log.Info(gcMsg, zap.String("key", "gc.policy"))
	peers, warnings, err := peerlist.Parse(cfg.Peers)
	if err != nil {
		return 1, err
	}
	for _, w := range warnings {
		log.Warn(w, zap.String("key", "peers.suspect"))
	}
	self, err := peerlist.IndexOf(peers, cfg.Name)
	if err != nil {
		return 1, err
	}
	base := filepath.Join(cfg.Workdir, cfg.Name)
	if err := os.MkdirAll(base, 0o700); err != nil {
		return 1, fmt.Errorf("create work dir: %w", err)
	}
	if err := fileio.CheckLocalFS(base); err != nil {
		return 1, err
	}
	mat, err := tlsconf.Load(cfg.Cert, cfg.Key, cfg.CA)
	if err != nil {
		return 1, err
	}
	if msg, warn := tlsconf.ExpiryWarning(mat.Leaf, time.Now(), tlsconf.CertWarnDays); warn {
		if tlsconf.Expired(mat.Leaf, time.Now()) {
			// Not a warning: no peer or client can complete a handshake.
			log.Error(msg, zap.String("key", "tls.cert-expired"))
		} else {
			log.Warn(msg, zap.String("key", "tls.cert-expiry"))
		}
	}
	names := make([]string, len(peers))
	tpeers := make([]transport.Peer, len(peers))
	for i, p := range peers {
		names[i] = p.Name
		tpeers[i] = transport.Peer{Name: p.Name, Addr: p.Addr()}
	}
	opt := sm.DefaultOptions(self, names)
	opt.PeersHash = peerlist.Hash(peers)
	opt.KeepN, opt.StaleTimeout = cfg.KeepN, cfg.StaleTimeout
	opt.ElectionTimeout, opt.PriorityStep, opt.JitterMax = cfg.ElectionTimeout, cfg.PriorityStep, cfg.Jitter
	opt.HeartbeatInterval, opt.FailureTimeout = cfg.Heartbeat, cfg.FailureTimeout
	opt.MaxWALRecords, opt.WALRepair, opt.SyncStandbys = cfg.MaxWALRecords, cfg.WALRepair, cfg.SyncStandbys
	opt.RetainWALRecords = cfg.RetainWALRecords
	policy, err := authz.NewPolicy(names, cfg.AdminCN, cfg.ClientCN)
	if err != nil {
		return 1, err
	}
	opt.EnableUpgrade = policy.UpgradeEnabled()
	switch cfg.Mode {
	case "", "auto":
	case "quorum":
		opt.SeedMode = false
	case "seed":
		opt.SeedMode = true
	default:
		return 1, fmt.Errorf("--mode %q: want auto, quorum or seed", cfg.Mode)
	}
	if cfg.Pprof && cfg.MetricsAddr == "" {
		return 1, errors.New("--pprof serves on the metrics listener: it needs --metrics-addr")
	}
	if opt.SeedMode {
		log.Warn("seed durability mode: a primary may serve alone and acknowledge writes that no standby holds; a failover, partition or pause can lose them (use --mode quorum with 3 or more nodes to rule that out)", zap.String("key", "mode.seed"))
	}
	opt.BaseDir, opt.Workdir = base, cfg.Workdir
	node, err := sm.NewNode(opt)
	if err != nil {
		return 1, err
	}
	// The listener may call the door before rn is built: it answers
	// "starting" until then.
	var rnp atomic.Pointer[runner.Runner]
	var flight clientFlight
	var mx *metrics.Metrics     // nil without --metrics-addr; set before Listen
	var tr *transport.Transport // set before the listener starts
	// The one door of client requests: authorised here, or refused with
	// a definite error (nothing was applied).
	door := func(ctx context.Context, c api.Caller, req *schema.ClientRequest) *schema.ClientReply {
		start := time.Now()
		rep := func() *schema.ClientReply {
			if c.Ignored != "" {
				log.Warn(fmt.Sprintf("ignored %s %q from %s: only a node's own certificate may forward a call; the call runs as that certificate",
					client.OnBehalfHeader, tlsconf.SanitizeCN(c.Ignored), c), zap.String("key", "authz.on-behalf-ignored"))
			}
			var d authz.Decision
			if c.Via != "" {
				d = policy.DecideOnBehalf(c.Via, c.CN, authz.ParseRole(c.Role), req)
			} else {
				d = policy.Decide(c.CN, req)
			}
			if !d.Allowed {
				log.Warn(d.Reason, zap.String("key", "authz.refused"))
				return &schema.ClientReply{Status: authz.StatusForbidden, Error: d.Reason}
			}
			flight.enter()
			defer flight.leave(req.GetUpgradeConfig() != nil)
			// Only a direct call reaches an upgrade (DecideOnBehalf refuses
			// admin operations), so its audit line's CN is the caller's own.
			return answer(ctx, req, tlsconf.SanitizeCN(c.CN), rnp.Load(), tr.TLS().Leaf, peers, self)
		}()
		if mx != nil { // refusals count too: errors by operation and code
			code := metrics.Code(rep.GetStatus())
			if rep.GetNotPrimary() {
				code = metrics.CodeRedirect
			}
			mx.ObserveRequestCode(metrics.Op(req), code, time.Since(start))
		}
		return rep
	}
	cpeers := client.PeersOf(peers)
	// A standby forwards a primary-only call with its own certificate,
	// waiting as long as the node itself does for an answer.
	fwd, err := client.New(cpeers, mat, client.Options{Timeout: requestTimeout})
	if err != nil {
		return 1, err
	}
	defer fwd.Close()
	_, apiHandler := api.Handler(api.Config{Door: door, Self: self, Peers: cpeers, Forward: fwd, Policy: policy})
	tr, err = transport.New(transport.Config{
		Self: self, Peers: tpeers, TLS: mat, DialTimeout: cfg.DialTimeout,
		HandshakesPerSource: cfg.HandshakesPerSource, NewConnsPerSecond: cfg.NewConnsPerSecond,
		Logf: func(format string, args ...any) {
			log.Debug(fmt.Sprintf(format, args...), zap.String("key", "transport"))
		},
		HTTP: apiHandler,
	})
	if err != nil {
		return 1, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rl := &reloader{cfg: cfg, tr: tr, level: level, log: log, now: time.Now}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
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
	// Bind before the node runs: a node that cannot be reached must not
	// stand for election (it would promote with no peer able to see it).
	if err := tr.Bind(ctx); err != nil {
		logging.Fatal(log, fmt.Sprintf("cannot listen on %s: %v — another process holds the port, or the address is not this machine's; not starting", peers[self].Addr(), err), zap.String("key", "fatal.listen"))
		_ = tr.Close()
		return 1, err
	}
	mx, mln, err := newMetrics(cfg.MetricsAddr, cfg.Pprof, &rnp, tr)
	if err != nil {
		_ = tr.Close()
		return 1, err
	}
	metricsDone := make(chan struct{})
	go func() {
		defer close(metricsDone)
		if mx == nil {
			return
		}
		if err := mx.Serve(ctx, mln); err != nil {
			log.Error(err.Error()+" — /metrics, /healthz and /readyz are gone; the node goes on", zap.String("key", "metrics.failed"))
		}
	}()
	listenErr := make(chan error, 1)
	go func() {
		err := tr.Listen(ctx)
		if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			logging.Fatal(log, "listener failed: "+err.Error()+" — stopping", zap.String("key", "fatal.listen"))
			cancel() // a node nobody can reach stops rather than serve deaf
		}
		listenErr <- err
	}()
	inbound := make(chan runner.Inbound, 1024)
	go func() {
		for m := range tr.Inbound() {
			select {
			case inbound <- runner.Inbound{From: m.From, Msg: m.Msg}:
			case <-ctx.Done():
				return
			}
		}
	}()
	files := &fileio.Executor{Base: base, WriteRate: int64(cfg.BulkWriteMiB) << 20, AroundLarge: gcHold,
		TrashError: func(path string, err error) {
			log.Warn(fmt.Sprintf("cannot delete %s (a removed file, kept in %s until the next removal): %v", path, fileio.TrashDir, err), zap.String("key", "files.trash"))
		}}
	afterStep := func(n *sm.Node, in sm.Input, took time.Duration) {
		gcSyncs.update(n.SnapshotSyncing())
		if mx != nil {
			mx.AfterStep(n, in, took)
		}
	}
	files.ObserveSync = slowSyncLogger(log, mx)
	rn := runner.New(runner.Config{Node: node, Files: files, Transport: tr, Inbound: inbound, Log: log, Seed: randomSeed(), AfterStep: afterStep})
	go func() {
		select {
		case <-rn.Ready():
			if ok, err := sdnotify.SdNotify(false, sdnotify.SdNotifyReady); err != nil {
				log.Warn("systemd notify READY=1 failed: "+err.Error(), zap.String("key", "systemd"))
			} else if ok {
				log.Info("systemd notified READY=1", zap.String("key", "systemd"))
			}
		case <-ctx.Done():
		}
	}()
	rnp.Store(rn)
	log.Info(fmt.Sprintf("xcecontroller %s (priority %d of %d) listening on %s, work dir %s", cfg.Name, self, len(peers), peers[self].Addr(), base), zap.String("key", "start"))
	if mln != nil {
		log.Info("metrics and health on http://"+mln.Addr().String()+" (/metrics, /healthz, /readyz)", zap.String("key", "metrics.listen"))
	}
	err = rn.Run(ctx)
	var ee *runner.ExitError
	if errors.As(err, &ee) && ee.Code == 0 {
		// A restart after OP_upgradeConfig: the admin's ACK was handed to
		// its waiter in the step that ended Run; let the transport write
		// it before the connections close (seed 002 §6.4 step 8).
		flight.drain(replyFlushBound)
	}
	_, _ = sdnotify.SdNotify(false, sdnotify.SdNotifyStopping)
	cancel()
	_ = tr.Close()
	lerr := <-listenErr
	<-metricsDone
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
func answer(ctx context.Context, req *schema.ClientRequest, caller string, rn *runner.Runner, own *x509.Certificate, peers []peerlist.Peer, self int) *schema.ClientReply {
	rep := &schema.ClientReply{}
	if rn == nil {
		rep.Status, rep.Error = int32(sm.StatusEAGAIN), "starting"
		return rep
	}
	switch op := req.GetOp().(type) {
	case *schema.ClientRequest_Status:
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
		if st.Role == sm.RolePrimary && req.GetStatus().GetQueues() {
			sr.Queues, sr.QueuesError = queueDepths(ctx, rn)
		}
		rep.Body = &schema.ClientReply_StatusReply{StatusReply: sr}
	case *schema.ClientRequest_Config:
		st := rn.Status()
		if len(st.Config) == 0 {
			rep.Status, rep.Error = int32(sm.StatusEAGAIN), "no config loaded yet"
			return rep
		}
		rep.Body = &schema.ClientReply_ConfigReply{ConfigReply: &schema.ConfigReply{Blob: st.Config, VersionTag: st.ConfigTag}}
	case *schema.ClientRequest_UpgradeConfig:
		return answerUpgrade(rep, op.UpgradeConfig, caller, rn)
	case *schema.ClientRequest_Job:
		// The caller's context: a client that goes away takes its long
		// poll with it (sm.ClientGone); a claim's wait extends the bound.
		jr := JobRequestFromProto(op.Job)
		ctx, cancel := context.WithTimeout(ctx, requestTimeout+jr.Wait)
		defer cancel()
		r, err := rn.Do(ctx, jr)
		if err != nil { // sent to the node, never answered: maybe applied
			rep.Status, rep.Error = sm.StatusOutcomeUnknown, err.Error()
			return rep
		}
		rep.Status, rep.Error, rep.NotPrimary = r.Status, r.Error, r.NotPrimary
		rep.Body = &schema.ClientReply_JobReply{JobReply: JobReplyToProto(jr.Kind, r)}
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
func answerUpgrade(rep *schema.ClientReply, req *schema.UpgradeConfigRequest, caller string, rn *runner.Runner) *schema.ClientReply {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	r, err := rn.Upgrade(ctx, req.GetBytes(), req.GetSha256(), caller)
	if err != nil { // sent to the node, never answered: maybe saved
		rep.Status, rep.Error = sm.StatusOutcomeUnknown, err.Error()
		return rep
	}
	rep.Body = &schema.ClientReply_UpgradeConfigReply{UpgradeConfigReply: &schema.UpgradeConfigReply{
		VersionTag: r.VersionTag, Error: r.Error, AckedCount: uint32(max(r.AckedCount, 0)), Primary: int32(r.Primary),
	}}
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
