package clitool

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/xce-hpc/xce/cmd/internal/cliexit"
	"github.com/xce-hpc/xce/schema"
)

// ParseHandle parses a claim handle "ID:ATTEMPT:TERM.LSN" as `job claim`
// prints it: the job id, the claim it names (the job's claims count at the
// handout, queue.Job.Handle), both >= 1, and the term and LSN of the WAL
// record that made the claim (LSN >= 1). A worker passes it through as one
// opaque word.
func ParseHandle(s string) (*schema.WalHandle, error) {
	bad := func(why string) (*schema.WalHandle, error) {
		return nil, fmt.Errorf("handle %q: %s (want ID:ATTEMPT:TERM.LSN, as printed by `job claim`)", s, why)
	}
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 3 {
		return bad(fmt.Sprintf("%d colon-separated fields, want 3", len(parts)))
	}
	id, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil || id == 0 {
		return bad("job id must be a positive integer")
	}
	att, err := strconv.ParseUint(parts[1], 10, 32)
	if err != nil || att == 0 {
		return bad("attempt must be a positive integer")
	}
	termS, lsnS, ok := strings.Cut(parts[2], ".")
	if !ok {
		return bad("claim stamp must be TERM.LSN")
	}
	term, err := strconv.ParseUint(termS, 10, 64)
	if err != nil {
		return bad("claim term must be a non-negative integer")
	}
	lsn, err := strconv.ParseUint(lsnS, 10, 64)
	if err != nil || lsn == 0 {
		return bad("claim lsn must be a positive integer")
	}
	return &schema.WalHandle{Id: id, Attempt: uint32(att), ClaimTerm: term, ClaimLsn: lsn}, nil
}

// FormatHandle is the printed form of a handle, "ID:ATTEMPT:TERM.LSN".
func FormatHandle(h *schema.WalHandle) string {
	return fmt.Sprintf("%d:%d:%d.%d", h.GetId(), h.GetAttempt(), h.GetClaimTerm(), h.GetClaimLsn())
}

// JobHandle is the handle of the claim a processing job is under; nil for
// a job that is not processing (its last claim, if any, is over).
func JobHandle(j *schema.SnapshotJob) *schema.WalHandle {
	if j.GetState() != schema.JobState_JOB_STATE_PROCESSING || j.GetClaims() == 0 {
		return nil
	}
	return &schema.WalHandle{Id: j.GetId(), Attempt: j.GetClaims(), ClaimTerm: j.GetClaimTerm(), ClaimLsn: j.GetClaimLsn()}
}

func parseJobID(s string) (uint64, error) {
	id, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("job id %q: want a positive integer", s)
	}
	return id, nil
}

func stateName(s schema.JobState) string {
	switch s {
	case schema.JobState_JOB_STATE_PENDING:
		return "pending"
	case schema.JobState_JOB_STATE_PROCESSING:
		return "processing"
	case schema.JobState_JOB_STATE_DEAD:
		return "dead"
	default:
		return s.String()
	}
}

// JobView is the JSON form of a job: every field the node returns; times
// are Unix seconds (0 = unset, omitted).
type JobView struct {
	ID                   uint64 `json:"id"`
	Handle               string `json:"handle,omitempty"` // processing jobs only
	Queue                string `json:"queue"`
	State                string `json:"state"`
	Attempts             uint32 `json:"attempts"`
	MaxAttempts          uint32 `json:"max_attempts"`
	Claims               uint32 `json:"claims"`
	ClaimTerm            uint64 `json:"claim_term,omitempty"` // the record of the latest claim
	ClaimLSN             uint64 `json:"claim_lsn,omitempty"`
	Priority             int32  `json:"priority"`
	Host                 string `json:"host,omitempty"`
	Pin                  string `json:"pin,omitempty"`
	Resource             uint32 `json:"resource,omitempty"`
	Payload              string `json:"payload,omitempty"`        // when valid UTF-8
	PayloadBase64        string `json:"payload_base64,omitempty"` // otherwise
	RunAt                int64  `json:"run_at,omitempty"`
	EnqueuedAt           int64  `json:"enqueued_at,omitempty"`
	ExpiresAt            int64  `json:"expires_at,omitempty"`
	ClaimedAt            int64  `json:"claimed_at,omitempty"`
	ClaimExpiresAt       int64  `json:"claim_expires_at,omitempty"`
	LastError            string `json:"last_error,omitempty"`
	DiedAt               int64  `json:"died_at,omitempty"`
	VisibilityTimeoutS   uint32 `json:"visibility_timeout_s"`
	BackoffBaseS         uint32 `json:"backoff_base_s"`
	DeadLetterRetentionS uint32 `json:"dead_letter_retention_s"`
}

// ViewOf converts a job for JSON output.
func ViewOf(j *schema.SnapshotJob) JobView {
	v := JobView{ID: j.GetId(), Queue: j.GetQueue(), State: stateName(j.GetState()), Attempts: j.GetAttempts(),
		MaxAttempts: j.GetStamps().GetMaxAttempts(), Claims: j.GetClaims(), ClaimTerm: j.GetClaimTerm(), ClaimLSN: j.GetClaimLsn(), Priority: j.GetPriority(), Host: j.GetHost(),
		Pin: j.GetPin(), Resource: j.GetResource(), RunAt: j.GetRunAt(), EnqueuedAt: j.GetEnqueuedAt(), ExpiresAt: j.GetExpiresAt(),
		ClaimedAt: j.GetClaimedAt(), ClaimExpiresAt: j.GetClaimExpiresAt(), LastError: j.GetLastError(), DiedAt: j.GetDiedAt(),
		VisibilityTimeoutS: j.GetStamps().GetVisibilityTimeoutS(), BackoffBaseS: j.GetStamps().GetBackoffBaseS(),
		DeadLetterRetentionS: j.GetStamps().GetDeadLetterRetentionS()}
	if h := JobHandle(j); h != nil {
		v.Handle = FormatHandle(h)
	}
	if p := j.GetPayload(); len(p) > 0 {
		if utf8.Valid(p) {
			v.Payload = string(p)
		} else {
			v.PayloadBase64 = base64.StdEncoding.EncodeToString(p)
		}
	}
	return v
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func checkOutput(output string) error {
	if output != "table" && output != "json" {
		return cliexit.Usage(fmt.Errorf("--output %q: want table or json", output))
	}
	return nil
}

// fmtTime is a Unix time in UTC RFC 3339, "-" when unset.
func fmtTime(s int64) string {
	if s == 0 {
		return "-"
	}
	return time.Unix(s, 0).UTC().Format(time.RFC3339)
}

// cell keeps a table cell on one line; "" becomes "-".
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// PrintJobs renders jobs as a table; withHandle adds the claim handle
// column first (for `job claim`, whose output a worker acts on).
func PrintJobs(w io.Writer, jobs []*schema.SnapshotJob, withHandle bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "ID\tQUEUE\tSTATE\tATTEMPTS/MAX\tPRIORITY\tHOST\tCLAIMED_AT\tCLAIM_EXPIRES\tLAST_ERROR"
	if withHandle {
		head = "HANDLE\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, j := range jobs {
		if withHandle {
			h := "-"
			if jh := JobHandle(j); jh != nil {
				h = FormatHandle(jh)
			}
			fmt.Fprintf(tw, "%s\t", h)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%d\t%s\t%s\t%s\t%s\n", j.GetId(), cell(j.GetQueue()), stateName(j.GetState()),
			j.GetAttempts(), j.GetStamps().GetMaxAttempts(), j.GetPriority(), cell(j.GetHost()),
			fmtTime(j.GetClaimedAt()), fmtTime(j.GetClaimExpiresAt()), cell(j.GetLastError()))
	}
	return tw.Flush()
}

func printJobsAs(w io.Writer, output string, jobs []*schema.SnapshotJob, withHandle bool) error {
	if output == "json" {
		views := make([]JobView, len(jobs))
		for i, j := range jobs {
			views[i] = ViewOf(j)
		}
		return writeJSON(w, views)
	}
	return PrintJobs(w, jobs, withHandle)
}

// fmtSecs renders a number of seconds compactly: 300 -> "5m",
// 604800 -> "7d", 90 -> "1m30s", 0 -> "0s".
func fmtSecs(s uint32) string {
	if s == 0 {
		return "0s"
	}
	var b strings.Builder
	n := uint64(s)
	for _, u := range []struct {
		secs uint64
		unit string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}} {
		if n >= u.secs {
			fmt.Fprintf(&b, "%d%s", n/u.secs, u.unit)
			n %= u.secs
		}
	}
	return b.String()
}
