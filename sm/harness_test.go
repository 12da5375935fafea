package sm_test

// A small deterministic harness that drives one or a few sm.Nodes without
// the simulator: real nodes on simdisk disks, a virtual clock, one FIFO
// queue of pending inputs, and "mock peers" the test plays by hand.
//
//   - FileOps and Computes run on the node's disk when emitted; their
//     completion is queued. Each lane (loop.LaneOf) keeps its issue order:
//     an effect parked by hold keeps the later ones of its lane behind it,
//     the other lane goes on.
//   - Sends to another harness node are queued as Recv (instant delivery,
//     dropped across a cut link or to a node that is not up). Sends to a
//     peer index without a harness node are recorded in h.outbox and, if a
//     mock is registered for it, answered by the mock's replies.
//   - Timers fire only when the test advances the clock (Advance*).
//   - Every Log and Exit effect is recorded per node.

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/host/loop"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
)

// epoch is the harness wall clock at virtual time 0 (2026-01-01T00:00:00Z).
const epoch = int64(1767225600) * int64(time.Second)

// maxSteps bounds one drain of the input queue (a livelock is a failure).
const maxSteps = 100000

// sent is one Send effect with its virtual send time.
type sent struct {
	At   time.Duration
	From int
	To   int
	Msg  sm.Msg
}

// mock answers the messages a node sends to a peer without a harness node.
type mock func(s sent) []sm.Msg

type queued struct {
	node int
	in   sm.Input
}

type armed struct {
	gen uint64
	at  time.Duration
}

// hnode is one harness-run process and everything it did.
type hnode struct {
	id      int
	opts    sm.Options
	n       *sm.Node
	disk    *simdisk.Disk
	up      bool // booted and not exited or killed
	timers  map[sm.TimerKind]armed
	logs    []sm.Log
	exits   []sm.Exit
	exitAt  time.Duration
	ops     []sm.FileOp // every FileOp executed, in order
	sent    []sent
	replies []sm.Reply // client replies, in order
	primary bool       // was ever RolePrimary
	sws     []sm.SwitchoverReply
	ups     []sm.UpgradeReply
}

type harness struct {
	t      testing.TB
	now    time.Duration
	peers  []string
	nodes  []*hnode // by peer index; nil = mock peer
	queue  []queued
	cut    map[[2]int]bool
	mocks  map[int]mock
	outbox []sent // messages to mock peers
	// onStep, if set, runs after every step (effects already executed).
	onStep func(i int, in sm.Input, effs []sm.Effect)
	// killBefore, if set, is asked before each FileOp is executed; true
	// kills the node there (kill -9: the op and later effects never run).
	killBefore func(i int, op sm.FileOp) bool
	// hold, if set, is asked before each FileOp or Compute is executed;
	// true parks it unexecuted (an executor still busy with it) until
	// releaseHeld, and with it every later one of its lane on that node (a
	// lane runs its effects in issue order, loop.Host).
	hold func(i int, e sm.Effect) bool
	held []heldOp
}

// heldOp is a FileOp or Compute parked by harness.hold.
type heldOp struct {
	node int
	e    sm.Effect
}

func newHarness(t testing.TB, peers int) *harness {
	h := &harness{t: t, cut: map[[2]int]bool{}, mocks: map[int]mock{}}
	for i := 0; i < peers; i++ {
		h.peers = append(h.peers, fmt.Sprintf("n%d", i))
	}
	h.nodes = make([]*hnode, peers)
	return h
}

// add makes peer i a harness node with default options (edited by mut)
// on disk (a fresh one if nil).
func (h *harness) add(i int, disk *simdisk.Disk, mut func(*sm.Options)) *hnode {
	h.t.Helper()
	o := sm.DefaultOptions(i, h.peers)
	if mut != nil {
		mut(&o)
	}
	if disk == nil {
		disk = simdisk.New()
	}
	hn := &hnode{id: i, opts: o, disk: disk}
	h.nodes[i] = hn
	h.newProcess(hn)
	return hn
}

func (h *harness) newProcess(hn *hnode) {
	h.t.Helper()
	n, err := sm.NewNode(hn.opts)
	if err != nil {
		h.t.Fatalf("NewNode(n%d): %v", hn.id, err)
	}
	hn.n, hn.up, hn.timers = n, false, map[sm.TimerKind]armed{}
	hn.logs, hn.exits, hn.ops, hn.sent, hn.primary = nil, nil, nil, nil, false
}

func (h *harness) node(i int) *hnode { return h.nodes[i] }

func (h *harness) clock() sm.Clock { return sm.Clock{Mono: h.now, Wall: epoch + int64(h.now)} }

// wall is the harness wall clock now, Unix ns.
func (h *harness) wall() int64 { return epoch + int64(h.now) }

// boot queues Boot for each node (seed = 1000+id) and drains the queue.
func (h *harness) boot(ids ...int) {
	for _, i := range ids {
		h.nodes[i].up = true
		h.enqueue(i, sm.Boot{Seed: uint64(1000 + i)})
	}
	h.run()
}

// restart replaces node i's process (same options, same disk; the records
// start afresh) and boots it.
func (h *harness) restart(i int) {
	hn := h.nodes[i]
	h.kill(i)
	h.newProcess(hn)
	h.boot(i)
}

// kill ends node i's process: its queued inputs, timers and parked ops
// are dropped (a crash drops what its executor had not yet run).
func (h *harness) kill(i int) {
	hn := h.nodes[i]
	hn.up = false
	hn.timers = map[sm.TimerKind]armed{}
	h.queue = slices.DeleteFunc(h.queue, func(q queued) bool { return q.node == i })
	h.held = slices.DeleteFunc(h.held, func(q heldOp) bool { return q.node == i })
}

func (h *harness) enqueue(i int, in sm.Input) { h.queue = append(h.queue, queued{i, in}) }

// inject queues a message from peer from to harness node to (not drained).
func (h *harness) inject(from, to int, m sm.Msg) { h.enqueue(to, sm.Recv{From: from, Msg: m}) }

// deliver queues a message and drains the queue.
func (h *harness) deliver(from, to int, m sm.Msg) {
	h.inject(from, to, m)
	h.run()
}

// run drains the input queue.
func (h *harness) run() { h.runUntil(nil) }

// runUntil steps queued inputs until done() holds after a step (true) or
// the queue is empty (false).
func (h *harness) runUntil(done func() bool) bool {
	h.t.Helper()
	for steps := 0; len(h.queue) > 0; steps++ {
		if steps > maxSteps {
			h.t.Fatalf("harness: livelock, more than %d steps without the queue draining; queue head: %s", maxSteps, h.describeQueue(8))
		}
		q := h.queue[0]
		h.queue = h.queue[1:]
		h.step(q.node, q.in)
		if done != nil && done() {
			return true
		}
	}
	return false
}

// describeQueue names the first k queued inputs (for livelock reports).
func (h *harness) describeQueue(k int) string {
	var parts []string
	for _, q := range h.queue[:min(k, len(h.queue))] {
		d := fmt.Sprintf("%T", q.in)
		if r, ok := q.in.(sm.Recv); ok {
			d = fmt.Sprintf("%s n%d->n%d", r.Msg.Type, r.From, q.node)
		}
		parts = append(parts, d)
	}
	return strings.Join(parts, ", ")
}

func (h *harness) step(i int, in sm.Input) {
	hn := h.nodes[i]
	if hn == nil || !hn.up {
		return
	}
	effs, _ := loop.Step(hn.n, h.clock(), in, harnessHost{h, hn})
	if hn.n.Role() == sm.RolePrimary {
		hn.primary = true
	}
	if h.onStep != nil {
		h.onStep(i, in, effs)
	}
}

// harnessHost is a harness node's loop.Host: file operations and Computes
// run on its disk when emitted (their completion is queued), messages go to the queue or
// a mock, timers wait for advance.
type harnessHost struct {
	h  *harness
	hn *hnode
}

// Proceed stops a node that died mid-step, and kills it before a FileOp
// killBefore names (kill -9: the op and later effects never run).
func (x harnessHost) Proceed(e sm.Effect) bool {
	if !x.hn.up {
		return false
	}
	if op, ok := e.(sm.FileOp); ok && x.h.killBefore != nil && x.h.killBefore(x.hn.id, op) {
		x.h.kill(x.hn.id)
		return false
	}
	return true
}

func (x harnessHost) File(op sm.FileOp) {
	x.hn.ops = append(x.hn.ops, op)
	x.h.issue(x.hn, op)
}

func (x harnessHost) Compute(c sm.Compute) { x.h.issue(x.hn, c) }

// issue executes a FileOp or Compute and queues its completion, unless
// hold parks it or an earlier one of its lane is parked.
func (h *harness) issue(hn *hnode, e sm.Effect) {
	if h.hold != nil && h.hold(hn.id, e) || h.laneHeld(hn.id, e) {
		h.held = append(h.held, heldOp{hn.id, e})
		return
	}
	h.exec(hn, e)
}

// exec runs e on hn's disk and queues its completion.
func (h *harness) exec(hn *hnode, e sm.Effect) {
	switch x := e.(type) {
	case sm.FileOp:
		r := hn.disk.Exec(x, h.wall())
		r.ID = x.ID
		h.enqueue(hn.id, r)
	case sm.Compute:
		r := hn.disk.Compute(x, h.wall())
		r.ID = x.ID
		h.enqueue(hn.id, r)
	}
}

// laneHeld reports whether node i has an effect of e's lane parked: e
// waits behind it.
func (h *harness) laneHeld(i int, e sm.Effect) bool {
	lane, _ := loop.LaneOf(e)
	for _, q := range h.held {
		if l, _ := loop.LaneOf(q.e); q.node == i && l == lane {
			return true
		}
	}
	return false
}

func (x harnessHost) Send(m sm.Send) {
	h, hn := x.h, x.hn
	s := sent{At: h.now, From: hn.id, To: m.To, Msg: m.Msg}
	hn.sent = append(hn.sent, s)
	if m.To < 0 || m.To >= len(h.nodes) {
		h.t.Errorf("n%d sent %s to unknown peer %d", hn.id, m.Msg.Type, m.To)
		return
	}
	if h.cut[[2]int{hn.id, m.To}] {
		return
	}
	if to := h.nodes[m.To]; to != nil {
		if to.up {
			h.inject(hn.id, m.To, m.Msg)
		}
		return
	}
	h.outbox = append(h.outbox, s)
	if mk := h.mocks[m.To]; mk != nil {
		for _, r := range mk(s) {
			h.inject(m.To, hn.id, r)
		}
	}
}

func (x harnessHost) SetTimer(t sm.SetTimer) {
	x.hn.timers[t.Kind] = armed{gen: t.Gen, at: x.h.now + t.After}
}

func (x harnessHost) CancelTimer(t sm.CancelTimer)   { delete(x.hn.timers, t.Kind) }
func (x harnessHost) Log(l sm.Log)                   { x.hn.logs = append(x.hn.logs, l) }
func (x harnessHost) Reply(r sm.Reply)               { x.hn.replies = append(x.hn.replies, r) }
func (x harnessHost) UpgradeReply(r sm.UpgradeReply) { x.hn.ups = append(x.hn.ups, r) }

func (x harnessHost) SwitchoverReply(r sm.SwitchoverReply) { x.hn.sws = append(x.hn.sws, r) }

func (x harnessHost) Exit(e sm.Exit) {
	x.hn.exits = append(x.hn.exits, e)
	x.hn.exitAt = x.h.now
	x.h.kill(x.hn.id)
}

func (x harnessHost) Unknown(e sm.Effect) { x.h.t.Errorf("n%d emitted unknown effect %T", x.hn.id, e) }

// releaseHeld executes the parked FileOps and Computes (outside any
// Step), each lane's in issue order, and queues their completions; it does
// not drain the queue.
func (h *harness) releaseHeld() {
	held := h.held
	h.held = nil
	for _, q := range held {
		if hn := h.nodes[q.node]; hn.up {
			h.exec(hn, q.e)
		}
	}
}

// nextTimer is the earliest armed timer due at or before limit.
func (h *harness) nextTimer(limit time.Duration) (node int, kind sm.TimerKind, at time.Duration, ok bool) {
	for _, hn := range h.nodes {
		if hn == nil || !hn.up {
			continue
		}
		for k, a := range hn.timers {
			if a.at > limit {
				continue
			}
			if !ok || a.at < at || a.at == at && (hn.id < node || hn.id == node && k < kind) {
				node, kind, at, ok = hn.id, k, a.at, true
			}
		}
	}
	return
}

// advance moves the clock forward by d, firing due timers in time order
// and draining the queue after each.
func (h *harness) advance(d time.Duration) { h.advanceUntil(d, nil) }

// advanceUntil is advance that stops as soon as done() holds (checked
// after each fired timer); it reports whether done() held.
func (h *harness) advanceUntil(d time.Duration, done func() bool) bool {
	h.t.Helper()
	end := h.now + d
	if h.runUntil(done) {
		return true
	}
	for {
		i, k, at, ok := h.nextTimer(end)
		if !ok {
			break
		}
		h.now = at
		gen := h.nodes[i].timers[k].gen
		delete(h.nodes[i].timers, k)
		h.enqueue(i, sm.TimerFired{Kind: k, Gen: gen})
		if h.runUntil(done) || done != nil && done() {
			return true
		}
	}
	h.now = end
	return false
}

// cutLink drops messages between a and b, both ways; heal restores all.
func (h *harness) cutLink(a, b int) { h.cut[[2]int{a, b}], h.cut[[2]int{b, a}] = true, true }
func (h *harness) heal()            { h.cut = map[[2]int]bool{} }

// --- per-node queries ---

func (hn *hnode) logsWithKey(key string) []sm.Log {
	var out []sm.Log
	for _, l := range hn.logs {
		if l.Key == key {
			out = append(out, l)
		}
	}
	return out
}

// hasLog reports whether the node logged key at level.
func (hn *hnode) hasLog(key string, level sm.Level) bool {
	for _, l := range hn.logsWithKey(key) {
		if l.Level == level {
			return true
		}
	}
	return false
}

func (hn *hnode) logDump() string {
	var b strings.Builder
	for _, l := range hn.logs {
		fmt.Fprintf(&b, "  %s %s: %s\n", l.Level, l.Key, l.Text)
	}
	return b.String()
}

// sentOf lists the messages of type typ the node sent.
func (hn *hnode) sentOf(typ sm.MsgType) []sent {
	var out []sent
	for _, s := range hn.sent {
		if s.Msg.Type == typ {
			out = append(out, s)
		}
	}
	return out
}

// opsOf lists the executed FileOps of kind k.
func (hn *hnode) opsOf(k sm.OpKind) []sm.FileOp {
	var out []sm.FileOp
	for _, op := range hn.ops {
		if op.Op == k {
			out = append(out, op)
		}
	}
	return out
}

// confOpsOf lists the FileOps of kind k on conf/ (not the HA term file).
func (hn *hnode) confOpsOf(k sm.OpKind) []sm.FileOp {
	var out []sm.FileOp
	for _, op := range hn.opsOf(k) {
		if strings.HasPrefix(op.Path, sm.ConfDir+"/") {
			out = append(out, op)
		}
	}
	return out
}

// outboxOf lists the messages of type typ sent to mock peers.
func (h *harness) outboxOf(typ sm.MsgType) []sent {
	var out []sent
	for _, s := range h.outbox {
		if s.Msg.Type == typ {
			out = append(out, s)
		}
	}
	return out
}

// --- configs and disks ---

// testConfig builds a valid ClusterConfig blob; distinct names give
// distinct blobs (and tags).
func testConfig(t testing.TB, name string, queues int) []byte {
	t.Helper()
	c := &schema.ClusterConfig{ConfigGeneration: 1, ClusterName: name, Port: 7000}
	for q := 0; q < queues; q++ {
		c.Queues = append(c.Queues, &schema.Queue{Id: uint32(q + 1), Name: fmt.Sprintf("q%d", q), VisibilityTimeoutS: 30, MaxAttempts: 5})
	}
	c.Hosts = []*schema.Host{{Name: "h0"}}
	b, err := schema.Encode(c)
	if err != nil {
		t.Fatalf("encode config: %v", err)
	}
	return b
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

// versionName is the versioned file name of blob (conf/ relative).
func versionName(blob []byte) string { return sm.VersionName(sha256Sum(blob)) }

// install provisions blob on disk as `xce-config install` would, durably,
// with file mtime mtime.
func install(t testing.TB, d *simdisk.Disk, blob []byte, mtime int64) {
	t.Helper()
	name := versionName(blob)
	for _, f := range []struct {
		path string
		data []byte
	}{{sm.ConfDir + "/" + name, blob}, {sm.PointerPath, sm.PointerContents(name)}} {
		if err := d.PutDurable(f.path, f.data, mtime); err != nil {
			t.Fatalf("install %s: %v", f.path, err)
		}
	}
}

// confFiles lists the names in conf/ of a file map (Files/DurableFiles).
func confFiles(files map[string][]byte) []string {
	var out []string
	for p := range files {
		if name, ok := strings.CutPrefix(p, sm.ConfDir+"/"); ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// --- mock primary ---

// mockPrimary plays peer `self` as a live primary: it answers probes and
// joins, and ReplConfig requests through serve (nil: never answers).
type mockPrimary struct {
	self  int
	term  uint64
	tag   uint64 // advertised config tag
	serve func(req sm.Msg) (sm.Msg, bool)
}

// msg is a message from the mock primary, carrying its view.
func (p *mockPrimary) msg(typ sm.MsgType, reqID uint64) sm.Msg {
	return sm.Msg{Type: typ, ReqID: reqID, Role: sm.RolePrimary, Term: p.term, Priority: p.self, ConfigTag: p.tag}
}

func (p *mockPrimary) respond(s sent) []sm.Msg {
	switch s.Msg.Type {
	case sm.MsgProbe:
		return []sm.Msg{p.msg(sm.MsgProbeReply, s.Msg.ReqID)}
	case sm.MsgJoin:
		return []sm.Msg{p.msg(sm.MsgJoinReply, s.Msg.ReqID)}
	case sm.MsgReplConfig:
		if p.serve != nil {
			if r, ok := p.serve(s.Msg); ok {
				r.Type, r.ReqID = sm.MsgReplConfigReply, s.Msg.ReqID
				r.Role, r.Term, r.Priority = sm.RolePrimary, p.term, p.self
				return []sm.Msg{r}
			}
		}
	}
	return nil
}

// serveBlob answers every ReplConfig like a correct primary holding blob.
func serveBlob(blob []byte) func(sm.Msg) (sm.Msg, bool) {
	sum := sha256Sum(blob)
	return func(req sm.Msg) (sm.Msg, bool) {
		if req.ConfigTag == sm.Tag(sum) {
			return sm.Msg{UpToDate: true}, true
		}
		return sm.Msg{ConfigTag: sm.Tag(sum), SHA256: sum[:], Bytes: blob}, true
	}
}
