// Package clitool is xcecli: operator and worker client of an xce cluster,
// and `xcecli dev`, the local 3-node cluster behind `make run`.
package clitool

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"xce/adapters/daemon"
	"xce/adapters/tlsconf"
	"xce/adapters/transport"
)

// NewCommand builds the xcecli command tree.
func NewCommand(ctx context.Context, stdout io.Writer) *cobra.Command {
	root := &cobra.Command{Use: "xcecli", Short: "xce cluster client", SilenceUsage: true, SilenceErrors: true}
	root.SetOut(stdout)
	root.AddCommand(append([]*cobra.Command{statusCmd(ctx), devCmd(ctx)}, extraCommands(ctx)...)...)
	return root
}

// conn holds the flags every cluster-talking command shares.
type conn struct {
	peers, cert, key, ca string
	timeout              time.Duration
}

func (c *conn) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.peers, "peers", os.Getenv("XCE_PEERS"), "the cluster's --peers string (or $XCE_PEERS)")
	f.StringVar(&c.cert, "cert", os.Getenv("XCE_CERT"), "client certificate signed by the cluster CA (or $XCE_CERT)")
	f.StringVar(&c.key, "key", os.Getenv("XCE_KEY"), "client key (or $XCE_KEY)")
	f.StringVar(&c.ca, "ca", os.Getenv("XCE_CA"), "cluster CA certificate (or $XCE_CA)")
	f.DurationVar(&c.timeout, "timeout", 2*time.Second, "per-node timeout")
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
}

// Statuses asks every peer for its status, in --peers order.
func Statuses(ctx context.Context, peersFlag string, mat *tlsconf.Material, timeout time.Duration) ([]PeerStatus, error) {
	peers, _, err := daemon.ParsePeers(peersFlag)
	if err != nil {
		return nil, err
	}
	out := make([]PeerStatus, len(peers))
	for i, p := range peers {
		out[i] = PeerStatus{Name: p.Name, Addr: p.Addr(), Priority: uint32(i)}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		cl, err := transport.DialClient(cctx, p.Addr(), mat, timeout)
		if err != nil {
			cancel()
			out[i].Error = err.Error()
			continue
		}
		st, err := cl.Status(cctx)
		_ = cl.Close()
		cancel()
		if err != nil {
			out[i].Error = err.Error()
			continue
		}
		out[i].Up = true
		out[i].Role, out[i].Term, out[i].Primary = st.GetRole(), st.GetTerm(), st.GetPrimaryName()
		out[i].ConfigTag, out[i].Generation = fmt.Sprintf("%016x", st.GetConfigTag()), st.GetConfigGeneration()
		out[i].Stale, out[i].Serving = st.GetConfigStale(), st.GetServing()
	}
	return out, nil
}

func statusCmd(ctx context.Context) *cobra.Command {
	var c conn
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "every peer: up/down, role, term, priority, config tag, stale flag",
		RunE: func(cmd *cobra.Command, _ []string) error {
			mat, err := tlsconf.Load(c.cert, c.key, c.ca)
			if err != nil {
				return err
			}
			rows, err := Statuses(ctx, c.peers, mat, c.timeout)
			if err != nil {
				return err
			}
			return printStatus(cmd.OutOrStdout(), rows, output)
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table|json")
	return cmd
}

func printStatus(w io.Writer, rows []PeerStatus, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case "table":
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tADDR\tUP\tROLE\tTERM\tPRIO\tPRIMARY\tCONFIG TAG\tGEN\tSTALE\tSERVING")
		for _, r := range rows {
			if !r.Up {
				fmt.Fprintf(tw, "%s\t%s\tdown\t-\t-\t%d\t-\t-\t-\t-\t-\n", r.Name, r.Addr, r.Priority)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\tup\t%s\t%d\t%d\t%s\t%s\t%d\t%v\t%v\n", r.Name, r.Addr, r.Role, r.Term, r.Priority, r.Primary, r.ConfigTag, r.Generation, r.Stale, r.Serving)
		}
		return tw.Flush()
	default:
		return fmt.Errorf("--output %q: want table or json", output)
	}
}
