package clitool

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/xce-hpc/xce/cmd/internal/cliexit"
)

// QueueDepth is one queue of `xcecli top`: its jobs by state.
type QueueDepth struct {
	Queue      string `json:"queue"`
	Pending    uint64 `json:"pending"`
	Processing uint64 `json:"processing"`
	Dead       uint64 `json:"dead"`
	// Change: each count's change since the previous refresh; absent on
	// the first refresh and after the primary changed.
	Change *QueueChange `json:"change,omitempty"`
}

// QueueChange is how a queue's counts moved between two refreshes. A
// count is a balance (pending grows by submits and retries and shrinks by
// claims and cancels), so these are net flows, not completions.
type QueueChange struct {
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Dead       int64 `json:"dead"`
}

// TopView is one refresh of `xcecli top`, from the primary's status.
type TopView struct {
	At         time.Time `json:"at"`
	Primary    string    `json:"primary,omitempty"`
	Term       uint64    `json:"term,omitempty"`
	Mode       string    `json:"mode,omitempty"`
	DurableLSN uint64    `json:"durable_lsn,omitempty"`
	// SinceS: seconds since the previous refresh; WritesPerS: log records
	// the primary made durable per second over them (every submit, claim,
	// ack, retry... is one record; a batch is one). Both absent when
	// Change is.
	SinceS     float64      `json:"since_s,omitempty"`
	WritesPerS *float64     `json:"writes_per_s,omitempty"`
	Queues     []QueueDepth `json:"queues"`
	// Error: no primary answered, or it could not read its queues: why.
	Error string `json:"error,omitempty"`
}

// topView builds one refresh from every peer's status; prev is the
// previous refresh (nil for the first), the base of the changes.
func topView(rows []PeerStatus, prev *TopView, at time.Time) TopView {
	v := TopView{At: at, Queues: []QueueDepth{}}
	var p *PeerStatus
	for i := range rows { // a deposed primary may still say so: the highest term wins
		if r := &rows[i]; r.Up && r.Role == "primary" && (p == nil || r.Term > p.Term) {
			p = r
		}
	}
	if p == nil {
		var why []string
		for _, r := range rows {
			switch {
			case !r.Up:
				why = append(why, r.Name+": "+strings.TrimPrefix(r.Error, r.Name+": ")) // the client's errors name the node already
			default:
				why = append(why, r.Name+": "+r.Role)
			}
		}
		v.Error = "no primary answered (" + strings.Join(why, "; ") + ")"
		return v
	}
	v.Primary, v.Term, v.Mode, v.DurableLSN, v.Error = p.Name, p.Term, p.Mode, p.DurableLSN, p.QueuesError
	v.Queues = append(v.Queues, p.Queues...)
	if prev == nil || prev.Primary != v.Primary || prev.Error != "" || v.Error != "" || !at.After(prev.At) {
		return v
	}
	v.SinceS = at.Sub(prev.At).Seconds()
	if v.DurableLSN >= prev.DurableLSN {
		w := float64(v.DurableLSN-prev.DurableLSN) / v.SinceS
		v.WritesPerS = &w
	}
	before := make(map[string]QueueDepth, len(prev.Queues))
	for _, q := range prev.Queues {
		before[q.Queue] = q
	}
	for i := range v.Queues {
		q, b := &v.Queues[i], before[v.Queues[i].Queue] // a new queue starts from zero
		q.Change = &QueueChange{Pending: diff(q.Pending, b.Pending), Processing: diff(q.Processing, b.Processing), Dead: diff(q.Dead, b.Dead)}
	}
	return v
}

func diff(now, before uint64) int64 { return int64(now) - int64(before) }

func topCmd(ctx context.Context) *cobra.Command {
	var c conn
	var output string
	var interval time.Duration
	var count int
	cmd := &cobra.Command{
		Use:   "top",
		Short: "a refreshing view of every queue: jobs pending, processing and dead, and their changes",
		Long: "A refreshing view of the primary's queues: per queue the jobs pending, processing and\n" +
			"dead, each count's change since the previous refresh, and the log records the primary\n" +
			"made durable per second. Every peer is asked for its status each refresh; the primary's\n" +
			"answer is shown, so the view follows a failover. Until interrupted, or --count refreshes\n" +
			"(a table redrawn in place; with -o json, one JSON object per line per refresh).",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return cliexit.Usage(fmt.Errorf("--output %q: want table or json", output))
			}
			if interval <= 0 || count < 0 {
				return cliexit.Usage(fmt.Errorf("--interval %v and --count %d: the interval must be positive, the count not negative", interval, count))
			}
			mat, err := c.material()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			var prev *TopView
			return refresh(ctx, interval, count, func(at time.Time) error {
				rows, err := statuses(ctx, c.peers, mat, c.timeout, c.connectTimeout)
				if err != nil {
					return err
				}
				v := topView(rows, prev, at)
				prev = &v
				return printTop(w, v, output)
			})
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table|json")
	cmd.Flags().DurationVarP(&interval, "interval", "i", 2*time.Second, "time between refreshes")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many refreshes (0: never)")
	return cmd
}

// printTop prints one refresh: a table under a clear and a title, or one
// JSON line.
func printTop(w io.Writer, v TopView, output string) error {
	if output == "json" {
		return json.NewEncoder(w).Encode(v)
	}
	if err := frameTitle(w, "xcecli top", v.At); err != nil {
		return err
	}
	if v.Primary != "" {
		rate := ""
		if v.WritesPerS != nil {
			rate = fmt.Sprintf(", %.1f writes/s over %.1fs", *v.WritesPerS, v.SinceS)
		}
		if _, err := fmt.Fprintf(w, "primary %s, term %d, %s mode, durable LSN %d%s\n", v.Primary, v.Term, orDash(v.Mode), v.DurableLSN, rate); err != nil {
			return err
		}
	}
	if v.Error != "" {
		if _, err := fmt.Fprintln(w, v.Error); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPENDING\tPROCESSING\tDEAD\tΔPENDING\tΔPROCESSING\tΔDEAD")
	for _, q := range v.Queues {
		ch := "-\t-\t-"
		if q.Change != nil {
			ch = fmt.Sprintf("%+d\t%+d\t%+d", q.Change.Pending, q.Change.Processing, q.Change.Dead)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", q.Queue, q.Pending, q.Processing, q.Dead, ch)
	}
	return tw.Flush()
}
