package sim

import (
	"testing"
	"time"

	"github.com/xce-hpc/xce/host/loop"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
)

// ioDriver runs one node against one disk synchronously: every FileOp is
// executed at once and its completion fed back in order. Other effects
// are collected for the test.
type ioDriver struct {
	t         *testing.T
	node      *sm.Node
	disk      *simdisk.Disk
	now       time.Duration
	sent      []sm.Send
	logs      []sm.Log
	exit      *sm.Exit
	replies   []sm.Reply
	upReplies []sm.UpgradeReply
	timers    map[sm.TimerKind]sm.SetTimer // the armed timers
	onOp      func(op sm.FileOp)           // called after each FileOp executes
	queue     []sm.Input
}

func (d *ioDriver) clock() sm.Clock { return sm.Clock{Mono: d.now, Wall: epoch + int64(d.now)} }

func (d *ioDriver) feed(in sm.Input) {
	d.queue = append(d.queue, in)
	for len(d.queue) > 0 {
		in := d.queue[0]
		d.queue = d.queue[1:]
		loop.Step(d.node, d.clock(), in, d)
		if len(d.queue) == 0 {
			// Nothing else comes: a group commit's wait runs out
			// (sm/groupcommit.go), its time passing.
			if x, ok := d.take(sm.TimerGroupCommit); ok {
				d.now += x.After
				d.queue = append(d.queue, sm.TimerFired{Kind: x.Kind, Gen: x.Gen})
			}
		}
	}
}

// The ioDriver is its node's loop.Host: each FileOp and Compute runs on
// the disk when emitted (then onOp sees the disk after a FileOp), its
// completion queued. Every lane (loop.LaneOf) is so run at once:
// completions come in issue order, which is each lane's issue order too,
// one of the orders loop.Host allows.
func (d *ioDriver) File(x sm.FileOp) {
	res := d.disk.Exec(x, epoch+int64(d.now))
	res.ID = x.ID
	if d.onOp != nil {
		d.onOp(x)
	}
	d.queue = append(d.queue, res)
}

func (d *ioDriver) Compute(x sm.Compute) {
	res := d.disk.Compute(x, epoch+int64(d.now))
	res.ID = x.ID
	d.queue = append(d.queue, res)
}

func (d *ioDriver) Send(x sm.Send)                 { d.sent = append(d.sent, x) }
func (d *ioDriver) Log(x sm.Log)                   { d.logs = append(d.logs, x) }
func (d *ioDriver) Exit(x sm.Exit)                 { d.exit = &x }
func (d *ioDriver) Reply(x sm.Reply)               { d.replies = append(d.replies, x) }
func (d *ioDriver) UpgradeReply(x sm.UpgradeReply) { d.upReplies = append(d.upReplies, x) }

func (d *ioDriver) SwitchoverReply(sm.SwitchoverReply) {}
func (d *ioDriver) CancelTimer(x sm.CancelTimer)       { delete(d.timers, x.Kind) }
func (d *ioDriver) Unknown(e sm.Effect)                { d.t.Errorf("unknown effect %T", e) }

func (d *ioDriver) SetTimer(x sm.SetTimer) {
	if d.timers == nil {
		d.timers = map[sm.TimerKind]sm.SetTimer{}
	}
	d.timers[x.Kind] = x
}

// take disarms timer kind, returning it if it was armed.
func (d *ioDriver) take(kind sm.TimerKind) (sm.SetTimer, bool) {
	x, ok := d.timers[kind]
	delete(d.timers, kind)
	return x, ok
}

// fire delivers timer kind if it is armed.
func (d *ioDriver) fire(kind sm.TimerKind) bool {
	x, ok := d.take(kind)
	if ok {
		d.feed(sm.TimerFired{Kind: kind, Gen: x.Gen})
	}
	return ok
}

func newDriver(t *testing.T, self int, disk *simdisk.Disk) *ioDriver {
	n, err := sm.NewNode(sm.DefaultOptions(self, []string{"n0", "n1", "n2"}))
	if err != nil {
		t.Fatal(err)
	}
	return &ioDriver{t: t, node: n, disk: disk}
}

// TestCrashSaveEnumeration drives a standby through a real config fetch
// and save (seed 002 §3.2 with our directory fsyncs, then the trim) and,
// after every file operation of it, enumerates every dependency-closed
// crash state of the disk (simdisk.CrashStates) and boots a fresh node on
// each: S2 holds in all of them — the node loads the old or the new config,
// complete and verifying, never a torn one, and loses none that was
// durable; once the save completed, only the new one.
func TestCrashSaveEnumeration(t *testing.T) {
	v1, v2, v3 := sampleConfig(1, 3), sampleConfig(2, 40), sampleConfig(3, 300)
	name := func(b []byte) string { return sm.VersionName(sha256Sum(b)) }
	cases := []struct {
		label    string
		prior    [][]byte // provisioned in order; the last is current
		allowNil bool     // no durable config before the save
	}{
		{"fresh disk", nil, true},
		{"one old version", [][]byte{v1}, false},
		{"two old versions (trim removes one)", [][]byte{v1, v2}, false},
	}
	total, totalPoints := 0, 0
	for _, c := range cases {
		disk := simdisk.New()
		allowed := map[string]bool{name(v3): true}
		for i, b := range c.prior {
			mustProvision(t, disk, b, epoch-int64(time.Duration(len(c.prior)-i)*time.Hour))
		}
		if n := len(c.prior); n > 0 {
			allowed[name(c.prior[n-1])] = true
		}
		states, points := checkSaveCrashStates(t, disk, v3, func(loaded string, savedDone bool) string {
			switch {
			case loaded == "" && !(c.allowNil && !savedDone):
				return "no config loaded"
			case loaded != "" && !allowed[loaded]:
				return "loaded unexpected " + loaded
			case savedDone && loaded != name(v3):
				return "save completed but boot found " + loaded
			}
			return ""
		})
		t.Logf("%s: %d crash states checked across %d crash points", c.label, states, points)
		total += states
		totalPoints += points
	}
	t.Logf("S2 held in all %d crash states (%d crash points)", total, totalPoints)
	if total < 60 || totalPoints < 30 {
		t.Fatalf("enumeration too small: %d states, %d points", total, totalPoints)
	}
}

// checkSaveCrashStates runs the fetch+save on a copy of disk and checks
// check(loadedName, saveCompleted) on a boot from every crash state after
// every file operation; it returns the counts.
func checkSaveCrashStates(t *testing.T, disk *simdisk.Disk, blob []byte, check func(string, bool) string) (states, points int) {
	t.Helper()
	d := newDriver(t, 1, disk.Clone())
	d.feed(sm.Boot{Seed: 7})
	if d.node.Role() != sm.RoleCandidate {
		t.Fatalf("node did not reach candidate after boot: %s", d.node.Role())
	}
	saved := false
	d.onOp = func(op sm.FileOp) {
		points++
		for _, st := range d.disk.CrashStates() {
			states++
			b := newDriver(t, 1, st)
			b.feed(sm.Boot{Seed: 9})
			_, name, _ := b.node.Config()
			if msg := check(name, saved); msg != "" {
				t.Fatalf("S2 violated after %s %s (crash point %d): %s\ndisk:\n%s", op.Op, op.Path, points, msg, st)
			}
		}
	}
	// A primary at n0 answers: probe reply, join reply, config reply.
	primary := sm.Msg{Role: sm.RolePrimary, Term: 1, Priority: 0}
	m := primary
	m.Type = sm.MsgProbeReply
	d.feed(sm.Recv{From: 0, Msg: m})
	join := lastSent(t, d, sm.MsgJoin)
	m = primary
	m.Type, m.ReqID = sm.MsgJoinReply, join.ReqID
	d.feed(sm.Recv{From: 0, Msg: m})
	req := lastSent(t, d, sm.MsgReplConfig)
	sum := sha256Sum(blob)
	m = primary
	m.Type, m.ReqID, m.ConfigTag, m.SHA256, m.Bytes = sm.MsgReplConfigReply, req.ReqID, sm.Tag(sum), sum[:], blob
	// Mark completion when the node reports the save durable.
	d.onOp = wrapSaved(d, &saved, d.onOp)
	d.feed(sm.Recv{From: 0, Msg: m})
	if !saved {
		t.Fatalf("save never completed; logs: %v", d.logs)
	}
	return states, points
}

// wrapSaved flips *saved once the node has logged conf.saved.
func wrapSaved(d *ioDriver, saved *bool, inner func(sm.FileOp)) func(sm.FileOp) {
	return func(op sm.FileOp) {
		for _, l := range d.logs {
			if l.Key == "conf.saved" {
				*saved = true
			}
		}
		inner(op)
	}
}

func lastSent(t *testing.T, d *ioDriver, typ sm.MsgType) sm.Msg {
	t.Helper()
	for i := len(d.sent) - 1; i >= 0; i-- {
		if d.sent[i].Msg.Type == typ {
			return d.sent[i].Msg
		}
	}
	t.Fatalf("node sent no %s", typ)
	return sm.Msg{}
}

// TestInstallMode: Boot{Install} saves the blob with the standby's save
// sequence, trims, and exits 0; an invalid blob exits 1 and leaves conf/
// untouched.
func TestInstallMode(t *testing.T) {
	v1, v2 := sampleConfig(1, 3), sampleConfig(2, 4)
	disk := simdisk.New()
	mustProvision(t, disk, v1, epoch)
	d := newDriver(t, 0, disk)
	d.feed(sm.Boot{Install: v2})
	if d.exit == nil || d.exit.Code != 0 {
		t.Fatalf("install: want exit 0, got %+v; logs %v", d.exit, d.logs)
	}
	if got := validConfigOn(disk.DurableFiles()); got != refName(sha256Sum(v2)) {
		t.Fatalf("durable conf/current names %q, want the installed config", got)
	}
	bad := newDriver(t, 0, disk)
	bad.feed(sm.Boot{Install: []byte("not a config")})
	if bad.exit == nil || bad.exit.Code != 1 {
		t.Fatalf("invalid install: want exit 1, got %+v", bad.exit)
	}
	if got := validConfigOn(disk.DurableFiles()); got != refName(sha256Sum(v2)) {
		t.Fatalf("invalid install changed conf/current to %q", got)
	}
}

// mustProvision installs a config on a test disk or fails the test.
func mustProvision(t testing.TB, d *simdisk.Disk, blob []byte, mtime int64) {
	t.Helper()
	if err := provision(d, blob, mtime); err != nil {
		t.Fatal(err)
	}
}
