package configtool

// xce-config push: OP_upgradeConfig (seed 002 §6) from the admin side.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"xce/adapters/daemon"
	"xce/adapters/tlsconf"
	"xce/adapters/transport"
	"xce/adapters/wire"
	"xce/schema"
	"xce/sm"
)

// DefaultPushTimeout bounds the connection to one node and its answer
// (the primary answers after its save and the push window, §6.3).
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
// an upgrade already in progress, a failed save, ...), with its text.
type PushRefusedError struct {
	Peer   string
	Status int32
	Msg    string
}

func (e *PushRefusedError) Error() string {
	return fmt.Sprintf("%s refused the config: %s (status %d)", e.Peer, e.Msg, e.Status)
}

// PushResult is the primary's ACK of an upgrade (§6.3 UpgradeConfigReply).
type PushResult struct {
	Peer       string // the primary that saved it; it restarts now
	VersionTag uint64 // the saved config's tag (its generation is rewritten, so not the blob's own tag)
	AckedCount int    // standbys that confirmed the push
	Standbys   int    // the other entries of --peers: the standbys there may be
	Attempts   []string
}

// Push sends blob as OP_upgradeConfig to the primary: the peers in
// --peers order, following a "Not primary — redirect to primary" reply's
// primary index once (§10.12). A peer that is down, still starting, or
// has OP_upgradeConfig disabled is skipped: nothing was applied there.
// A refusal by the primary is a *PushRefusedError; a request that may
// have been applied without an answer wraps ErrPushUnknown and is not
// sent elsewhere; when no peer took it, the error wraps ErrPushNoPrimary
// and lists every attempt.
func Push(ctx context.Context, peers []daemon.Peer, mat *tlsconf.Material, timeout time.Duration, blob []byte) (*PushResult, error) {
	switch {
	case len(peers) == 0:
		return nil, fmt.Errorf("%w: no peers", ErrPushNoPrimary)
	case len(blob) == 0:
		return nil, errors.New("empty config blob")
	case len(blob) > sm.MaxConfigSize:
		return nil, fmt.Errorf("config blob of %d bytes exceeds CONF_MAX_SIZE (%d)", len(blob), sm.MaxConfigSize)
	}
	if timeout <= 0 {
		timeout = DefaultPushTimeout
	}
	sum := sha256.Sum256(blob)
	var attempts []string
	tried := make([]bool, len(peers))
	// try returns the result or a final error, else the redirect target
	// (-1 for none) after recording the attempt.
	try := func(i int) (*PushResult, int, error) {
		tried[i] = true
		p := peers[i]
		note := func(s string) { attempts = append(attempts, p.Name+": "+s) }
		req := &schema.ClientRequest{Op: &schema.ClientRequest_UpgradeConfig{UpgradeConfig: &schema.UpgradeConfigRequest{Bytes: blob, Sha256: sum[:]}}}
		rep, sent, err := pushCall(ctx, p.Addr(), mat, timeout, req)
		if err != nil {
			note(err.Error())
			if sent && !handshakeRefused(err) {
				return nil, -1, fmt.Errorf("%w: %s: %v — check `xcecli status` (config tag, generation) before pushing again", ErrPushUnknown, p.Name, err)
			}
			return nil, -1, nil
		}
		up := rep.GetUpgradeConfigReply()
		switch st := rep.GetStatus(); {
		case st == sm.StatusOK:
			if up == nil || up.GetVersionTag() == 0 {
				return nil, -1, fmt.Errorf("%s: accepted without a version tag", p.Name)
			}
			return &PushResult{Peer: p.Name, VersionTag: up.GetVersionTag(), AckedCount: int(up.GetAckedCount()),
				Standbys: len(peers) - 1, Attempts: attempts}, -1, nil
		case st == sm.StatusOutcomeUnknown:
			note(rep.GetError())
			return nil, -1, fmt.Errorf("%w: %s: %s — check `xcecli status` (config tag, generation) before pushing again", ErrPushUnknown, p.Name, rep.GetError())
		case st == sm.StatusEAGAIN && strings.HasPrefix(rep.GetError(), "Not primary"):
			prim := -1
			if up != nil {
				prim = int(up.GetPrimary())
			}
			msg := rep.GetError()
			if prim >= 0 && prim < len(peers) {
				msg += " (primary " + peers[prim].Name + ")"
			}
			note(msg)
			return nil, prim, nil
		case st == sm.StatusEAGAIN, st == wire.StatusUnsupported, up != nil && strings.HasPrefix(up.GetError(), "OP_upgradeConfig is disabled"):
			// Starting, recovering, an op this node does not know, or a
			// node without --enable-upgrade-config: nothing applied here.
			note(rep.GetError())
			return nil, -1, nil
		default:
			note(rep.GetError())
			return nil, -1, &PushRefusedError{Peer: p.Name, Status: st, Msg: rep.GetError()}
		}
	}
	followed := false
	for i := range peers {
		if tried[i] {
			continue
		}
		res, prim, err := try(i)
		if res != nil || err != nil {
			return res, err
		}
		if prim >= 0 && prim < len(peers) && !followed && !tried[prim] {
			followed = true
			if res, _, err := try(prim); res != nil || err != nil {
				return res, err
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w (%s)", ErrPushNoPrimary, strings.Join(attempts, "; "))
}

// pushCall makes one connection, one request; sent is false when the
// connection could not be made.
func pushCall(ctx context.Context, addr string, mat *tlsconf.Material, timeout time.Duration, req *schema.ClientRequest) (*schema.ClientReply, bool, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := transport.DialClient(cctx, addr, mat, timeout)
	if err != nil {
		return nil, false, err
	}
	defer cl.Close()
	rep, err := cl.Call(cctx, req)
	return rep, !errors.Is(err, transport.ErrNotSent), err
}

// handshakeRefused: the server answered with a TLS alert (TLS 1.3 reports
// a refused client certificate only on the first read), so it never read
// the request.
func handshakeRefused(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
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
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "push --peers P --cert C --key K --ca CA --config cluster.yaml",
		Short: "OP_upgradeConfig: send a new config to the running primary, which saves it, pushes it to its standbys and restarts",
		Long: `push encodes cluster.yaml (or takes --blob), sends it with its SHA-256 to the
primary (the peers in --peers order, following a "Not primary" redirect once)
and prints the primary's answer. The primary saves it with generation =
current + 1, pushes it to its standbys, answers, and restarts (exit 0) to
apply it. Every node needs --enable-upgrade-config.

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
			peers, _, err := daemon.ParsePeers(peersFlag)
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
			res, err := Push(ctx, peers, mat, timeout, blob)
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
	f.DurationVar(&timeout, "timeout", DefaultPushTimeout, "per-node connect and answer timeout")
	return c
}
