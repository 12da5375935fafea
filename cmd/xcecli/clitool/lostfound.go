package clitool

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/cmd/internal/cliexit"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// BuildDrain is the DrainLostAndFoundRequest of `lost-and-found
// drain`: move every sidelined job to toQueue (and re-pin the ones pinned
// to the lost_and_found host to toHost, "" = any host), or cancel them.
func BuildDrain(toQueue, toHost string, cancel bool) (*schema.DrainLostAndFoundRequest, error) {
	switch {
	case cancel && (toQueue != "" || toHost != ""):
		return nil, errors.New("give --cancel, or --to-queue (and --to-host), not both")
	case !cancel && toQueue == "":
		return nil, errors.New("--to-queue is required (or --cancel to delete the jobs)")
	}
	return &schema.DrainLostAndFoundRequest{Queue: toQueue, Host: toHost, Cancel: cancel}, nil
}

// DrainView is the JSON answer of `lost-and-found drain`.
type DrainView struct {
	Drained   uint32 `json:"drained"`
	Cancelled bool   `json:"cancelled"`
	Queue     string `json:"queue,omitempty"`
	Host      string `json:"host,omitempty"`
}

func showDrain(w io.Writer, output string, req proto.Message, res *schema.JobResponse) error {
	d, _ := req.(*schema.DrainLostAndFoundRequest) // nil for another: its getters answer zero
	v := DrainView{Drained: res.GetMoved(), Cancelled: d.GetCancel(), Queue: d.GetQueue(), Host: d.GetHost()}
	if output == "json" {
		return writeJSON(w, v)
	}
	var err error
	switch {
	case v.Cancelled:
		_, err = fmt.Fprintf(w, "cancelled %d sidelined job(s)\n", v.Drained)
	case v.Host != "":
		_, err = fmt.Fprintf(w, "moved %d sidelined job(s) to queue %s, pinned ones to host %s\n", v.Drained, v.Queue, v.Host)
	default:
		_, err = fmt.Fprintf(w, "moved %d sidelined job(s) to queue %s, pinned ones unpinned\n", v.Drained, v.Queue)
	}
	return err
}

func lostAndFoundCmd(ctx context.Context) *cobra.Command {
	e := &jobEnv{}
	root := &cobra.Command{
		Use:   "lost-and-found",
		Short: "the jobs recovery sidelined in " + sm.LostAndFound + " after a config change (list them with: job list --queue " + sm.LostAndFound + ")",
	}
	e.persistent(root)
	var toQueue, toHost string
	var cancel bool
	drain := &cobra.Command{
		Use:   "drain (--to-queue Q [--to-host H] | --cancel)",
		Short: "admin: move every sidelined job to a queue (and host), or cancel them, as one logged record; lost_and_found_job_count becomes 0",
		Long: `drain handles every job sidelined in ` + sm.LostAndFound + `: the jobs of its queue (a queue the
config no longer has) and the jobs pinned to its host (a host the config no
longer has), whatever their state.

--to-queue Q moves the jobs of the queue to Q; --to-host H pins the pinned
ones to H (without it they are unpinned: any host may claim them). Nothing
else of a job changes: a claimed job keeps its claimant, whose handle stays
valid, and a dead one stays dead (redrive it). --cancel deletes them all
instead (a claimant's later ack is refused). Needs the admin role.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := BuildDrain(toQueue, toHost, cancel)
			if err != nil {
				return cliexit.Usage(err)
			}
			return e.run(ctx, cmd, req, showDrain)
		},
	}
	f := drain.Flags()
	f.StringVar(&toQueue, "to-queue", "", "queue the jobs of "+sm.LostAndFound+" move to")
	f.StringVar(&toHost, "to-host", "", "host the jobs pinned to "+sm.LostAndFound+" are pinned to (default: unpinned)")
	f.BoolVar(&cancel, "cancel", false, "delete every sidelined job instead")
	root.AddCommand(drain)
	return root
}
