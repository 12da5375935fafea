package wire

// Request is the one internal form of a client request: the API handler
// builds it from each RPC (package api), CheckRequest checks it, package
// authz decides on it, the daemon counts and serves it, answering with a
// Reply. It is Go, not a wire message: it never leaves the process. A job
// operation is the core's own request (sm.JobRequest), built by the
// handler from the RPC's message and handed to the node as is; its answer
// is the node's sm.Reply, which the handler renders as the API's
// JobResponse.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// Client reply status codes beyond sm's (negative errno, as
// sm.Msg.Status).
const (
	// StatusBusy, -EBUSY: a config upgrade or a switchover is already in
	// progress, or a switchover's handover did not complete in time.
	StatusBusy int32 = -16
	// StatusNotInSync, -EL2NSYNC: the cluster's state does not allow a
	// switchover (its target, or every standby, is not in sync; seed mode).
	StatusNotInSync   int32 = -45
	StatusUnsupported int32 = -38 // -ENOSYS: an op this server does not know
)

// Request is one client request: exactly one of its fields is set.
type Request struct {
	Status  *schema.StatusRequest        // ClusterStatus
	Config  bool                         // GetConfig, ListQueues, ListHosts: the running config
	Upgrade *schema.UpgradeConfigRequest // UpgradeConfig (OP_upgradeConfig, admin)
	Job     *sm.JobRequest               // a job operation, as the node takes it
	// Switchover (admin): the node's own request, the target resolved
	// from its name by the API handler; the daemon sets Peer.
	Switchover *sm.Switchover
}

// Reply answers a Request: status 0 and the body of the request's kind,
// or a non-zero status (negative errno: sm's, authz's, or the ones above)
// with Error, the human text. NotPrimary marks a standby's redirect
// (seed 002 §10.12, status EAGAIN): the body's Primary names the primary
// it follows. An upgrade's body is set on a refusal too. A job
// operation's body is the node's reply as the core gives it (sm.Reply);
// its Status, Error and NotPrimary are copied to the Reply's. A
// switchover's is the node's sm.SwitchoverReply, set on a refusal too.
type Reply struct {
	Status     int32
	Error      string
	NotPrimary bool

	StatusReply *schema.StatusReply
	Config      *schema.ConfigReply
	Upgrade     *schema.UpgradeConfigReply
	Job         *sm.Reply
	Switchover  *sm.SwitchoverReply
}

// CheckRequest bounds what a client request may carry: one op, a job
// request within the limits below, an upgrade blob within
// sm.MaxConfigSize. The error names the field at fault.
func CheckRequest(r *Request) error {
	if r == nil {
		return errors.New("nil request")
	}
	n := 0
	for _, set := range []bool{r.Status != nil, r.Config, r.Upgrade != nil, r.Job != nil, r.Switchover != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return errors.New("no op")
	case n > 1:
		return fmt.Errorf("%d ops in one request, want one", n)
	case r.Job != nil:
		return checkJobRequest(r.Job)
	case r.Upgrade != nil:
		return checkUpgradeRequest(r.Upgrade)
	case r.Switchover != nil && r.Switchover.To < -1:
		return fmt.Errorf("switchover target %d: want a member's index, or -1 for the primary's pick", r.Switchover.To)
	}
	return nil
}

// checkUpgradeRequest bounds an OP_upgradeConfig request: a blob of at
// most sm.MaxConfigSize and a SHA-256 of 0 or SHA256Size bytes. Empty
// fields travel: the primary answers them with the seed's "Invalid
// request: bytes or sha256 field missing" (§6.4 step 0b).
func checkUpgradeRequest(u *schema.UpgradeConfigRequest) error {
	switch {
	case len(u.GetBytes()) > sm.MaxConfigSize:
		return fmt.Errorf("config blob of %d bytes exceeds %d", len(u.GetBytes()), sm.MaxConfigSize)
	case len(u.GetSha256()) != 0 && len(u.GetSha256()) != SHA256Size:
		return fmt.Errorf("sha256 of %d bytes, want %d", len(u.GetSha256()), SHA256Size)
	}
	return nil
}

// MaxJobHandles bounds an ack batch, and the acks a claim carries.
const MaxJobHandles = 1000

// checkJobRequest bounds what a job request may carry. The errors name
// the API's fields.
func checkJobRequest(j *sm.JobRequest) error {
	switch {
	case j == nil:
		return errors.New("job op with nil body")
	case !j.Kind.Valid():
		return fmt.Errorf("job op kind %d unknown", j.Kind)
	case len(j.Payload) > sm.MaxJobPayload:
		return fmt.Errorf("job payload of %d bytes exceeds %d", len(j.Payload), sm.MaxJobPayload)
	case len(j.Payloads) > MaxJobHandles:
		return fmt.Errorf("%d payloads exceed %d", len(j.Payloads), MaxJobHandles)
	case len(j.Handles) > MaxJobHandles:
		return fmt.Errorf("%d handles exceed %d", len(j.Handles), MaxJobHandles)
	case len(j.Error) > MaxErrorLen:
		return fmt.Errorf("error text of %d bytes exceeds %d", len(j.Error), MaxErrorLen)
	case j.Wait < 0:
		return fmt.Errorf("claim wait of %v is negative", j.Wait)
	case j.Wait > sm.MaxClaimWait:
		return fmt.Errorf("claim wait of %d ms exceeds %d", j.Wait.Milliseconds(), sm.MaxClaimWait.Milliseconds())
	case j.Wait > 0 && j.Kind != sm.JobClaim:
		return fmt.Errorf("a wait on a %s: only a claim waits", KindName(j.Kind))
	}
	// Names are required or not by the operation (the node says which);
	// one that is given follows the name rule.
	for _, n := range []struct{ field, v string }{{"queue", j.Queue}, {"host", j.Host}, {"name", j.Name}} {
		if n.v == "" {
			continue
		}
		if err := schema.CheckName(n.field, n.v); err != nil {
			return err
		}
	}
	if len(j.Spec) > MaxNameLen {
		return fmt.Errorf("schedule spec of %d bytes exceeds %d", len(j.Spec), MaxNameLen)
	}
	return nil
}

// KindName is the name a job operation's kind had in the API's first
// internal form, and still has in error texts, the authorisation's
// operation names ("job " + it, lower case, dashes) and the metrics' op
// label: "ENQUEUE", "ACK_BATCH", "LOST_AND_FOUND_DRAIN";
// "KIND_UNSPECIFIED" for 0, the number for a kind past the last.
func KindName(k sm.JobKind) string {
	switch {
	case k == 0:
		return "KIND_UNSPECIFIED"
	case !k.Valid():
		return strconv.Itoa(int(k))
	}
	return strings.ToUpper(strings.ReplaceAll(k.String(), "-", "_"))
}
