package configtool

// xce-config push: OP_upgradeConfig (seed 002 §6) from the admin side.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/authz"
	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// DefaultPushTimeout bounds the wait for the primary's answer once the
// request is sent (it answers after its save and the push window, §6.3).
// Connecting to a node is bounded separately by --connect-timeout.
const DefaultPushTimeout = 10 * time.Second

var (
	// ErrPushNoPrimary: no peer took the upgrade (all down, not primary,
	// still starting, or OP_upgradeConfig disabled there). Nothing was
	// applied.
	ErrPushNoPrimary = errors.New("no primary accepted the config")
	// ErrPushUnknown: the request reached a node but no answer came back;
	// the upgrade may have been applied. It is not retried: a second
	// upgrade would increment the generation and restart the primary
	// again (§4.4).
	ErrPushUnknown = errors.New("upgrade outcome unknown")
)

// PushRefusedError is the primary's refusal of the config (invalid blob,
// an upgrade already in progress, a failed save, the caller's
// certificate, ...), with its code and text.
type PushRefusedError struct {
	Peer string
	Code connect.Code
	Msg  string
}

func (e *PushRefusedError) Error() string {
	return fmt.Sprintf("%s refused the config: %s (%s)", e.Peer, e.Msg, e.Code)
}

// Unwrap is authz.ErrForbidden for a refusal of the caller's certificate.
func (e *PushRefusedError) Unwrap() error {
	if e.Code == connect.CodePermissionDenied {
		return authz.ErrForbidden
	}
	return nil
}

// PushResult is the primary's ACK of an upgrade (§6.3 UpgradeConfigReply).
type PushResult struct {
	Peer       string // the primary that saved it; it restarts now
	VersionTag uint64 // the saved config's tag (its generation is rewritten, so not the blob's own tag)
	AckedCount int    // standbys that confirmed the push
	Standbys   int    // the other entries of --peers: the standbys there may be
}

// Push sends blob as OP_upgradeConfig to the primary of peersFlag;
// timeout bounds the wait for its answer (0 = DefaultPushTimeout). See
// PushTo.
func Push(ctx context.Context, peersFlag string, mat *tlsconf.Material, timeout time.Duration, blob []byte) (*PushResult, error) {
	if timeout <= 0 {
		timeout = DefaultPushTimeout
	}
	cl, err := client.NewFromFlag(peersFlag, mat, client.Options{Timeout: timeout})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return PushTo(ctx, cl, blob, false)
}

// PushTo sends blob as OP_upgradeConfig to cl's primary, found as every
// call is (package client: redirects followed, a node down or hung passed
// over after the connect timeout). A node that is down, still starting or
// not the primary is skipped: nothing was applied there. A refusal by the
// primary is a *PushRefusedError; a request that may have been applied
// without an answer wraps ErrPushUnknown and is not sent elsewhere; when
// no node took it, the error wraps ErrPushNoPrimary and lists every
// attempt. restart asks the primary to apply it by restarting at once,
// without first handing its role to a standby (UpgradeConfigRequest's
// restart).
func PushTo(ctx context.Context, cl *client.Client, blob []byte, restart bool) (*PushResult, error) {
	switch {
	case len(cl.Peers()) == 0:
		return nil, fmt.Errorf("%w: no peers", ErrPushNoPrimary)
	case len(blob) == 0:
		return nil, errors.New("empty config blob")
	case len(blob) > sm.MaxConfigSize:
		return nil, fmt.Errorf("config blob of %d bytes exceeds CONF_MAX_SIZE (%d)", len(blob), sm.MaxConfigSize)
	}
	sum := sha256.Sum256(blob)
	rep, err := cl.UpgradeConfig(ctx, &schema.UpgradeConfigRequest{Bytes: blob, Sha256: sum[:], Restart: restart})
	var unknown *client.OutcomeUnknownError
	var none *client.NoPrimaryError
	var ne *client.NodeError
	switch {
	case errors.As(err, &unknown):
		return nil, fmt.Errorf("%w: %s: %w — check `xcecli status` (config tag, generation) before pushing again", ErrPushUnknown, unknown.Node, unknown.Err)
	case errors.As(err, &none):
		return nil, fmt.Errorf("%w (%s)", ErrPushNoPrimary, none.List())
	case errors.As(err, &ne):
		return nil, &PushRefusedError{Peer: ne.Node, Code: ne.Code(), Msg: ne.Err.Message()}
	case err != nil:
		return nil, err
	}
	p, _ := cl.Primary()
	return &PushResult{Peer: cl.Peers()[p].Name, VersionTag: rep.GetVersionTag(), AckedCount: int(rep.GetAckedCount()),
		Standbys: len(cl.Peers()) - 1}, nil
}

// PrintPush writes the outcome line and, when no standby confirmed the
// push although --peers has some, the seed §6.3 WARNING.
func PrintPush(w io.Writer, r *PushResult) error {
	if _, err := fmt.Fprintf(w, "upgraded: tag=%016x, pushed to %d standbys; the primary restarts\n", r.VersionTag, r.AckedCount); err != nil {
		return err
	}
	if r.AckedCount == 0 && r.Standbys > 0 {
		_, err := fmt.Fprintf(w, "WARNING: ackedCount == 0: the config may not have reached any standby (%d in --peers). "+
			"If the primary does not come back after its restart, a standby promotes with the old config (seed 002 §6.3). "+
			"Offline standbys fetch the new config when they reconnect.\n", r.Standbys)
		return err
	}
	return nil
}

// checkBlob decodes and validates a blob before it is sent, for a clear
// local error instead of the primary's refusal.
func checkBlob(blob []byte) error {
	if len(blob) == 0 {
		return errors.New("empty config blob")
	}
	if len(blob) > sm.MaxConfigSize {
		return fmt.Errorf("config blob of %d bytes exceeds CONF_MAX_SIZE (%d)", len(blob), sm.MaxConfigSize)
	}
	c, err := schema.DecodeClusterConfig(blob)
	if err != nil {
		return err
	}
	return schema.Validate(c)
}

func pushCmd() *cobra.Command {
	var peersFlag, cert, key, ca, config, blobFile string
	var timeout, connectTimeout time.Duration
	var restart bool
	c := &cobra.Command{
		Use:   "push --peers P --cert C --key K --ca CA --config cluster.yaml [--restart]",
		Short: "OP_upgradeConfig: send a new config to the running primary, which saves it, pushes it to its standbys and restarts",
		Long: `push encodes cluster.yaml (or takes --blob), sends it with its SHA-256 to the
primary (found as xcecli finds it: the first peer, then every peer at once,
following "Not primary" redirects; a node down or hung is passed over after
--connect-timeout) and prints the primary's answer. The primary saves it with generation =
current + 1, pushes it to its standbys, answers, and restarts (exit 0) to
apply it. In quorum mode it first hands its role to a synced standby that
saved the new config (a planned switchover: writes are held for a moment,
not refused), so the cluster keeps a primary while it restarts; --restart
skips the handover: the primary restarts at once and a failover elects the
next one (writes are refused until then). The certificate's CN must be in
every node's --admin-cn.

Not idempotent: every accepted push increments the generation and restarts
the primary. When the outcome is unknown, check xcecli status before pushing
again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var blob []byte
			var err error
			if blobFile != "" {
				blob, err = os.ReadFile(blobFile)
				if err == nil {
					err = checkBlob(blob)
				}
			} else {
				blob, err = EncodeFile(config)
				if err == nil {
					err = checkBlob(blob)
				}
			}
			if err != nil {
				return err
			}
			mat, err := tlsconf.Load(cert, key, ca)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			cl, err := client.NewFromFlag(peersFlag, mat, client.Options{Timeout: timeout, ConnectTimeout: connectTimeout})
			if err != nil {
				return err
			}
			defer cl.Close()
			res, err := PushTo(ctx, cl, blob, restart)
			if err != nil {
				return err
			}
			return PrintPush(cmd.OutOrStdout(), res)
		},
	}
	f := c.Flags()
	f.StringVar(&peersFlag, "peers", os.Getenv("XCE_PEERS"), "the cluster's --peers string (or $XCE_PEERS)")
	f.StringVar(&cert, "cert", os.Getenv("XCE_CERT"), "client certificate signed by the cluster CA (or $XCE_CERT)")
	f.StringVar(&key, "key", os.Getenv("XCE_KEY"), "client key (or $XCE_KEY)")
	f.StringVar(&ca, "ca", os.Getenv("XCE_CA"), "cluster CA certificate (or $XCE_CA)")
	f.StringVar(&config, "config", "cluster.yaml", "YAML config to push")
	f.StringVar(&blobFile, "blob", "", "push an already encoded blob instead of --config")
	f.BoolVar(&restart, "restart", false, "apply by restarting the primary at once, with no switchover to a standby first")
	f.DurationVar(&timeout, "timeout", DefaultPushTimeout, "how long to wait for the primary's answer once the config is sent")
	f.DurationVar(&connectTimeout, "connect-timeout", client.DefaultConnectTimeout,
		"bound on the TCP connect and TLS handshake to each node; a node down or hung is passed over after it")
	return c
}
