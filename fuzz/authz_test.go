package fuzz

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/adapters/authz"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// FuzzAuthorize: the authorisation decision (issue 8 build 1) on any
// certificate name and any client request that passes wire.CheckRequest
// (the API handler checks before the daemon decides), under an open policy
// (any CA-signed client is a worker) and a closed one (--client-cn). It
// never panics, is deterministic, refuses with a one-line reason exactly
// when it refuses, never lets a peer or a role below the request's need
// through, and lets OP_upgradeConfig and the operator commands through
// for admins only.
func FuzzAuthorize(f *testing.F) {
	for _, s := range []struct {
		cn   string
		op   uint8
		body proto.Message
		job  []byte // opJob: jobOf's form
	}{
		{"worker", opJob, nil, append([]byte{byte(sm.JobEnqueue), 0, 0}, "batch"...)},
		{"worker", opJob, nil, []byte{byte(sm.JobRedrive), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3}},
		{"worker", opJob, nil, append([]byte{byte(sm.JobClaim), 200, 4}, "batch\xffnode001"...)},
		{"admin", opUpgrade, &schema.UpgradeConfigRequest{Bytes: []byte{1}}, nil},
		{"n1", opStatus, &schema.StatusRequest{}, nil},
		{"", opConfig, nil, nil},
	} {
		b := s.job
		if s.body != nil {
			var err error
			if b, err = proto.Marshal(s.body); err != nil {
				f.Fatal(err)
			}
		}
		f.Add(s.cn, s.op, b)
	}
	peers := []string{"n0", "n1", "n2"}
	open, err := authz.NewPolicy(peers, []string{"admin"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	closed, err := authz.NewPolicy(peers, []string{"admin"}, []string{"worker"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, cn string, op uint8, b []byte) {
		req, ok := requestOf(op, b)
		if !ok || wire.CheckRequest(req) != nil {
			return // refused before any decision
		}
		for _, p := range []*authz.Policy{open, closed} {
			d := p.Decide(cn, req)
			if d != p.Decide(cn, req) {
				t.Fatalf("Decide(%q) is not deterministic", cn)
			}
			if d.Allowed != (d.Reason == "") {
				t.Fatalf("allowed %v with reason %q", d.Allowed, d.Reason)
			}
			need, _ := authz.Need(req)
			peer := cn == "n0" || cn == "n1" || cn == "n2"
			switch {
			case d.Allowed && peer && req.Status == nil:
				t.Fatalf("peer %q allowed %s (a peer may ask for status only)", cn, d.Op)
			case d.Allowed && !peer && d.Role != authz.RoleAdmin && !(d.Role == authz.RoleWorker && need == authz.RoleWorker):
				t.Fatalf("%q with role %v allowed %s, which needs %v", cn, d.Role, d.Op, need)
			case d.Allowed && need == authz.RoleAdmin && cn != "admin":
				t.Fatalf("%q allowed the admin operation %s", cn, d.Op)
			case d.Allowed && req.Upgrade != nil && cn != "admin":
				t.Fatalf("%q allowed OP_upgradeConfig", cn)
			case !d.Allowed && cn == "admin":
				t.Fatalf("admin refused: %s", d.Reason)
			}
			// On behalf of cn: never an admin operation, never from a
			// forwarder that is not a peer, never above cn's own role.
			for _, via := range []string{"n1", "admin", cn} {
				for _, claimed := range []authz.Role{authz.RoleNone, authz.RolePeer, authz.RoleWorker, authz.RoleAdmin} {
					o := p.DecideOnBehalf(via, cn, claimed, req)
					switch {
					case o.Allowed != (o.Reason == ""):
						t.Fatalf("on behalf: allowed %v with reason %q", o.Allowed, o.Reason)
					case o.Allowed && need != authz.RoleWorker:
						t.Fatalf("%q allowed %s on behalf of %q (needs %v)", via, o.Op, cn, need)
					case o.Allowed && p.RoleOf(via) != authz.RolePeer:
						t.Fatalf("%q, not a peer, allowed to act on behalf of %q", via, cn)
					case o.Allowed && (claimed < authz.RoleWorker || p.RoleOf(cn) < authz.RoleWorker):
						t.Fatalf("%q allowed %s on behalf of %q claimed %v, own role %v", via, o.Op, cn, claimed, p.RoleOf(cn))
					}
				}
			}
			// The reason is logged: one line of printable text.
			for _, r := range strings.ReplaceAll(d.Reason, "—", "-") {
				if r < 0x20 || r >= 0x7f {
					t.Fatalf("reason %q has the character %q", d.Reason, r)
				}
			}
			if len(d.Reason) > 400 {
				t.Fatalf("reason of %d bytes", len(d.Reason))
			}
		}
	})
}

// The kinds of request a fuzzed one is (the op byte, modulo opKinds).
const (
	opStatus uint8 = iota
	opConfig
	opUpgrade
	opJob
	opKinds
)

// requestOf is the request of kind op (modulo opKinds) whose body is b, a
// protobuf of the body's message; false if b does not decode.
func requestOf(op uint8, b []byte) (*wire.Request, bool) {
	switch op % opKinds {
	case opStatus:
		st := new(schema.StatusRequest)
		return &wire.Request{Status: st}, proto.Unmarshal(b, st) == nil
	case opConfig:
		return &wire.Request{Config: true}, true
	case opUpgrade:
		u := new(schema.UpgradeConfigRequest)
		return &wire.Request{Upgrade: u}, proto.Unmarshal(b, u) == nil
	default:
		return &wire.Request{Job: jobOf(b)}, true
	}
}

// jobOf is the job request b describes (every b describes one): its
// first byte the kind, the next the claim's wait in 100 ms steps (past
// sm.MaxClaimWait from 201), the next the number of handles in eights
// (past wire.MaxJobHandles from 126), the next eight the id (big-endian);
// then, split at each 0xff, the queue, host, schedule name, spec, error
// text and payload, and any pieces left are a batch's payloads.
func jobOf(b []byte) *sm.JobRequest {
	next := func() byte {
		if len(b) == 0 {
			return 0
		}
		c := b[0]
		b = b[1:]
		return c
	}
	j := &sm.JobRequest{Kind: sm.JobKind(next()), Wait: time.Duration(next()) * 100 * time.Millisecond}
	if n := int(next()) * 8; n > 0 {
		j.Handles = make([]queue.Handle, n)
	}
	for range 8 {
		j.ID = j.ID<<8 | uint64(next())
	}
	pieces := bytes.Split(b, []byte{0xff})
	for i, dst := range []*string{&j.Queue, &j.Host, &j.Name, &j.Spec, &j.Error} {
		if i < len(pieces) {
			*dst = string(pieces[i])
		}
	}
	if len(pieces) > 5 {
		j.Payload = pieces[5]
	}
	if len(pieces) > 6 {
		j.Payloads = pieces[6:]
	}
	return j
}
