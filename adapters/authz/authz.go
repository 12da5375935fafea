// Package authz decides, from the caller's certificate common name alone,
// whether a client request may run (issue 8 build 1; seed 002 §5.3 and
// the validate_host() of §6.4). It is pure: the daemon calls Decide for
// every client request before anything else sees it, and the fuzz target
// and the table test call it the same way.
//
// Roles, from the CN of a certificate already verified against the
// cluster CA:
//
//   - peer: a name in --peers. Controllers speak the peer protocol (the
//     transport authenticates that separately); as a client a peer
//     certificate may ask for status only, which is how package client
//     confirms a new connection before a node forwards a call on it.
//   - admin: a name in --admin-cn. Everything a worker may do, plus
//     OP_upgradeConfig, switchover and the operator commands (redrive,
//     sweep, tick, lost-and-found drain).
//   - worker (workers and submitters): a name in --client-cn, or, when
//     --client-cn is not given, any other CA-signed certificate with a
//     non-empty CN. Status, config and the job operations.
//
// Forwarding (DecideOnBehalf): a standby forwards a worker's call to the
// primary over its own node certificate, naming the caller's CN and role.
// The primary runs it under the lesser of that role and the role its own
// allowlists give the CN, never above worker: an admin operation is never
// accepted on behalf of anyone (the admin's tool follows the redirect to
// the primary itself), so a stolen node certificate is worth a worker's.
//
// Jobs record no submitter, so "cancel of others' jobs" cannot be told
// from cancel of one's own: cancel is a worker operation (any worker may
// cancel any pending job; narrow who with --client-cn).
package authz

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/sm"
)

// StatusForbidden is the reply status of a refused request: -EPERM, as
// the seed's validate_host() refusal (§6.4 step 0a). Nothing was applied.
const StatusForbidden int32 = -1

// ReasonPrefix starts every refusal text.
const ReasonPrefix = "Not authorised"

// ErrForbidden is what a client wraps for a StatusForbidden reply.
var ErrForbidden = errors.New("not authorised")

// Role is what a certificate may do.
type Role uint8

const (
	RoleNone Role = iota
	RolePeer
	RoleWorker
	RoleAdmin
)

// ParseRole is the Role that String names; RoleNone for any other text.
func ParseRole(s string) Role {
	for _, r := range []Role{RolePeer, RoleWorker, RoleAdmin} {
		if s == r.String() {
			return r
		}
	}
	return RoleNone
}

func (r Role) String() string {
	switch r {
	case RolePeer:
		return "peer"
	case RoleWorker:
		return "worker"
	case RoleAdmin:
		return "admin"
	default:
		return "none"
	}
}

// Policy is the daemon's allowlists. Build it with NewPolicy.
type Policy struct {
	peers, admins, clients map[string]bool
	anyClient              bool // --client-cn not given
}

// NewPolicy checks and builds the allowlists. clients nil means "any
// CA-signed certificate that is not a peer is a worker"; a non-nil empty
// list admits no worker (only admins run job operations). A name may not
// be both a peer and an admin or client, and every name must be a
// printable CN of at most tlsconf.MaxLoggedCN characters.
func NewPolicy(peers, admins, clients []string) (*Policy, error) {
	p := &Policy{peers: set(peers), admins: set(admins), clients: set(clients), anyClient: clients == nil}
	for _, l := range []struct {
		flag  string
		names []string
	}{{"--admin-cn", admins}, {"--client-cn", clients}} {
		for _, n := range l.names {
			switch {
			case n == "":
				return nil, fmt.Errorf("%s: an empty name", l.flag)
			case tlsconf.SanitizeCN(n) != n:
				return nil, fmt.Errorf("%s %q: not a printable certificate name of at most %d characters", l.flag, tlsconf.SanitizeCN(n), tlsconf.MaxLoggedCN)
			case p.peers[n]:
				return nil, fmt.Errorf("%s %s: that is a controller in --peers; a controller's certificate speaks only the peer protocol, so give the admin or worker its own certificate", l.flag, n)
			}
		}
	}
	return p, nil
}

func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// UpgradeEnabled: OP_upgradeConfig can be accepted only with an admin
// allowlist (this replaces the seed's compile-time gate of §5.3).
func (p *Policy) UpgradeEnabled() bool { return len(p.admins) > 0 }

// Admins is the admin allowlist, sorted.
func (p *Policy) Admins() []string { return sorted(p.admins) }

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// RoleOf is the role of a verified certificate's CN.
func (p *Policy) RoleOf(cn string) Role {
	switch {
	case p.peers[cn]:
		return RolePeer
	case p.admins[cn]:
		return RoleAdmin
	case p.clients[cn], p.anyClient && cn != "":
		return RoleWorker
	default:
		return RoleNone
	}
}

// Need is the role a request needs and the name of its operation. An
// operation this build does not know needs admin: deny by default.
func Need(req *wire.Request) (Role, string) {
	switch {
	case req == nil:
		return RoleAdmin, "unknown operation"
	case req.Status != nil:
		return RoleWorker, "status"
	case req.Config:
		return RoleWorker, "config"
	case req.Upgrade != nil:
		return RoleAdmin, "OP_upgradeConfig"
	case req.Switchover != nil:
		return RoleAdmin, "switchover"
	case req.Job != nil:
		k := req.Job.Kind
		name := "job " + strings.ToLower(strings.ReplaceAll(wire.KindName(k), "_", "-"))
		switch k {
		case sm.JobEnqueue, sm.JobEnqueueBatch, sm.JobClaim,
			sm.JobAck, sm.JobAckBatch, sm.JobHeartbeat,
			sm.JobRetry, sm.JobFail, sm.JobCancel,
			sm.JobGet, sm.JobList, sm.JobRegister, sm.JobUnregister, sm.JobListSchedules:
			return RoleWorker, name
		default: // redrive, sweep, tick, lost-and-found drain and what this build does not know
			return RoleAdmin, name
		}
	default:
		return RoleAdmin, "unknown operation"
	}
}

// Decision is Decide's verdict.
type Decision struct {
	Allowed bool
	Role    Role   // the caller's
	Need    Role   // the request's
	Op      string // the operation's name
	Reason  string // the refusal, for the client and the log ("" when allowed); the CN in it is sanitised
}

// Decide is the one authorisation check of a client request from the
// certificate named cn.
func (p *Policy) Decide(cn string, req *wire.Request) Decision {
	role := p.RoleOf(cn)
	need, op := Need(req)
	d := Decision{Role: role, Need: need, Op: op}
	if role == RoleAdmin || role == RoleWorker && need == RoleWorker || role == RolePeer && op == "status" {
		d.Allowed = true
		return d
	}
	var why string
	switch {
	case role == RolePeer:
		why = "; a controller's certificate speaks the peer protocol and asks for status only"
	case need == RoleAdmin && len(p.admins) == 0:
		why = "; this controller allows no admin (start it with --admin-cn)"
	case need == RoleAdmin:
		why = " (--admin-cn)"
	case cn == "":
		why = "; the certificate has no common name"
	default:
		why = " (--client-cn)"
	}
	d.Reason = fmt.Sprintf("%s — %s needs the %s role; certificate %q has the %s role%s",
		ReasonPrefix, op, need, tlsconf.SanitizeCN(cn), role, why)
	return d
}

// DecideOnBehalf is Decide for a call the node named via forwarded on
// behalf of the certificate named cn, whose role via says is claimed. The
// call runs under the least of claimed, the role this policy gives cn, and
// worker; via must be a controller in --peers (the caller of
// DecideOnBehalf has checked that its certificate is a node's). The
// refusal names both.
func (p *Policy) DecideOnBehalf(via, cn string, claimed Role, req *wire.Request) Decision {
	need, op := Need(req)
	own := p.RoleOf(cn)
	role := min(claimed, own, RoleWorker)
	if claimed == RolePeer || own == RolePeer {
		role = RoleNone // a controller is never a caller on another's behalf
	}
	d := Decision{Role: role, Need: need, Op: op}
	if p.RoleOf(via) != RolePeer {
		d.Reason = fmt.Sprintf("%s — %s forwarded by %q on behalf of %q: %q is not a controller in --peers",
			ReasonPrefix, op, tlsconf.SanitizeCN(via), tlsconf.SanitizeCN(cn), tlsconf.SanitizeCN(via))
		return d
	}
	if need == RoleWorker && role == RoleWorker {
		d.Allowed = true
		return d
	}
	why := fmt.Sprintf("certificate %q runs as the %s role here", tlsconf.SanitizeCN(cn), role)
	if need == RoleAdmin {
		why = "admin operations are never accepted on behalf of another certificate; call the primary directly"
	}
	d.Reason = fmt.Sprintf("%s — %s forwarded by %s on behalf of %q needs the %s role; %s",
		ReasonPrefix, op, tlsconf.SanitizeCN(via), tlsconf.SanitizeCN(cn), need, why)
	return d
}
