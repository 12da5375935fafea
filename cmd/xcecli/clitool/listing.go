package clitool

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
)

// recoveryMark flags the synthetic lost_and_found rows in tables.
const recoveryMark = "(recovery)"

// QueueRow is one row of `queue list`.
type QueueRow struct {
	ID                   uint32 `json:"id"`
	Name                 string `json:"name"`
	VisibilityTimeoutS   uint32 `json:"visibility_timeout_s"`
	MaxAttempts          uint32 `json:"max_attempts"`
	BackoffBaseS         uint32 `json:"backoff_base_s"`
	DeadLetterRetentionS uint32 `json:"dead_letter_retention_s"`
	Priority             int32  `json:"priority"`
	// Recovery marks the synthetic lost_and_found queue every controller
	// creates at startup (seed 002 §6.5): not in the config, it holds jobs
	// of removed queues and refuses submissions. Its settings do not apply
	// (each routed job keeps its own stamps).
	Recovery bool `json:"recovery,omitempty"`
}

// HostRow is one row of `host list`.
type HostRow struct {
	Name        string   `json:"name"`
	Address     string   `json:"address,omitempty"`
	ResourceIDs []uint32 `json:"resource_ids,omitempty"`
	Resources   []string `json:"resources,omitempty"` // names of ResourceIDs ("" if not in the config)
	// Recovery marks the synthetic lost_and_found host (seed 002 §6.5).
	Recovery bool `json:"recovery,omitempty"`
}

// QueueRows lists the config's queues, then the synthetic lost_and_found.
func QueueRows(c *schema.ClusterConfig) []QueueRow {
	var rows []QueueRow
	for _, q := range c.GetQueues() {
		rows = append(rows, QueueRow{ID: q.GetId(), Name: q.GetName(), VisibilityTimeoutS: q.GetVisibilityTimeoutS(),
			MaxAttempts: q.GetMaxAttempts(), BackoffBaseS: q.GetBackoffBaseS(), DeadLetterRetentionS: q.GetDeadLetterRetentionS(),
			Priority: q.GetPriority()})
	}
	return append(rows, QueueRow{Name: schema.ReservedName, Recovery: true})
}

// HostRows lists the config's hosts, then the synthetic lost_and_found.
func HostRows(c *schema.ClusterConfig) []HostRow {
	names := map[uint32]string{}
	for _, r := range c.GetResources() {
		names[r.GetId()] = r.GetName()
	}
	var rows []HostRow
	for _, h := range c.GetHosts() {
		row := HostRow{Name: h.GetName(), Address: h.GetAddress(), ResourceIDs: h.GetResourceIds()}
		for _, id := range h.GetResourceIds() {
			row.Resources = append(row.Resources, names[id])
		}
		rows = append(rows, row)
	}
	return append(rows, HostRow{Name: schema.ReservedName, Recovery: true})
}

// PrintQueues renders `queue list`.
func PrintQueues(w io.Writer, rows []QueueRow, output string) error {
	if output == "json" {
		return writeJSON(w, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tVISIBILITY\tMAX_ATTEMPTS\tBACKOFF\tRETENTION\tPRIORITY")
	for _, r := range rows {
		if r.Recovery {
			fmt.Fprintf(tw, "-\t%s\t-\t-\t-\t-\t-\t%s\n", r.Name, recoveryMark)
			continue
		}
		retention := fmtSecs(r.DeadLetterRetentionS)
		if r.DeadLetterRetentionS == 0 {
			retention = "forever"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%d\n", r.ID, cell(r.Name), fmtSecs(r.VisibilityTimeoutS), r.MaxAttempts,
			fmtSecs(r.BackoffBaseS), retention, r.Priority)
	}
	return tw.Flush()
}

// PrintHosts renders `host list`.
func PrintHosts(w io.Writer, rows []HostRow, output string) error {
	if output == "json" {
		return writeJSON(w, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDRESS\tRESOURCES")
	for _, r := range rows {
		if r.Recovery {
			fmt.Fprintf(tw, "%s\t-\t-\t%s\n", r.Name, recoveryMark)
			continue
		}
		res := make([]string, len(r.ResourceIDs))
		for i, id := range r.ResourceIDs {
			if r.Resources[i] != "" {
				res[i] = fmt.Sprintf("%s(%d)", r.Resources[i], id)
			} else {
				res[i] = fmt.Sprint(id)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", cell(r.Name), cell(r.Address), cell(strings.Join(res, ",")))
	}
	return tw.Flush()
}

// listCmd is `queue list` or `host list`: the running config's queues or
// hosts, from the first node that answers.
func listCmd(ctx context.Context, what string, print func(context.Context, *client.Client, io.Writer, string) error) *cobra.Command {
	var c conn
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "the " + what + " of the running config (from the first peer that answers), lost_and_found included",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			return print(ctx, cl, cmd.OutOrStdout(), output)
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table|json")
	return cmd
}

func queueCmd(ctx context.Context) *cobra.Command {
	cmd := &cobra.Command{Use: "queue", Short: "queues of the running config"}
	cmd.AddCommand(listCmd(ctx, "queues", func(ctx context.Context, cl *client.Client, w io.Writer, o string) error {
		rep, err := cl.ListQueues(ctx, &schema.ListQueuesRequest{})
		if err != nil {
			return err
		}
		return PrintQueues(w, QueueRows(&schema.ClusterConfig{Queues: rep.GetQueues()}), o)
	}))
	return cmd
}

func hostCmd(ctx context.Context) *cobra.Command {
	cmd := &cobra.Command{Use: "host", Short: "worker hosts of the running config"}
	cmd.AddCommand(listCmd(ctx, "hosts", func(ctx context.Context, cl *client.Client, w io.Writer, o string) error {
		rep, err := cl.ListHosts(ctx, &schema.ListHostsRequest{})
		if err != nil {
			return err
		}
		return PrintHosts(w, HostRows(&schema.ClusterConfig{Hosts: rep.GetHosts(), Resources: rep.GetResources()}), o)
	}))
	return cmd
}
