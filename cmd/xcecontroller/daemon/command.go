package daemon

import (
	"context"
	"fmt"
	"github.com/xce-hpc/xce/buildinfo"
	"os"

	"github.com/spf13/cobra"

	"github.com/xce-hpc/xce/adapters/fileio"
	"github.com/xce-hpc/xce/adapters/transport"
)

// NewCommand is xcecontroller's command line; exit receives the node's
// exit code.
func NewCommand(ctx context.Context, exit func(int)) *cobra.Command {
	cfg := DefaultConfig()
	c := &cobra.Command{
		Use:           "xcecontroller --peers n0=host:port,... --name n0 --workdir /var/lib/xce --cert C --key K --ca CA",
		Short:         "one xce controller node",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		Version:       buildinfo.Read().String(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// --client-cn absent: any CA-signed client that is not a peer
			// is a worker; given (even empty): only the names listed.
			if !cmd.Flags().Changed("client-cn") {
				cfg.ClientCN = nil
			} else if cfg.ClientCN == nil {
				cfg.ClientCN = []string{}
			}
			exit(Run(ctx, cfg, os.Stderr))
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Peers, "peers", "", "every controller in priority order: name=host:port,... (identical on all nodes)")
	f.StringVar(&cfg.Name, "name", "", "this node's name in --peers")
	f.StringVar(&cfg.Workdir, "workdir", "/var/lib/xce", "work directory; the node uses ${workdir}/${name} (local file system only)")
	f.StringVar(&cfg.Cert, "cert", "", "node certificate (PEM), signed by the cluster CA")
	f.StringVar(&cfg.Key, "key", "", "node private key (PEM)")
	f.StringVar(&cfg.CA, "ca", "", "cluster CA certificate (PEM)")
	f.IntVar(&cfg.KeepN, "conf-keep-n", cfg.KeepN, "versioned config files kept in conf/")
	f.DurationVar(&cfg.StaleTimeout, "conf-stale-timeout", cfg.StaleTimeout, "flag a saved config older than this as stale (0 disables)")
	f.DurationVar(&cfg.ElectionTimeout, "election-timeout", cfg.ElectionTimeout, "election timeout")
	f.DurationVar(&cfg.PriorityStep, "election-priority-step", cfg.PriorityStep, "extra election delay per priority step")
	f.DurationVar(&cfg.Jitter, "election-jitter", cfg.Jitter, "maximum election jitter")
	f.DurationVar(&cfg.Heartbeat, "heartbeat-interval", cfg.Heartbeat, "primary heartbeat interval")
	f.DurationVar(&cfg.FailureTimeout, "failure-timeout", cfg.FailureTimeout, "standby: primary silent this long starts an election")
	f.DurationVar(&cfg.DialTimeout, "dial-timeout", cfg.DialTimeout, "peer connect timeout (probe_connect_timeout)")
	f.IntVar(&cfg.MaxWALRecords, "max-wal-records", cfg.MaxWALRecords, "checkpoint after this many WAL records (at least 100)")
	f.IntVar(&cfg.RetainWALRecords, "retain-wal-records", cfg.RetainWALRecords, "keep up to this many WAL records behind a checkpoint for standbys that have not acknowledged them, so they catch up from the log (0: none)")
	f.IntVar(&cfg.SyncStandbys, "sync-standbys", cfg.SyncStandbys, "a client reply waits for this many live standbys to hold its job record (0 = asynchronous replication)")
	f.StringVar(&cfg.Mode, "mode", "auto", "durability mode: quorum (promotion and every acknowledged write need a majority), seed (the seed's availability: a lone node serves and may acknowledge writes no standby holds — they can be lost), or auto (quorum, except seed for a 2-node cluster)")
	f.BoolVar(&cfg.WALRepair, "wal-repair", false, "truncate the WAL at a corruption instead of refusing to start (records after it are lost)")
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug|info|warn|error")
	f.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "console|json")
	// Metrics and health (adapters/metrics). Off by default: the endpoint
	// is plain HTTP without authentication and shows queue names and the
	// cluster's state, so an operator chooses where it listens.
	f.IntVar(&cfg.GCHeadroom, "gc-headroom", cfg.GCHeadroom, "collector policy: after each collection the heap may grow by this percent of the live heap (at least --gc-headroom-min-mib) before the next; 0: Go's default (100%); not applied when GOGC or GOMEMLIMIT is set")
	f.IntVar(&cfg.GCHeadroomMinMiB, "gc-headroom-min-mib", cfg.GCHeadroomMinMiB, "the least headroom of --gc-headroom, in MiB")
	f.IntVar(&cfg.BulkWriteMiB, "bulk-write-rate", cfg.BulkWriteMiB, "write checkpoints and snapshots received from the primary at most this many MiB/s, so WAL fsyncs on the same disk do not wait behind them; 0: as fast as the disk takes them")
	f.IntVar(&cfg.BackgroundNice, "background-nice", cfg.BackgroundNice, fmt.Sprintf("run checkpoints' encodes and reads, standby syncs' snapshots and received snapshots' reads and checks this many nice steps (0 to %d) below the node's CPU priority, so that on a busy machine requests get the CPU first; 0: at the node's priority", fileio.MaxNice))
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve Prometheus /metrics, /healthz and /readyz on plain HTTP at host:port (e.g. 127.0.0.1:9601); empty: off")
	f.IntVar(&cfg.HandshakesPerSource, "handshakes-per-source", transport.DefaultHandshakesPerSource, "connections one source address (other than a --peers host's) may have in their TLS handshake at once; more are closed before any TLS work")
	f.IntVar(&cfg.NewConnsPerSecond, "new-conns-per-source", transport.DefaultNewConnsPerSecond, "new connections a second one source address (other than a --peers host's) may open, in bursts of twice that; raise it for many clients behind one NAT address")
	f.BoolVar(&cfg.Pprof, "pprof", false, "also serve Go's profiles (CPU, heap, goroutines, execution trace) under /debug/pprof/ on --metrics-addr")

	// Authorisation (package authz; docs/operations.md, "Roles") and the
	// SIGHUP reload (reload.go).
	f.StringSliceVar(&cfg.AdminCN, "admin-cn", nil, "certificate CNs with the admin role (repeat or comma-separate): OP_upgradeConfig (xce-config push), redrive, sweep, tick, lost-and-found drain, and every worker operation; without it OP_upgradeConfig is refused")
	f.StringVar(&cfg.LogLevelFile, "log-level-file", "", "file holding the log level (debug|info|warn|error); read at start (it wins over --log-level) and again on SIGHUP, which also reloads --cert, --key and --ca")
	f.StringSliceVar(&cfg.ClientCN, "client-cn", nil, "certificate CNs with the worker role (repeat or comma-separate): status, config and the job operations; absent: any CA-signed certificate that is not a controller in --peers")
	for _, req := range []string{"peers", "name", "cert", "key", "ca"} {
		_ = c.MarkFlagRequired(req)
	}
	c.SetVersionTemplate(buildinfo.Template)
	return c
}
