package sim

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
)

// upgradePrimary boots n0 of [n0, n1] with a config, elects it (its
// deadline fires with nobody answering) and has n1 join as standby.
func upgradePrimary(t *testing.T, enable bool) (*ioDriver, []byte) {
	t.Helper()
	d := simdisk.New()
	blob := sampleConfig(1, 3)
	mustProvision(t, d, blob, epoch)
	o := sm.DefaultOptions(0, []string{"n0", "n1"})
	o.EnableUpgrade = enable
	n, err := sm.NewNode(o)
	if err != nil {
		t.Fatal(err)
	}
	drv := &ioDriver{t: t, node: n, disk: d}
	drv.feed(sm.Boot{Seed: 1})
	for i := 0; i < 5 && n.Role() != sm.RolePrimary; i++ {
		drv.fire(sm.TimerElection) // n1 never answers: the deadline is deferred, then passes
	}
	if n.Role() != sm.RolePrimary {
		t.Fatalf("not primary: %s %v", n.Role(), drv.logs)
	}
	drv.feed(sm.Recv{From: 1, Msg: sm.Msg{Type: sm.MsgJoin, ReqID: 1, Role: sm.RoleStandby}})
	return drv, blob
}

func upgradeReq(id uint64, blob []byte) sm.UpgradeConfig {
	sum := sha256.Sum256(blob)
	return sm.UpgradeConfig{ID: id, Bytes: blob, SHA256: sum[:], Peer: "admin"}
}

func (d *ioDriver) upgradeReplies() []sm.UpgradeReply { return d.upReplies }

// newConfig is a valid config different from sampleConfig(1, 3) whose
// embedded generation is deliberately bogus (the primary ignores it).
func newConfig(t *testing.T) []byte {
	c := &schema.ClusterConfig{ConfigGeneration: 99, ClusterName: "next", Port: 7001,
		Queues: []*schema.Queue{{Id: 1, Name: "batch", VisibilityTimeoutS: 30, MaxAttempts: 3}}}
	b, err := schema.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUpgradeConfigSha256Mismatch (seed §14.1): a wrong caller SHA-256 is
// refused before any disk write.
func TestUpgradeConfigSha256Mismatch(t *testing.T) {
	d, _ := upgradePrimary(t, true)
	before := d.disk.Fingerprint()
	req := upgradeReq(5, newConfig(t))
	req.SHA256[0] ^= 1
	d.feed(req)
	r := d.upgradeReplies()
	if len(r) != 1 || r[0].Error != "SHA-256 mismatch — blob corrupted in transit" || r[0].VersionTag != 0 {
		t.Fatalf("replies %+v", r)
	}
	if d.disk.Fingerprint() != before || d.exit != nil {
		t.Fatal("refused upgrade touched the disk or exited")
	}
}

// TestUpgradeConfigInvalidCapnp (seed §14.1; protobuf here): a corrupt
// blob fails to decode and is refused; semantic problems are refused too.
func TestUpgradeConfigInvalidCapnp(t *testing.T) {
	d, _ := upgradePrimary(t, true)
	before := d.disk.Fingerprint()
	noQueues, _ := schema.Encode(&schema.ClusterConfig{Port: 7001})
	d.feed(upgradeReq(1, []byte{0xff, 0xff, 0xff}))
	d.feed(upgradeReq(2, noQueues))
	r := d.upgradeReplies()
	if len(r) != 2 || r[0].Error != "Failed to decode ClusterConfig blob" || r[1].Error != schema.ErrNoQueues.Error() {
		t.Fatalf("replies %+v", r)
	}
	if d.disk.Fingerprint() != before {
		t.Fatal("refused upgrade touched the disk")
	}
}

// TestUpgradeConfigGenerationIncremented (seed §14.1, §4.4, §6.4 steps
// 3-9): the incoming generation is ignored and current+1 saved; the
// joined standby gets the push, the admin gets the tag and the ACK count,
// and the primary exits 0 to restart.
func TestUpgradeConfigGenerationIncremented(t *testing.T) {
	d, _ := upgradePrimary(t, true)
	gen := d.node.ConfigGeneration()
	d.feed(upgradeReq(9, newConfig(t)))
	push := lastSent(t, d, sm.MsgReplConfigPush)
	if d.node.ConfigGeneration() != gen+1 {
		t.Fatalf("generation %d, want %d", d.node.ConfigGeneration(), gen+1)
	}
	blob, _, _ := d.node.Config()
	c, err := schema.DecodeClusterConfig(blob)
	if err != nil || c.GetConfigGeneration() != gen+1 || c.GetClusterName() != "next" {
		t.Fatalf("saved config %v %v", c, err)
	}
	if validConfigOn(d.disk.DurableFiles()) != refName(sha256Sum(blob)) {
		t.Fatal("conf/current does not durably name the upgraded config")
	}
	if push.ConfigTag != sm.TagOf(blob) || string(push.Bytes) != string(blob) {
		t.Fatal("push does not carry the saved config")
	}
	d.feed(sm.Recv{From: 1, Msg: sm.Msg{Type: sm.MsgReplConfigPushReply, ReqID: push.ReqID, Accepted: true, ConfigTag: push.ConfigTag, Role: sm.RoleStandby}})
	r := d.upgradeReplies()
	if len(r) != 1 || r[0].Error != "" || r[0].VersionTag != sm.TagOf(blob) || r[0].AckedCount != 1 {
		t.Fatalf("admin reply %+v", r)
	}
	if d.exit == nil || d.exit.Code != 0 {
		t.Fatalf("exit %+v, want a clean restart", d.exit)
	}
}

// TestUpgradeConfigReplayHarmless (seed §14.1): the same bytes pushed again
// (after the restart) are accepted again with the generation incremented
// again — not idempotent, and harmless.
func TestUpgradeConfigReplayHarmless(t *testing.T) {
	d, _ := upgradePrimary(t, true)
	blob := newConfig(t)
	d.feed(upgradeReq(1, blob))
	d.fire(sm.TimerPush) // the standby never answers: the push window closes
	first := d.upgradeReplies()
	if len(first) != 1 || first[0].AckedCount != 0 || d.exit == nil || d.exit.Code != 0 {
		t.Fatalf("first upgrade: %+v exit %+v", first, d.exit)
	}
	gen1 := d.node.ConfigGeneration()
	// The restarted primary: a new process on the same disk.
	n, _ := sm.NewNode(func() sm.Options {
		o := sm.DefaultOptions(0, []string{"n0", "n1"})
		o.EnableUpgrade = true
		return o
	}())
	d2 := &ioDriver{t: t, node: n, disk: d.disk}
	d2.feed(sm.Boot{Seed: 2})
	for i := 0; i < 5 && n.Role() != sm.RolePrimary; i++ {
		d2.fire(sm.TimerElection)
	}
	if n.ConfigGeneration() != gen1 {
		t.Fatalf("restarted with generation %d, want %d", n.ConfigGeneration(), gen1)
	}
	d2.feed(upgradeReq(2, blob))
	r := d2.upgradeReplies()
	if len(r) != 1 || r[0].Error != "" || n.ConfigGeneration() != gen1+1 || r[0].VersionTag == first[0].VersionTag {
		t.Fatalf("replayed upgrade: %+v generation %d", r, n.ConfigGeneration())
	}
}

// TestUpgradeConfigGated: off by default (seed §5.3), and a standby
// redirects (§10.12).
func TestUpgradeConfigGated(t *testing.T) {
	d, _ := upgradePrimary(t, false)
	d.feed(upgradeReq(1, newConfig(t)))
	if r := d.upgradeReplies(); len(r) != 1 || r[0].VersionTag != 0 || r[0].Error == "" {
		t.Fatalf("disabled upgrade: %+v", r)
	}
	n, _ := sm.NewNode(func() sm.Options {
		o := sm.DefaultOptions(1, []string{"n0", "n1"})
		o.EnableUpgrade = true
		return o
	}())
	s := &ioDriver{t: t, node: n, disk: simdisk.New()}
	s.feed(sm.Boot{Seed: 3})
	s.feed(sm.Recv{From: 0, Msg: sm.Msg{Type: sm.MsgHeartbeat, Role: sm.RolePrimary, Term: 1}})
	s.feed(upgradeReq(2, newConfig(t)))
	if r := s.upgradeReplies(); len(r) != 1 || r[0].Error != "Not primary — redirect to primary" || r[0].Primary != 0 {
		t.Fatalf("standby: %+v", r)
	}
}

// TestUpgradeOutcomes: every reply carries its outcome as a code, the one
// the daemon's status comes from (never the text): a refusal before any
// change, a save that failed, and an accepted upgrade abandoned when the
// primary steps down before its ACK.
func TestUpgradeOutcomes(t *testing.T) {
	last := func(d *ioDriver) sm.UpgradeReply {
		t.Helper()
		r := d.upgradeReplies()
		if len(r) == 0 {
			t.Fatal("no upgrade reply")
		}
		return r[len(r)-1]
	}
	check := func(label string, r sm.UpgradeReply, want sm.UpgradeOutcome) {
		t.Helper()
		if r.Outcome != want || (want == sm.UpgradeOK) != (r.Error == "") {
			t.Errorf("%s: outcome %d (%q), want %d", label, r.Outcome, r.Error, want)
		}
	}

	off, _ := upgradePrimary(t, false)
	off.feed(upgradeReq(1, newConfig(t)))
	check("disabled", last(off), sm.UpgradeDisabled)

	d, _ := upgradePrimary(t, true)
	bad := upgradeReq(2, newConfig(t))
	bad.SHA256[0] ^= 1
	d.feed(bad)
	check("sha-256 mismatch", last(d), sm.UpgradeInvalid)
	d.feed(upgradeReq(3, []byte{0xff, 0xff, 0xff}))
	check("undecodable", last(d), sm.UpgradeInvalid)
	d.feed(upgradeReq(4, newConfig(t))) // accepted: waits for n1's push ACK
	if n := len(d.upgradeReplies()); n != 2 {
		t.Fatalf("accepted upgrade answered before its push ACK: %+v", d.upgradeReplies())
	}
	d.feed(upgradeReq(5, newConfig(t)))
	check("second upgrade", last(d), sm.UpgradeBusy)
	// n1 is primary in a later term: n0 steps down with the upgrade saved
	// but unacknowledged.
	d.feed(sm.Recv{From: 1, Msg: sm.Msg{Type: sm.MsgHeartbeat, Role: sm.RolePrimary, Term: d.node.Term() + 1, Priority: 1}})
	if r := last(d); r.ID != 4 {
		t.Fatalf("stepping down did not answer the accepted upgrade: %+v", d.upgradeReplies())
	} else {
		check("stepped down", r, sm.UpgradeUnknown)
	}
	d.feed(upgradeReq(6, newConfig(t)))
	if r := last(d); r.Primary != 1 {
		t.Errorf("standby's refusal names primary %d, want 1", r.Primary)
	}
	check("standby", last(d), sm.UpgradeNotPrimary)

	ok, _ := upgradePrimary(t, true)
	ok.disk.SetRand(rand.New(rand.NewPCG(1, 2)))
	ok.disk.SetFaults(simdisk.Faults{WriteErr: 1})
	ok.feed(upgradeReq(7, newConfig(t)))
	check("save failed", last(ok), sm.UpgradeSaveFailed)
}
