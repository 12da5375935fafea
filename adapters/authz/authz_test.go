package authz

import (
	"strings"
	"testing"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

func job(k sm.JobKind) *wire.Request {
	return &wire.Request{Job: &sm.JobRequest{Kind: k}}
}

var (
	status  = &wire.Request{Status: &schema.StatusRequest{}}
	config  = &wire.Request{Config: true}
	upgrade = &wire.Request{Upgrade: &schema.UpgradeConfigRequest{}}
	swover  = &wire.Request{Switchover: &sm.Switchover{To: -1}}
	noOp    = &wire.Request{}
)

func TestDecide(t *testing.T) {
	peers := []string{"n0", "n1"}
	open, err := NewPolicy(peers, []string{"ops"}, nil) // any CA-signed client is a worker
	if err != nil {
		t.Fatal(err)
	}
	closed, err := NewPolicy(peers, []string{"ops"}, []string{"w1"})
	if err != nil {
		t.Fatal(err)
	}
	noAdmin, err := NewPolicy(peers, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	onlyAdmins, err := NewPolicy(peers, []string{"ops"}, []string{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		p      *Policy
		cn     string
		req    *wire.Request
		allow  bool
		role   Role
		reason string // part of the refusal
	}{
		{"worker submits", open, "alice", job(sm.JobEnqueue), true, RoleWorker, ""},
		{"worker claims", open, "alice", job(sm.JobClaim), true, RoleWorker, ""},
		{"worker acks", open, "alice", job(sm.JobAckBatch), true, RoleWorker, ""},
		{"worker cancels", open, "alice", job(sm.JobCancel), true, RoleWorker, ""},
		{"worker registers", open, "alice", job(sm.JobRegister), true, RoleWorker, ""},
		{"worker status", open, "alice", status, true, RoleWorker, ""},
		{"worker config", open, "alice", config, true, RoleWorker, ""},
		{"worker upgrade", open, "alice", upgrade, false, RoleWorker, `OP_upgradeConfig needs the admin role; certificate "alice" has the worker role (--admin-cn)`},
		{"worker redrive", open, "alice", job(sm.JobRedrive), false, RoleWorker, "job redrive needs the admin role"},
		{"worker sweep", open, "alice", job(sm.JobSweep), false, RoleWorker, "job sweep needs the admin role"},
		{"worker tick", open, "alice", job(sm.JobTick), false, RoleWorker, "job tick needs the admin role"},
		{"worker drain", open, "alice", job(sm.JobDrainLostAndFound), false, RoleWorker, "job lost-and-found-drain needs the admin role"},
		{"admin drain", open, "ops", job(sm.JobDrainLostAndFound), true, RoleAdmin, ""},
		{"worker unknown kind", open, "alice", job(sm.JobKind(99)), false, RoleWorker, "needs the admin role"},
		{"worker no op", open, "alice", noOp, false, RoleWorker, "unknown operation needs the admin role"},
		{"admin upgrade", open, "ops", upgrade, true, RoleAdmin, ""},
		{"worker switchover", open, "alice", swover, false, RoleWorker, `switchover needs the admin role; certificate "alice" has the worker role (--admin-cn)`},
		{"admin switchover", open, "ops", swover, true, RoleAdmin, ""},
		{"peer switchover", open, "n0", swover, false, RolePeer, "peer protocol"},
		{"no admin configured: switchover", noAdmin, "ops", swover, false, RoleWorker, "this controller allows no admin"},
		{"admin redrive", open, "ops", job(sm.JobRedrive), true, RoleAdmin, ""},
		{"admin submits", open, "ops", job(sm.JobEnqueue), true, RoleAdmin, ""},
		{"admin status", closed, "ops", status, true, RoleAdmin, ""},
		{"peer job", open, "n1", job(sm.JobEnqueue), false, RolePeer, `certificate "n1" has the peer role; a controller's certificate speaks the peer protocol and asks for status only`},
		{"peer status", open, "n0", status, true, RolePeer, ""}, // a forwarding node confirms its connection
		{"peer config", open, "n0", config, false, RolePeer, `certificate "n0" has the peer role`},
		{"peer upgrade", open, "n0", upgrade, false, RolePeer, "peer protocol"},
		{"listed worker", closed, "w1", job(sm.JobClaim), true, RoleWorker, ""},
		{"unlisted client", closed, "alice", job(sm.JobClaim), false, RoleNone, `certificate "alice" has the none role (--client-cn)`},
		{"unlisted status", closed, "alice", status, false, RoleNone, "status needs the worker role"},
		{"empty CN", open, "", job(sm.JobGet), false, RoleNone, "no common name"},
		{"no admin configured", noAdmin, "ops", upgrade, false, RoleWorker, "this controller allows no admin (start it with --admin-cn)"},
		{"only admins: worker refused", onlyAdmins, "alice", job(sm.JobGet), false, RoleNone, "--client-cn"},
		{"only admins: admin", onlyAdmins, "ops", job(sm.JobGet), true, RoleAdmin, ""},
		{"CN sanitised", closed, "evil\nINFO fake", status, false, RoleNone, `certificate "evil?INFO fake"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.p.Decide(c.cn, c.req)
			if d.Allowed != c.allow || d.Role != c.role {
				t.Fatalf("Decide(%q) = %+v, want allowed=%v role=%v", c.cn, d, c.allow, c.role)
			}
			switch {
			case c.allow && d.Reason != "":
				t.Fatalf("allowed with a reason %q", d.Reason)
			case !c.allow && (!strings.HasPrefix(d.Reason, ReasonPrefix) || !strings.Contains(d.Reason, c.reason)):
				t.Fatalf("reason %q, want %q in it", d.Reason, c.reason)
			case strings.ContainsAny(d.Reason, "\n\r"):
				t.Fatalf("reason %q has a line break", d.Reason)
			}
		})
	}
}

func TestNewPolicyRefuses(t *testing.T) {
	peers := []string{"n0", "n1"}
	for _, c := range []struct {
		admins, clients []string
		want            string
	}{
		{[]string{"n1"}, nil, "--admin-cn n1: that is a controller in --peers"},
		{[]string{"ops"}, []string{"n0"}, "--client-cn n0: that is a controller"},
		{[]string{""}, nil, "--admin-cn: an empty name"},
		{nil, []string{"a\x00b"}, `--client-cn "a?b": not a printable`},
		{[]string{strings.Repeat("x", 65)}, nil, "not a printable certificate name of at most 64"},
	} {
		if _, err := NewPolicy(peers, c.admins, c.clients); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewPolicy(%q, %q): %v, want %q", c.admins, c.clients, err, c.want)
		}
	}
	p, err := NewPolicy(peers, []string{"b", "a"}, nil)
	if err != nil || !p.UpgradeEnabled() || strings.Join(p.Admins(), ",") != "a,b" {
		t.Fatalf("%v %v", p, err)
	}
	if p, _ := NewPolicy(peers, nil, nil); p.UpgradeEnabled() {
		t.Fatal("upgrade enabled without an admin")
	}
}

// A forwarded call (issue 20 finding 2) runs under the least of the role
// the forwarder claims, the role this node gives the caller, and worker;
// only a peer forwards; an admin operation is never run on behalf of
// anyone; the refusal names the forwarder and the caller.
func TestDecideOnBehalf(t *testing.T) {
	p, err := NewPolicy([]string{"n0", "n1"}, []string{"ops"}, []string{"w1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		via, cn string
		claimed Role
		req     *wire.Request
		allow   bool
		reason  string
	}{
		{"worker submit", "n1", "w1", RoleWorker, job(sm.JobEnqueue), true, ""},
		{"admin's submit", "n1", "ops", RoleAdmin, job(sm.JobEnqueue), true, ""},
		{"admin's sweep", "n1", "ops", RoleAdmin, job(sm.JobSweep), false, `job sweep forwarded by n1 on behalf of "ops" needs the admin role; admin operations are never accepted on behalf of another certificate`},
		{"admin's upgrade", "n1", "ops", RoleAdmin, upgrade, false, "admin operations are never accepted on behalf"},
		{"admin's switchover", "n1", "ops", RoleAdmin, swover, false, "admin operations are never accepted on behalf"},
		{"claimed admin for a worker", "n1", "w1", RoleAdmin, job(sm.JobRedrive), false, "never accepted on behalf"},
		{"claimed worker, unlisted here", "n1", "mallory", RoleWorker, job(sm.JobClaim), false, `certificate "mallory" runs as the none role here`},
		{"claimed none", "n1", "w1", RoleNone, job(sm.JobClaim), false, "runs as the none role"},
		{"on behalf of a peer", "n1", "n0", RoleWorker, job(sm.JobClaim), false, "runs as the none role"},
		{"forwarder not a peer", "w1", "ops", RoleAdmin, job(sm.JobEnqueue), false, `forwarded by "w1" on behalf of "ops": "w1" is not a controller in --peers`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := p.DecideOnBehalf(c.via, c.cn, c.claimed, c.req)
			if d.Allowed != c.allow || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("DecideOnBehalf(%q, %q, %v) = %+v, want allowed=%v and %q in the reason", c.via, c.cn, c.claimed, d, c.allow, c.reason)
			}
		})
	}
	for _, r := range []Role{RoleNone, RolePeer, RoleWorker, RoleAdmin} {
		if ParseRole(r.String()) != r {
			t.Fatalf("ParseRole(%q) = %v", r.String(), ParseRole(r.String()))
		}
	}
	if ParseRole("root") != RoleNone {
		t.Fatal("an unknown role parsed as a role")
	}
}

// Every job kind keeps the operation name and the need it had when the
// request was the protobuf JobRequest (its enum's names, lower case, with
// dashes): the refusal texts and the log name them.
func TestNeedOfEveryKind(t *testing.T) {
	want := []struct {
		name string
		need Role
	}{
		{"job kind-unspecified", RoleAdmin}, {"job enqueue", RoleWorker}, {"job claim", RoleWorker}, {"job ack", RoleWorker},
		{"job ack-batch", RoleWorker}, {"job heartbeat", RoleWorker}, {"job retry", RoleWorker}, {"job fail", RoleWorker},
		{"job cancel", RoleWorker}, {"job redrive", RoleAdmin}, {"job sweep", RoleAdmin}, {"job register", RoleWorker},
		{"job unregister", RoleWorker}, {"job tick", RoleAdmin}, {"job get", RoleWorker}, {"job list", RoleWorker},
		{"job enqueue-batch", RoleWorker}, {"job lost-and-found-drain", RoleAdmin}, {"job list-schedules", RoleWorker}, {"job 19", RoleAdmin},
	}
	for k, w := range want {
		need, name := Need(job(sm.JobKind(k)))
		if need != w.need || name != w.name {
			t.Errorf("kind %d: Need = %v, %q; want %v, %q", k, need, name, w.need, w.name)
		}
	}
	if need, name := Need(job(99)); need != RoleAdmin || name != "job 99" {
		t.Errorf("kind 99: Need = %v, %q; want admin, %q", need, name, "job 99")
	}
}
