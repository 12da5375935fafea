package metrics

import (
	"strconv"
	"strings"
	"time"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/sm"
)

// Op names a client request for the op label: status, config,
// upgrade_config, or job_<kind> (job_enqueue, job_claim, ...); unknown
// (job_unknown) for anything else. The set is fixed by sm.JobKind, so the label stays
// bounded.
func Op(req *wire.Request) string {
	switch {
	case req == nil:
		return "unknown"
	case req.Status != nil:
		return "status"
	case req.Config:
		return "config"
	case req.Upgrade != nil:
		return "upgrade_config"
	case req.Job != nil:
		if name, ok := jobOps[req.Job.Kind]; ok {
			return name
		}
		return "job_unknown"
	default:
		return "unknown"
	}
}

// codes names the reply statuses (negative errno, as sm and the daemon
// answer them).
var codes = map[int32]string{
	0:    "ok",
	-1:   "eperm",
	-5:   "eio",
	-11:  "eagain",
	-16:  "ebusy",
	-17:  "eexist",
	-22:  "einval",
	-38:  "enosys",
	-125: "outcome_unknown",
}

// Code names a reply status for the code label; a status without a name
// is its number.
func Code(status int32) string {
	if c, ok := codes[status]; ok {
		return c
	}
	return strconv.Itoa(int(status))
}

// ObserveRequest counts one answered client request and, for a claim, its
// latency.
func (m *Metrics) ObserveRequest(op string, status int32, took time.Duration) {
	m.ObserveRequestCode(op, Code(status), took)
}

// CodeRedirect counts a standby's "not primary" answer, which its API
// forwards to the primary or turns into a redirect: not an error.
const CodeRedirect = "redirect"

// ObserveRequestCode is ObserveRequest with the code label given.
func (m *Metrics) ObserveRequestCode(op, code string, took time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(op, code).Inc()
	if op == claimOp {
		m.claim.Observe(took.Seconds())
	}
}

// jobOps names every job request kind once (no allocation per request):
// job_ and the kind's wire.KindName in lower case (job_enqueue,
// job_ack_batch, job_kind_unspecified for 0).
var jobOps = func() map[sm.JobKind]string {
	m := make(map[sm.JobKind]string)
	for k := sm.JobKind(0); k == 0 || k.Valid(); k++ {
		m[k] = "job_" + strings.ToLower(wire.KindName(k))
	}
	return m
}()

var claimOp = jobOps[sm.JobClaim]
