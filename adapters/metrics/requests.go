package metrics

import (
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/sm"
)

// Op names a client request for the op label: status, config,
// upgrade_config, switchover, or job_<kind> (job_enqueue, job_claim, ...); unknown
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
	case req.Switchover != nil:
		return "switchover"
	case req.Job != nil:
		if name, ok := jobOps[req.Job.Kind]; ok {
			return name
		}
		return "job_unknown"
	default:
		return "unknown"
	}
}

// grpcNames are the gRPC names of the codes (connect's codes are
// gRPC's, by number; connect spells them in snake case).
var grpcNames = [...]string{
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
	"PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
	"Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated",
}

// CodeName names code for the code label as gRPC names it (OK,
// InvalidArgument, Unavailable, ...): the daemon passes the code the API
// answers a request with (api.CodeOf). A code gRPC does not define is
// Code(n), its number.
func CodeName(code connect.Code) string {
	if int(code) < len(grpcNames) {
		return grpcNames[code]
	}
	return "Code(" + strconv.FormatUint(uint64(code), 10) + ")"
}

// CodeRedirect counts a standby's "not primary" answer, which its API
// forwards to the primary (where the call is counted again, with the code
// the client gets) or answers as Unavailable when it cannot: not an
// error of this node, so not a gRPC code.
const CodeRedirect = "redirect"

// ObserveRequestCode counts one answered client request by operation and
// code (CodeName, or CodeRedirect) and, for a claim, its latency.
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
