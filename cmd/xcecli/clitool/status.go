// Package clitool is xcecli: operator and worker client of an xce cluster,
// and `xcecli dev`, the local 3-node cluster behind `make run`.
package clitool

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/xce-hpc/xce/buildinfo"
	"github.com/xce-hpc/xce/cmd/internal/cliexit"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
)

// NewCommand builds the xcecli command tree.
func NewCommand(ctx context.Context, stdout io.Writer) *cobra.Command {
	root := &cobra.Command{Use: "xcecli", Short: "xce cluster client", SilenceUsage: true, SilenceErrors: true, Version: buildinfo.Read().String()}
	root.SetVersionTemplate(buildinfo.Template)
	root.SetOut(stdout)
	root.AddCommand(append([]*cobra.Command{statusCmd(ctx), topCmd(ctx), devCmd(ctx)}, extraCommands(ctx)...)...)
	cliexit.Setup(root)
	return root
}

// conn holds the flags every cluster-talking command shares.
type conn struct {
	peers, cert, key, ca string
	timeout              time.Duration
	connectTimeout       time.Duration
}

// material loads the certificate these flags name. A flag left empty is
// a usage error naming it (tlsconf would only say it cannot open "").
func (c *conn) material() (*tlsconf.Material, error) {
	for _, f := range []struct{ name, val, env string }{{"peers", c.peers, "XCE_PEERS"}, {"cert", c.cert, "XCE_CERT"}, {"key", c.key, "XCE_KEY"}, {"ca", c.ca, "XCE_CA"}} {
		if f.val == "" {
			return nil, cliexit.Usage(fmt.Errorf("--%s is required (or set $%s)", f.name, f.env))
		}
	}
	return tlsconf.Load(c.cert, c.key, c.ca)
}

// client is the API client of these flags.
func (c *conn) client() (*client.Client, error) {
	mat, err := c.material()
	if err != nil {
		return nil, err
	}
	return client.NewFromFlag(c.peers, mat, client.Options{Timeout: c.timeout, ConnectTimeout: c.connectTimeout})
}

func (c *conn) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.peers, "peers", os.Getenv("XCE_PEERS"), "the cluster's --peers string (or $XCE_PEERS)")
	f.StringVar(&c.cert, "cert", os.Getenv("XCE_CERT"), "client certificate signed by the cluster CA (or $XCE_CERT)")
	f.StringVar(&c.key, "key", os.Getenv("XCE_KEY"), "client key (or $XCE_KEY)")
	f.StringVar(&c.ca, "ca", os.Getenv("XCE_CA"), "cluster CA certificate (or $XCE_CA)")
	f.DurationVar(&c.timeout, "timeout", 2*time.Second, "how long to wait for a node's answer once the request is sent")
	f.DurationVar(&c.connectTimeout, "connect-timeout", client.DefaultConnectTimeout,
		"bound on the TCP connect and TLS handshake to each node; a node down or hung is passed over after it")
}

// PeerStatus is one row of `xcecli status`.
type PeerStatus struct {
	Name       string `json:"name"`
	Addr       string `json:"addr"`
	Up         bool   `json:"up"`
	Error      string `json:"error,omitempty"`
	Role       string `json:"role,omitempty"`
	Term       uint64 `json:"term"`
	Priority   uint32 `json:"priority"`
	Primary    string `json:"primary,omitempty"`
	ConfigTag  string `json:"config_tag,omitempty"`
	Generation uint64 `json:"config_generation"`
	Stale      bool   `json:"config_stale"`
	Serving    bool   `json:"serving"`
	// Replication: the durability mode; in seed mode the writes this
	// process acknowledged that no standby held (degraded once any);
	// on the primary, its log positions and each standby's state.
	Mode                string         `json:"mode,omitempty"`
	Degraded            bool           `json:"degraded"`
	AckedWithoutStandby uint64         `json:"acked_without_standby"`
	DurableLSN          uint64         `json:"durable_lsn,omitempty"`
	CommitLSN           uint64         `json:"commit_lsn,omitempty"`
	Standbys            []StandbyState `json:"standbys,omitempty"`
	// PeersMismatch: peers running with another --peers list (ignored).
	PeersMismatch []string `json:"peers_mismatch,omitempty"`
	// CertNotAfter is when the node's own certificate expires (as the node
	// reports it, or as its handshake showed it when it has expired);
	// CertExpired: it has, so no peer or client can connect to the node.
	CertNotAfter *time.Time `json:"cert_not_after,omitempty"`
	CertExpired  bool       `json:"cert_expired"`
	// Queues: a recovered primary's jobs per queue and state (what
	// `xcecli top` shows); QueuesError: why a primary sent none.
	Queues      []QueueDepth `json:"queues,omitempty"`
	QueuesError string       `json:"queues_error,omitempty"`
}

// certNote is the line `status` prints under the table about row's own
// certificate: expired, or expiring within tlsconf.CertWarnDays of now.
func (r PeerStatus) certNote(now time.Time) string {
	if r.CertNotAfter == nil {
		return ""
	}
	when := r.CertNotAfter.UTC().Format(time.RFC3339)
	switch left := r.CertNotAfter.Sub(now); {
	case r.CertExpired || left <= 0:
		return fmt.Sprintf("%s: its certificate EXPIRED at %s: no peer or client can complete a handshake with it — renew it and send the node SIGHUP", r.Name, when)
	case left < tlsconf.CertWarnDays*24*time.Hour:
		return fmt.Sprintf("%s: its certificate expires in %d days (%s) — renew it and send the node SIGHUP", r.Name, int(left/(24*time.Hour)), when)
	}
	return ""
}

// StandbyState is the primary's view of one standby's replication.
type StandbyState struct {
	Name   string `json:"name"`
	State  string `json:"state"` // not joined, syncing, in sync, lagging, silent
	Acked  uint64 `json:"acked_lsn"`
	Behind uint64 `json:"behind"`
}

// replText is the REPLICATION column: each standby's state on a primary,
// "degraded" on a seed-mode node that acknowledged writes alone.
func (r PeerStatus) replText() string {
	var parts []string
	if r.Degraded {
		parts = append(parts, fmt.Sprintf("degraded (%d acked without a standby)", r.AckedWithoutStandby))
	}
	ignored := make(map[string]bool, len(r.PeersMismatch))
	for _, p := range r.PeersMismatch {
		parts = append(parts, p+": other --peers, ignored")
		ignored[p] = true
	}
	for _, s := range r.Standbys {
		switch {
		case ignored[s.Name]:
			// Its --peers list differs: the primary ignores it, and says
			// so once (it also keeps a standby's state for it, "not
			// joined", which would name it twice).
		case s.State == "lagging":
			parts = append(parts, fmt.Sprintf("%s: lagging by %d", s.Name, s.Behind))
		default:
			parts = append(parts, s.Name+": "+s.State)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// Statuses asks every peer for its status, all at once so that a hung
// node costs timeout once rather than once per row; the rows are in
// --peers order. timeout bounds each node's connection and answer.
func Statuses(ctx context.Context, peersFlag string, mat *tlsconf.Material, timeout time.Duration) ([]PeerStatus, error) {
	return statuses(ctx, peersFlag, mat, timeout, timeout)
}

// statuses is Statuses with the connect and TLS handshake bounded by
// connectTimeout too (xcecli status --connect-timeout).
func statuses(ctx context.Context, peersFlag string, mat *tlsconf.Material, timeout, connectTimeout time.Duration) ([]PeerStatus, error) {
	if connectTimeout <= 0 || connectTimeout > timeout && timeout > 0 {
		connectTimeout = timeout
	}
	cl, err := client.NewFromFlag(peersFlag, mat, client.Options{Timeout: timeout, ConnectTimeout: connectTimeout})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	peers := cl.Peers()
	out := make([]PeerStatus, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		out[i] = PeerStatus{Name: p.Name, Addr: p.Addr, Priority: uint32(i)}
		wg.Go(func() { askStatus(ctx, cl, i, &out[i]) })
	}
	wg.Wait()
	return out, nil
}

// askStatus fills row from node i's status reply, or its error.
func askStatus(ctx context.Context, cl *client.Client, i int, row *PeerStatus) {
	st, err := cl.ClusterStatus(ctx, i)
	if err != nil {
		row.Error = err.Error()
		var cie x509.CertificateInvalidError
		if errors.As(err, &cie) && cie.Reason == x509.Expired && cie.Cert != nil {
			t := cie.Cert.NotAfter
			row.CertNotAfter, row.CertExpired = &t, true
		}
		return
	}
	row.Up = true
	row.Role, row.Term, row.Primary = st.GetRole(), st.GetTerm(), st.GetPrimaryName()
	row.ConfigTag, row.Generation = fmt.Sprintf("%016x", st.GetConfigTag()), st.GetConfigGeneration()
	row.Stale, row.Serving = st.GetConfigStale(), st.GetServing()
	row.Mode, row.Degraded, row.AckedWithoutStandby = st.GetMode(), st.GetDegraded(), st.GetAckedWithoutStandby()
	row.DurableLSN, row.CommitLSN = st.GetDurableLsn(), st.GetCommitLsn()
	row.PeersMismatch = st.GetPeersMismatch()
	if s := st.GetCertNotAfter(); s != 0 {
		t := time.Unix(s, 0)
		row.CertNotAfter, row.CertExpired = &t, time.Now().After(t)
	}
	row.QueuesError = st.GetQueuesError()
	for _, q := range st.GetQueues() {
		row.Queues = append(row.Queues, QueueDepth{Queue: q.GetQueue(), Pending: q.GetPending(), Processing: q.GetProcessing(), Dead: q.GetDead()})
	}
	for _, s := range st.GetStandbys() {
		row.Standbys = append(row.Standbys, StandbyState{Name: s.GetName(), State: s.GetState(), Acked: s.GetAckedLsn(), Behind: s.GetBehind()})
	}
}

// ErrNoPrimary: no peer answered `status` as the primary (all down, an
// election under way, or no quorum); xcecli exits 1.
var ErrNoPrimary = errors.New("no node answered as primary")

// primaryAnswered is nil when one row is an up primary, else ErrNoPrimary
// naming how many peers answered at all.
func primaryAnswered(rows []PeerStatus) error {
	up := 0
	for _, r := range rows {
		if r.Up {
			up++
			if r.Role == "primary" {
				return nil
			}
		}
	}
	return fmt.Errorf("%w (%d of %d peers answered)", ErrNoPrimary, up, len(rows))
}

// defaultWatch is the interval of a bare --watch.
const defaultWatch = 2 * time.Second

func statusCmd(ctx context.Context) *cobra.Command {
	var c conn
	var output string
	var watch time.Duration
	var count int
	cmd := &cobra.Command{
		Use:   "status [--watch [INTERVAL]]",
		Short: "every peer: up/down, role, term, priority, config tag, stale flag",
		Long: "every peer: up/down, role, term, priority, config tag, stale flag.\n" +
			"Without --watch it exits 1 when no peer answers as the primary (the\n" +
			"view is printed first), 0 when one does.\n" +
			"With --watch, the view refreshes every interval until interrupted (on a\n" +
			"terminal a table redrawn in place, elsewhere one table after another, each\n" +
			"under a ---- line; with -o json, one JSON array per line per refresh).\n" +
			"--watch alone refreshes every " + defaultWatch.String() + "; --watch 1s (or --watch=1s) every second.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			interval, err := watchInterval(cmd.Flags().Changed("watch"), watch, args)
			if err != nil {
				return cliexit.Usage(err)
			}
			if count < 0 {
				return cliexit.Usage(fmt.Errorf("--count %d: must not be negative", count))
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			mat, err := c.material()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if interval == 0 {
				rows, err := statuses(ctx, c.peers, mat, c.timeout, c.connectTimeout)
				if err != nil {
					return err
				}
				if err := printStatus(w, rows, output); err != nil {
					return err
				}
				// A script's health check: the table is printed either way,
				// the exit status says whether a primary answered.
				return primaryAnswered(rows)
			}
			return refresh(ctx, interval, count, func(at time.Time) error {
				rows, err := statuses(ctx, c.peers, mat, c.timeout, c.connectTimeout)
				if err != nil {
					return err
				}
				return printWatched(w, rows, output, at)
			})
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table|json")
	cmd.Flags().DurationVarP(&watch, "watch", "w", 0, "refresh every interval until interrupted: --watch alone every "+defaultWatch.String()+", --watch 1s every second")
	// A bare --watch takes the default; pflag then leaves a following
	// "1s" as an argument, which watchInterval reads as the interval, so
	// the space form of a duration flag keeps working.
	cmd.Flags().Lookup("watch").NoOptDefVal = defaultWatch.String()
	cmd.Flags().IntVar(&count, "count", 0, "with --watch: stop after this many refreshes (0: never)")
	return cmd
}

// watchInterval is the refresh interval of `status` (0: print once) from
// whether --watch was given, its value (defaultWatch when bare) and the
// command's arguments: at most one, the interval of a bare --watch
// ("--watch 1s").
func watchInterval(given bool, watch time.Duration, args []string) (time.Duration, error) {
	if len(args) > 0 {
		a := args[0]
		if !given {
			return 0, fmt.Errorf("unexpected argument %q: status takes none (an interval goes after --watch, e.g. --watch %s)", a, a)
		}
		d, err := time.ParseDuration(a)
		if err != nil {
			return 0, fmt.Errorf("argument %q: not an interval for --watch (want e.g. --watch 1s)", a)
		}
		if watch != defaultWatch {
			return 0, fmt.Errorf("--watch=%v and the argument %q: two intervals, give one", watch, a)
		}
		watch = d
	}
	if !given {
		return 0, nil
	}
	if watch <= 0 {
		return 0, fmt.Errorf("--watch %v: the interval must be positive", watch)
	}
	return watch, nil
}

// printWatched prints one refresh of a watched status: the table under a
// clear and a timestamp, or the rows as one JSON line.
func printWatched(w io.Writer, rows []PeerStatus, output string, at time.Time) error {
	switch output {
	case "json":
		return json.NewEncoder(w).Encode(rows) // one line per refresh
	case "table":
		if err := frameTitle(w, "xcecli status", at); err != nil {
			return err
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	return printStatus(w, rows, output)
}

func printStatus(w io.Writer, rows []PeerStatus, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case "table":
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tADDR\tUP\tROLE\tTERM\tPRIO\tPRIMARY\tCONFIG TAG\tGEN\tSTALE\tSERVING\tMODE\tREPLICATION")
		for _, r := range rows {
			if !r.Up {
				fmt.Fprintf(tw, "%s\t%s\tdown\t-\t-\t%d\t-\t-\t-\t-\t-\t-\t-\n", r.Name, r.Addr, r.Priority)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\tup\t%s\t%d\t%d\t%s\t%s\t%d\t%v\t%v\t%s\t%s\n", r.Name, r.Addr, r.Role, r.Term, r.Priority, r.Primary, r.ConfigTag, r.Generation, r.Stale, r.Serving, orDash(r.Mode), r.replText())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		now := time.Now()
		for _, r := range rows {
			if note := r.certNote(now); note != "" {
				if _, err := fmt.Fprintln(w, note); err != nil {
					return err
				}
			}
		}
		return nil
	default:
		return cliexit.Usage(fmt.Errorf("--output %q: want table or json", output))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
