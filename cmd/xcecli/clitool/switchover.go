package clitool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/internal/cliexit"
	"github.com/xce-hpc/xce/sm"
)

// ErrSwitchoverRefused: the primary (or the node asked) refused the
// switchover, or its handover did not complete; the primary role did not
// move to the target. The error text is the node's reason.
var ErrSwitchoverRefused = errors.New("switchover refused")

// SwitchoverResult is the answer of `xcecli switchover`.
type SwitchoverResult struct {
	Primary string        // the new primary's name in --peers
	Term    uint64        // the term it leads in
	Took    time.Duration // the call's wall time, as the admin waited for it
}

// Switchover asks cl's primary to hand its role to the member named to
// ("" = the primary's pick) and times the call. A name not in cl's peers
// is a usage error (nothing is sent); a node's refusal wraps
// ErrSwitchoverRefused; a lost answer is client.ErrOutcomeUnknown.
func Switchover(ctx context.Context, cl *client.Client, to string) (*SwitchoverResult, error) {
	if to != "" {
		var names []string
		for _, p := range cl.Peers() {
			names = append(names, p.Name)
		}
		if !slices.Contains(names, to) {
			return nil, cliexit.Usage(fmt.Errorf("--to %q: no such member (the members are %s)", to, strings.Join(names, ", ")))
		}
	}
	start := time.Now()
	rep, err := cl.Switchover(ctx, to)
	took := time.Since(start)
	var ne *client.NodeError
	switch {
	case errors.Is(err, client.ErrOutcomeUnknown):
		return nil, fmt.Errorf("switchover: %w (check who leads with xcecli status)", err)
	case errors.As(err, &ne):
		return nil, fmt.Errorf("%w: %w", ErrSwitchoverRefused, err)
	case err != nil:
		return nil, err
	}
	return &SwitchoverResult{Primary: rep.GetPrimary(), Term: rep.GetTerm(), Took: took}, nil
}

// PrintSwitchover writes the outcome line.
func PrintSwitchover(w io.Writer, r *SwitchoverResult) error {
	_, err := fmt.Fprintf(w, "switched over: %s is primary (term %d) after %v\n", r.Primary, r.Term, r.Took.Round(time.Millisecond))
	return err
}

func switchoverCmd(ctx context.Context) *cobra.Command {
	var c conn
	var to string
	cmd := &cobra.Command{
		Use:   "switchover [--to NODE]",
		Short: "admin: hand the primary role to a synced standby (a planned switchover), writes held meanwhile",
		Long: `switchover asks the primary to hand its role to the standby --to names (a
name in --peers), or without --to to the synced standby holding the most
of its log. The primary holds the writes that arrive meanwhile (they are
answered once the new primary leads, not refused), waits until the target
holds its whole log, and tells it to take over at once; the answer comes
once the target leads, with its term.

Refused, with the node's reason (exit status 1): the target is not a
joined, in-sync standby (failed_precondition), the cluster runs in seed
mode, the primary is recovering or busy with a config upgrade or another
switchover (aborted), or the handover did not complete within ` + sm.HandoverTimeout.String() + `:
the primary then takes writes again, or another node took over. Needs the
admin role in every node's --admin-cn.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			res, err := Switchover(ctx, cl, to)
			if err != nil {
				return err
			}
			return PrintSwitchover(cmd.OutOrStdout(), res)
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVar(&to, "to", "", "the standby to hand over to, by its name in --peers (default: the primary's pick)")
	return cmd
}
