package clitool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/cmd/internal/cliexit"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// ErrRefused is an operation the primary refused (API code
// failed_precondition: seed 000's validity predicate — the claim is over,
// or the job is not in a state the operation applies to). It is an
// answer, not a failure of the tool, but the exit status is 1 so that
// scripts can test it.
var ErrRefused = errors.New("refused")

// extraCommands are the commands of this file set, registered by NewCommand.
func extraCommands(ctx context.Context) []*cobra.Command {
	return []*cobra.Command{queueCmd(ctx), hostCmd(ctx), jobCmd(ctx), scheduleCmd(ctx), lostAndFoundCmd(ctx), switchoverCmd(ctx)}
}

// ---- request building (pure) ----

// wholeSeconds converts a duration flag to whole seconds (>= 0).
func wholeSeconds(flag string, d time.Duration) (int64, error) {
	if d < 0 {
		return 0, fmt.Errorf("--%s %v: must not be negative", flag, d)
	}
	if d%time.Second != 0 {
		return 0, fmt.Errorf("--%s %v: must be whole seconds", flag, d)
	}
	return int64(d / time.Second), nil
}

// readPayload picks --payload or --payload-file (- = stdin), not both.
func readPayload(payload string, payloadSet bool, file string, stdin io.Reader) ([]byte, error) {
	switch {
	case payloadSet && file != "":
		return nil, cliexit.Usage(errors.New("give --payload or --payload-file, not both"))
	case file == "-":
		return io.ReadAll(stdin)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--payload-file: %w", err)
		}
		return b, nil
	case payload != "":
		return []byte(payload), nil
	}
	return nil, nil
}

// SubmitOpts are the flags of `job submit`.
type SubmitOpts struct {
	Queue    string
	Payload  []byte
	Priority int32
	Delay    time.Duration // wins over RunAt on the node; both is an error here
	RunAt    string        // RFC 3339
	Expires  time.Duration // lifetime, 0 = never
	Host     string        // pin: only this claimant host may claim it
	Resource uint32
	Count    int // > 1: that many jobs with this payload in one ENQUEUE_BATCH record
	// Key is the idempotency key ("" = none); with Count > 1, job i of
	// the batch gets KEY/i (1-based).
	Key string
}

// BuildSubmit is the request of `job submit`: a SubmitRequest, or with
// --count > 1 a SubmitBatchRequest.
func BuildSubmit(o SubmitOpts) (proto.Message, error) {
	if o.Queue == "" {
		return nil, errors.New("--queue is required")
	}
	if o.Delay != 0 && o.RunAt != "" {
		return nil, errors.New("give --delay or --run-at, not both")
	}
	delay, err := wholeSeconds("delay", o.Delay)
	if err != nil {
		return nil, err
	}
	expires, err := wholeSeconds("expires", o.Expires)
	if err != nil {
		return nil, err
	}
	var runAt int64
	if o.RunAt != "" {
		t, err := time.Parse(time.RFC3339, o.RunAt)
		if err != nil {
			return nil, fmt.Errorf("--run-at %q: want RFC 3339, e.g. 2026-01-02T15:04:05Z", o.RunAt)
		}
		runAt = t.Unix()
	}
	if o.Count > 1 {
		if o.Count > 1000 {
			return nil, fmt.Errorf("--count %d: at most 1000 jobs per batch", o.Count)
		}
		req := &schema.SubmitBatchRequest{Queue: o.Queue, Priority: o.Priority,
			Delay: delay, RunAt: runAt, Expires: expires, Host: o.Host, Resource: o.Resource}
		for i := 0; i < o.Count; i++ {
			req.Payloads = append(req.Payloads, o.Payload)
			if o.Key != "" {
				req.IdempotencyKeys = append(req.IdempotencyKeys, fmt.Sprintf("%s/%d", o.Key, i+1))
			}
		}
		return req, nil
	}
	return &schema.SubmitRequest{Queue: o.Queue, Payload: o.Payload, Priority: o.Priority,
		Delay: delay, RunAt: runAt, Expires: expires, Host: o.Host, Resource: o.Resource, IdempotencyKey: o.Key}, nil
}

// BuildClaim is the ClaimRequest of `job claim`: up to max jobs for
// host, waiting up to wait (a long poll, at most sm.MaxClaimWait) for one
// to be ready, and acking the jobs of acks (ID:ATTEMPT:TERM.LSN handles)
// first, in the same write.
func BuildClaim(queue, host string, max int, wait time.Duration, acks []string) (*schema.ClaimRequest, error) {
	switch {
	case queue == "":
		return nil, errors.New("--queue is required")
	case host == "":
		return nil, errors.New("--host is required (the claimant)")
	case max < 1:
		return nil, fmt.Errorf("--max %d: must be at least 1", max)
	case wait < 0 || wait > sm.MaxClaimWait:
		return nil, fmt.Errorf("--wait %v: must be between 0 and %v", wait, sm.MaxClaimWait)
	}
	req := &schema.ClaimRequest{Queue: queue, Host: host, Max: uint32(max), WaitMs: uint32(wait / time.Millisecond)}
	for _, a := range acks {
		h, err := ParseHandle(a)
		if err != nil {
			return nil, fmt.Errorf("--ack %q: %w", a, err)
		}
		req.Ack = append(req.Ack, h)
	}
	return req, nil
}

// BuildAck: one handle is an AckRequest, several an AckBatchRequest.
func BuildAck(args []string) (proto.Message, error) {
	if len(args) == 0 {
		return nil, errors.New("ack: at least one ID:ATTEMPT:TERM.LSN handle")
	}
	hs := make([]*schema.WalHandle, len(args))
	for i, a := range args {
		h, err := ParseHandle(a)
		if err != nil {
			return nil, err
		}
		hs[i] = h
	}
	if len(hs) == 1 {
		return &schema.AckRequest{Handle: hs[0]}, nil
	}
	return &schema.AckBatchRequest{Handles: hs}, nil
}

// BuildHandleOp is the heartbeat, retry or fail (kind) of one handle:
// the HeartbeatRequest, RetryRequest or FailRequest. A heartbeat carries
// no error text: errMsg must be empty.
func BuildHandleOp(kind sm.JobKind, handle, errMsg string) (proto.Message, error) {
	h, err := ParseHandle(handle)
	if err != nil {
		return nil, err
	}
	switch kind {
	case sm.JobHeartbeat:
		if errMsg != "" {
			return nil, errors.New("a heartbeat carries no error text")
		}
		return &schema.HeartbeatRequest{Handle: h}, nil
	case sm.JobRetry:
		return &schema.RetryRequest{Handle: h, Error: errMsg}, nil
	case sm.JobFail:
		return &schema.FailRequest{Handle: h, Error: errMsg}, nil
	}
	return nil, fmt.Errorf("%s is not an operation on a handle", kind)
}

// BuildRetryDelay is a retry's --delay in the API's whole seconds: 0 (the
// queue's backoff) up to 24h.
func BuildRetryDelay(d time.Duration) (int64, error) {
	s, err := wholeSeconds("delay", d)
	if err != nil {
		return 0, err
	}
	if s > queue.MaxRetryDelayS {
		return 0, fmt.Errorf("--delay %v: at most %v", d, time.Duration(queue.MaxRetryDelayS)*time.Second)
	}
	return s, nil
}

// BuildIDOp is the cancel, get or redrive (kind) of a job id: the
// CancelRequest, GetRequest or RedriveRequest.
func BuildIDOp(kind sm.JobKind, id string) (proto.Message, error) {
	n, err := parseJobID(id)
	if err != nil {
		return nil, err
	}
	switch kind {
	case sm.JobCancel:
		return &schema.CancelRequest{Id: n}, nil
	case sm.JobGet:
		return &schema.GetRequest{Id: n}, nil
	case sm.JobRedrive:
		return &schema.RedriveRequest{Id: n}, nil
	}
	return nil, fmt.Errorf("%s is not an operation on a job id", kind)
}

// RegisterOpts are the flags of `schedule register`.
type RegisterOpts struct {
	Name, Spec, Queue string
	Payload           []byte
	Priority          int32         // of each fired job
	Expires           time.Duration // lifetime of each fired job, 0 = never
}

// BuildRegister is the RegisterScheduleRequest (an upsert) of `schedule register`.
// The spec is checked by the primary ("@every <n>s|m|h|d", or a cron
// expression, optionally after "CRON_TZ=<zone> ").
func BuildRegister(o RegisterOpts) (*schema.RegisterScheduleRequest, error) {
	switch {
	case o.Name == "":
		return nil, errors.New("schedule name is required")
	case o.Spec == "":
		return nil, errors.New(`--spec is required, e.g. --spec "@every 5m"`)
	case o.Queue == "":
		return nil, errors.New("--queue is required")
	}
	exp, err := wholeSeconds("expires", o.Expires)
	if err != nil {
		return nil, err
	}
	return &schema.RegisterScheduleRequest{Name: o.Name, Spec: o.Spec, Queue: o.Queue, Payload: o.Payload,
		Fire: &schema.WalFireOpts{Priority: o.Priority, ExpiresS: exp}}, nil
}

// ---- output of results ----

// OKView is the JSON answer of a handle, id or schedule operation.
type OKView struct {
	OK      bool           `json:"ok"`
	Results []HandleResult `json:"results,omitempty"` // ack of several handles
}

// HandleResult is one handle's outcome in an ack batch.
type HandleResult struct {
	Handle string `json:"handle"`
	OK     bool   `json:"ok"`
}

// SubmittedView is the JSON answer of `job submit --count N` (N > 1): the
// new jobs' ids, in order; the jobs are alike but for the id.
type SubmittedView struct {
	Queue string   `json:"queue"`
	IDs   []uint64 `json:"ids"`
}

// SweepView is the JSON answer of `job sweep`.
type SweepView struct {
	Moved   uint32 `json:"moved"`
	Deleted uint32 `json:"deleted"`
}

type shower func(w io.Writer, output string, req proto.Message, res *schema.JobResponse) error

func showJobs(withHandle bool) shower {
	return func(w io.Writer, output string, _ proto.Message, res *schema.JobResponse) error {
		return printJobsAs(w, output, res.GetJobs(), withHandle)
	}
}

// showSubmit prints a submit's new job; a batch's answer names its jobs
// by id alone, one line each.
func showSubmit(w io.Writer, output string, req proto.Message, res *schema.JobResponse) error {
	batch, ok := req.(*schema.SubmitBatchRequest)
	if !ok {
		return printJobsAs(w, output, res.GetJobs(), false)
	}
	if output == "json" {
		return writeJSON(w, SubmittedView{Queue: batch.GetQueue(), IDs: res.GetIds()})
	}
	for _, id := range res.GetIds() {
		if _, err := fmt.Fprintf(w, "submitted job %d to %s\n", id, batch.GetQueue()); err != nil {
			return err
		}
	}
	return nil
}

// showOK prints ok (a refusal is the error of Send: ErrRefused).
func showOK(w io.Writer, output string, _ proto.Message, _ *schema.JobResponse) error {
	if output == "json" {
		return writeJSON(w, OKView{OK: true})
	}
	_, err := fmt.Fprintln(w, "ok")
	return err
}

func okWord(ok bool) string {
	if ok {
		return "ok"
	}
	return "refused"
}

// ackResults is the outcome of each handle req acks, and the refused ones.
func ackResults(req proto.Message, res *schema.JobResponse) (OKView, []string) {
	oks := res.GetOks()
	hs := acked(req)
	v := OKView{OK: len(oks) == len(hs)}
	var refused []string
	for i, h := range hs {
		ok := i < len(oks) && oks[i]
		v.Results = append(v.Results, HandleResult{Handle: FormatHandle(h), OK: ok})
		if !ok {
			v.OK = false
			refused = append(refused, FormatHandle(h))
		}
	}
	return v, refused
}

// acked is the handles req acks: an ack batch's, a claim's acks.
func acked(req proto.Message) []*schema.WalHandle {
	switch r := req.(type) {
	case *schema.AckBatchRequest:
		return r.GetHandles()
	case *schema.ClaimRequest:
		return r.GetAck()
	}
	return nil
}

// printAckResults writes one "HANDLE ok|refused" line per handle.
func printAckResults(w io.Writer, v OKView) error {
	for _, r := range v.Results {
		if _, err := fmt.Fprintf(w, "%s %s\n", r.Handle, okWord(r.OK)); err != nil {
			return err
		}
	}
	return nil
}

// refusedErr is ErrRefused for the refused handles (nil for none).
func refusedErr(refused []string) error {
	if len(refused) == 0 {
		return nil
	}
	return fmt.Errorf("%w: ack %s", ErrRefused, strings.Join(refused, " "))
}

// showAckBatch prints one line per handle; any refusal is ErrRefused.
func showAckBatch(w io.Writer, output string, req proto.Message, res *schema.JobResponse) error {
	v, refused := ackResults(req, res)
	var err error
	if output == "json" {
		err = writeJSON(w, v)
	} else {
		err = printAckResults(w, v)
	}
	if err != nil {
		return err
	}
	return refusedErr(refused)
}

// ClaimView is the JSON answer of `job claim --ack`: each ack's outcome
// and the jobs claimed.
type ClaimView struct {
	Acks OKView    `json:"acks"`
	Jobs []JobView `json:"jobs"`
}

// showClaim prints the claimed jobs with their handles; with acks, their
// outcomes first (any refusal is ErrRefused, the jobs printed all the same).
func showClaim(w io.Writer, output string, req proto.Message, res *schema.JobResponse) error {
	if len(acked(req)) == 0 {
		return printJobsAs(w, output, res.GetJobs(), true)
	}
	v, refused := ackResults(req, res)
	var err error
	if output == "json" {
		cv := ClaimView{Acks: v, Jobs: make([]JobView, len(res.GetJobs()))}
		for i, j := range res.GetJobs() {
			cv.Jobs[i] = ViewOf(j)
		}
		err = writeJSON(w, cv)
	} else if err = printAckResults(w, v); err == nil {
		err = PrintJobs(w, res.GetJobs(), true)
	}
	if err != nil {
		return err
	}
	return refusedErr(refused)
}

func showSweep(w io.Writer, output string, _ proto.Message, res *schema.JobResponse) error {
	v := SweepView{Moved: res.GetMoved(), Deleted: res.GetDeleted()}
	if output == "json" {
		return writeJSON(w, v)
	}
	_, err := fmt.Fprintf(w, "moved %d expired job(s) to dead, deleted %d dead job(s) past retention\n", v.Moved, v.Deleted)
	return err
}

func showGet(w io.Writer, output string, req proto.Message, res *schema.JobResponse) error {
	jobs := res.GetJobs()
	if len(jobs) == 0 {
		g, _ := req.(*schema.GetRequest) // nil for another: its getters answer zero
		return fmt.Errorf("job %d not found", g.GetId())
	}
	if output == "json" {
		return writeJSON(w, ViewOf(jobs[0]))
	}
	return PrintJobs(w, jobs, false)
}

// ---- commands ----

// jobEnv holds the flags every job and schedule command shares.
type jobEnv struct {
	c      conn
	output string
}

func (e *jobEnv) persistent(cmd *cobra.Command) {
	tmp := &cobra.Command{}
	e.c.flags(tmp)
	cmd.PersistentFlags().AddFlagSet(tmp.Flags())
	cmd.PersistentFlags().StringVarP(&e.output, "output", "o", "table", "table|json")
}

// run sends req to the primary and prints the result with show.
func (e *jobEnv) run(ctx context.Context, cmd *cobra.Command, req proto.Message, show shower) error {
	return e.runPages(ctx, cmd, req, show) // one page unless a listing says more
}

// runPages sends req and shows the answer; for a listing it asks for
// page after page (each reply holds what fits one message) and shows them
// together. Each page is
// consistent on its own; a job changing between pages may show its
// older or newer state.
func (e *jobEnv) runPages(ctx context.Context, cmd *cobra.Command, req proto.Message, show shower) error {
	if err := checkOutput(e.output); err != nil {
		return err
	}
	cl, err := e.c.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	var all *schema.JobResponse
	for {
		res, err := Send(ctx, cl, req)
		if err != nil {
			return err
		}
		if all == nil {
			all = res
		} else {
			all.Jobs = append(all.Jobs, res.GetJobs()...)
		}
		jobs := res.GetJobs()
		list, ok := req.(*schema.ListRequest)
		if !ok || !res.GetMore() || len(jobs) == 0 {
			break
		}
		next := proto.Clone(list).(*schema.ListRequest)
		next.AfterId = jobs[len(jobs)-1].GetId()
		req = next
	}
	all.More = false
	return show(cmd.OutOrStdout(), e.output, req, all)
}

// payloadFlags are --payload and --payload-file.
type payloadFlags struct {
	payload, file string
}

func (p *payloadFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.payload, "payload", "", "job payload (text)")
	cmd.Flags().StringVar(&p.file, "payload-file", "", "read the payload from a file (- = stdin)")
}

func (p *payloadFlags) read(cmd *cobra.Command) ([]byte, error) {
	return readPayload(p.payload, cmd.Flags().Changed("payload"), p.file, cmd.InOrStdin())
}

func jobCmd(ctx context.Context) *cobra.Command {
	e := &jobEnv{}
	root := &cobra.Command{
		Use:   "job",
		Short: "job-queue operations, sent to the primary (the last known primary first, then every peer at once; redirects followed)",
	}
	e.persistent(root)

	// submit
	var so SubmitOpts
	var sp payloadFlags
	submit := &cobra.Command{
		Use:   "submit --queue Q [--payload STR | --payload-file F] [--priority N] [--delay 30s | --run-at RFC3339] [--expires 1h] [--host H] [--resource ID]",
		Short: "enqueue a job; prints it (with --count, the new jobs' ids)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := sp.read(cmd)
			if err != nil {
				return err
			}
			o := so
			o.Payload = p
			req, err := BuildSubmit(o)
			if err != nil {
				return cliexit.Usage(err)
			}
			return e.run(ctx, cmd, req, showSubmit)
		},
	}
	f := submit.Flags()
	f.StringVar(&so.Queue, "queue", "", "queue name")
	sp.add(submit)
	f.Int32Var(&so.Priority, "priority", 0, "priority (higher is claimed first)")
	f.IntVar(&so.Count, "count", 1, "submit this many identical jobs in one durable batch (at most 1000)")
	f.StringVar(&so.Key, "idempotency-key", "", "a key (at most 128 bytes) that makes the submit safe to repeat: within the queue's window (5 minutes by default) a repeat answers the first job; with --count, job i gets KEY/i")
	f.DurationVar(&so.Delay, "delay", 0, "ready this long from now (whole seconds)")
	f.StringVar(&so.RunAt, "run-at", "", "ready at this time (RFC 3339)")
	f.DurationVar(&so.Expires, "expires", 0, "dead-lettered as \"expired\" this long from now unless done (0 = never)")
	f.StringVar(&so.Host, "host", "", "pin: only this worker host may claim the job")
	f.Uint32Var(&so.Resource, "resource", 0, "required resource id (0 = none)")
	_ = submit.MarkFlagRequired("queue")

	// claim
	var cq, ch string
	var cmax int
	var cwait time.Duration
	var cacks []string
	claim := &cobra.Command{
		Use:   "claim --queue Q --host H [--max N] [--wait D] [--ack HANDLE]...",
		Short: "claim up to N ready jobs for worker host H; prints them with their ID:ATTEMPT:TERM.LSN handles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := BuildClaim(cq, ch, cmax, cwait, cacks)
			if err != nil {
				return cliexit.Usage(err)
			}
			return e.run(ctx, cmd, req, showClaim)
		},
	}
	claim.Flags().StringVar(&cq, "queue", "", "queue name")
	claim.Flags().StringVar(&ch, "host", "", "claimant worker host (a host of the config)")
	claim.Flags().IntVar(&cmax, "max", 1, "batch size (1..1000)")
	claim.Flags().DurationVar(&cwait, "wait", 0, "wait up to this long (at most 20s) for a ready job instead of answering none")
	claim.Flags().StringSliceVar(&cacks, "ack", nil, "acknowledge this claimed job (an ID:ATTEMPT:TERM.LSN handle; repeat or comma-separate) in the claim's own write; prints each outcome first")
	_ = claim.MarkFlagRequired("queue")
	_ = claim.MarkFlagRequired("host")

	ack := &cobra.Command{
		Use:   "ack ID:ATTEMPT:TERM.LSN...",
		Short: "acknowledge (complete) claimed jobs; prints ok or refused per handle, exit 1 if any was refused",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := BuildAck(args)
			if err != nil {
				return cliexit.Usage(err)
			}
			if _, ok := req.(*schema.AckBatchRequest); ok {
				return e.run(ctx, cmd, req, showAckBatch)
			}
			return e.run(ctx, cmd, req, showOK)
		},
	}

	handleOp := func(use, short string, kind sm.JobKind, withError bool) *cobra.Command {
		var msg string
		var delay time.Duration
		cmd := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				req, err := BuildHandleOp(kind, args[0], msg)
				if err != nil {
					return cliexit.Usage(err)
				}
				if r, ok := req.(*schema.RetryRequest); ok {
					if r.Delay, err = BuildRetryDelay(delay); err != nil {
						return err
					}
				}
				return e.run(ctx, cmd, req, showOK)
			},
		}
		if withError {
			cmd.Flags().StringVar(&msg, "error", "", "error message recorded as the job's last_error")
		}
		if kind == sm.JobRetry {
			cmd.Flags().DurationVar(&delay, "delay", 0, "claimable again only after this long (whole seconds, at most 24h) instead of the queue's backoff")
		}
		return cmd
	}
	idOp := func(use, short string, kind sm.JobKind, show shower) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				req, err := BuildIDOp(kind, args[0])
				if err != nil {
					return cliexit.Usage(err)
				}
				return e.run(ctx, cmd, req, show)
			},
		}
	}

	var lq string
	list := &cobra.Command{
		Use:   "list --queue Q",
		Short: "every job of a queue, dead ones included",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if lq == "" {
				return cliexit.Usage(errors.New("--queue is required"))
			}
			return e.runPages(ctx, cmd, &schema.ListRequest{Queue: lq}, showJobs(false))
		},
	}
	list.Flags().StringVar(&lq, "queue", "", "queue name (lost_and_found lists the jobs recovery routed there)")
	_ = list.MarkFlagRequired("queue")

	sweep := &cobra.Command{
		Use:   "sweep",
		Short: "dead-letter expired jobs (pending and processing) and delete dead jobs past retention",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.run(ctx, cmd, &schema.SweepRequest{}, showSweep)
		},
	}

	root.AddCommand(submit, claim, ack,
		handleOp("heartbeat HANDLE", "extend a claim by the job's visibility timeout; ok or refused", sm.JobHeartbeat, false),
		handleOp("retry HANDLE [--error MSG] [--delay 30s]", "give a claimed job back for a later attempt (after the backoff, or --delay); ok or refused", sm.JobRetry, true),
		handleOp("fail HANDLE [--error MSG]", "dead-letter a claimed job; ok or refused", sm.JobFail, true),
		idOp("cancel ID", "delete a pending job (a processing or dead one is refused); ok or refused", sm.JobCancel, showOK),
		idOp("get ID", "every field of a job, dead ones included", sm.JobGet, showGet),
		list,
		idOp("redrive ID", "move a dead job back to pending with a fresh attempt budget; ok or refused", sm.JobRedrive, showOK),
		sweep)
	return root
}

func scheduleCmd(ctx context.Context) *cobra.Command {
	e := &jobEnv{}
	root := &cobra.Command{
		Use:   "schedule",
		Short: `"@every" and cron schedules on the primary (fired by the primary every second, or by "schedule tick")`,
	}
	e.persistent(root)

	var ro RegisterOpts
	var rp payloadFlags
	register := &cobra.Command{
		Use:   "register NAME --spec '@every 5m' | --spec 'CRON_TZ=Europe/Berlin 0 3 * * *' --queue Q [--payload STR | --payload-file F] [--priority N] [--expires 1h]",
		Short: "register or replace a schedule",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := rp.read(cmd)
			if err != nil {
				return err
			}
			o := ro
			o.Name, o.Payload = args[0], p
			req, err := BuildRegister(o)
			if err != nil {
				return cliexit.Usage(err)
			}
			return e.run(ctx, cmd, req, showOK)
		},
	}
	f := register.Flags()
	f.StringVar(&ro.Spec, "spec", "", `"@every <n>s|m|h|d", or five cron fields or @hourly/@daily/@weekly/@monthly/@yearly, in UTC or after "CRON_TZ=<zone> "`)
	f.StringVar(&ro.Queue, "queue", "", "queue the fired jobs go to")
	rp.add(register)
	f.Int32Var(&ro.Priority, "priority", 0, "priority of each fired job")
	f.DurationVar(&ro.Expires, "expires", 0, "lifetime of each fired job (0 = never)")
	_ = register.MarkFlagRequired("spec")
	_ = register.MarkFlagRequired("queue")

	unregister := &cobra.Command{
		Use:   "unregister NAME",
		Short: "remove a schedule; ok, or refused if there is none of that name",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.run(ctx, cmd, &schema.UnregisterScheduleRequest{Name: args[0]}, showOK)
		},
	}
	tick := &cobra.Command{
		Use:   "tick",
		Short: "fire every due schedule now; prints the jobs fired",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.run(ctx, cmd, &schema.TickRequest{}, showJobs(false))
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "every schedule with its next fire time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(e.output); err != nil {
				return err
			}
			cl, err := e.c.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			res, err := cl.ListSchedules(ctx, &schema.ListSchedulesRequest{})
			if err != nil {
				return err
			}
			return PrintSchedules(cmd.OutOrStdout(), e.output, res.GetSchedules())
		},
	}
	root.AddCommand(register, unregister, tick, list)
	return root
}

// ScheduleView is one schedule in `schedule list -o json`.
type ScheduleView struct {
	Name     string `json:"name"`
	Spec     string `json:"spec"`
	Queue    string `json:"queue"`
	NextFire string `json:"next_fire"` // RFC 3339 UTC, "-" for never
	Priority int32  `json:"priority"`
	ExpiresS int64  `json:"expires_s"`
}

// PrintSchedules renders schedules as a table or JSON.
func PrintSchedules(w io.Writer, output string, scheds []*schema.ScheduleInfo) error {
	views := make([]ScheduleView, len(scheds))
	for i, s := range scheds {
		views[i] = ScheduleView{Name: s.GetName(), Spec: s.GetSpec(), Queue: s.GetQueue(), NextFire: fmtTime(s.GetNextFire()),
			Priority: s.GetFire().GetPriority(), ExpiresS: s.GetFire().GetExpiresS()}
	}
	if output == "json" {
		return writeJSON(w, views)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSPEC\tQUEUE\tNEXT_FIRE\tPRIORITY")
	for _, v := range views {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", cell(v.Name), cell(v.Spec), cell(v.Queue), v.NextFire, v.Priority)
	}
	return tw.Flush()
}
