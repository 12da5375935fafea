package sm_test

// Golden interaction tests in the style of etcd-raft's: each file under
// testdata/golden is a script of inputs to a small cluster run by the
// harness (harness_test.go), with every step's input and effects and the
// nodes' printed state (sm.Node.Describe: each concern, then the pending
// operations and what resumes each) as the expected output. A change of
// behaviour shows as a diff; `go test ./sm -run TestGolden -rewrite`
// rewrites the files, and the diff is then read like code.
//
// Commands:
//
//	cluster nodes=N [max-wal-records=N] [retain=N] [sync-buffer=N]   a cluster, its config installed on every disk
//	boot I... [steps=N]                              boot the nodes, run until the queue is empty (or N steps)
//	stabilize                                        run until the queue is empty
//	advance D                                        move the clock by D, firing timers
//	submit node=I [count=N] [payload=P] [steps=N]    N enqueues to node I, run as boot does
//	kill I / restart I / cut I J / heal              processes and links
//	state I...                                       the nodes' Describe
//
// Every command but state prints the steps it ran, one line each:
// "n<i> <input>: <effect>; <effect>" (with quiet, only how many).

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/xce-hpc/xce/sm"
)

func TestGolden(t *testing.T) {
	datadriven.Walk(t, "testdata/golden", func(t *testing.T, path string) {
		g := &golden{t: t}
		datadriven.RunTest(t, path, g.run)
	})
}

type golden struct {
	t     *testing.T
	h     *harness
	out   strings.Builder
	ids   uint64
	quiet bool // the command prints how many steps it ran, not each
	steps int
}

func (g *golden) run(t *testing.T, d *datadriven.TestData) string {
	g.out.Reset()
	g.quiet, g.steps = d.HasArg("quiet"), 0
	switch d.Cmd {
	case "cluster":
		g.cluster(t, d)
		return "ok\n"
	case "boot":
		for _, i := range g.nodes(t, d) {
			g.h.nodes[i].up = true
			g.h.enqueue(i, sm.Boot{Seed: uint64(1000 + i)})
		}
		g.drain(t, d)
	case "stabilize":
		g.h.run()
	case "advance":
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			t.Fatalf("%s: advance: %v", d.Pos, err)
		}
		g.h.advance(dur)
	case "submit":
		var node, count int
		count = 1
		payload := "x"
		d.ScanArgs(t, "node", &node)
		d.MaybeScanArgs(t, "count", &count)
		d.MaybeScanArgs(t, "payload", &payload)
		for k := 0; k < count; k++ {
			g.ids++
			g.h.enqueue(node, sm.ClientOp{ID: g.ids, Req: sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte(payload)}})
		}
		g.drain(t, d)
	case "kill":
		for _, i := range g.nodes(t, d) {
			g.h.kill(i)
		}
	case "restart":
		for _, i := range g.nodes(t, d) {
			g.h.restart(i)
		}
	case "cut":
		ns := g.nodes(t, d)
		g.h.cutLink(ns[0], ns[1])
		return "ok\n"
	case "heal":
		g.h.heal()
		return "ok\n"
	case "state":
		for _, i := range g.nodes(t, d) {
			hn := g.h.nodes[i]
			if !hn.up {
				fmt.Fprintf(&g.out, "n%d: down\n", i)
				continue
			}
			fmt.Fprintf(&g.out, "n%d:\n", i)
			for _, line := range strings.Split(strings.TrimRight(hn.n.Describe(), "\n"), "\n") {
				g.out.WriteString("  " + line + "\n")
			}
		}
		return g.out.String()
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	if g.quiet {
		return fmt.Sprintf("(%d steps)\n", g.steps)
	}
	if g.out.Len() == 0 {
		return "(no steps)\n"
	}
	return g.out.String()
}

// drain runs the queued inputs: all of them, or the first steps=N (the
// rest stay queued for stabilize, so state can show work in flight).
func (g *golden) drain(t *testing.T, d *datadriven.TestData) {
	if !d.HasArg("steps") {
		g.h.run()
		return
	}
	var steps int
	d.ScanArgs(t, "steps", &steps)
	for k := 0; k < steps && len(g.h.queue) > 0; k++ {
		q := g.h.queue[0]
		g.h.queue = g.h.queue[1:]
		g.h.step(q.node, q.in)
	}
}

// nodes is the command's bare arguments, as node indexes.
func (g *golden) nodes(t *testing.T, d *datadriven.TestData) []int {
	var out []int
	for _, a := range d.CmdArgs {
		if len(a.Vals) > 0 || a.Key == "quiet" {
			continue
		}
		i, err := strconv.Atoi(a.Key)
		if err != nil || g.h == nil || i < 0 || i >= len(g.h.nodes) {
			t.Fatalf("%s: %q is not a node of the cluster", d.Pos, a.Key)
		}
		out = append(out, i)
	}
	return out
}

func (g *golden) cluster(t *testing.T, d *datadriven.TestData) {
	var nodes int
	d.ScanArgs(t, "nodes", &nodes)
	maxWAL, retain, syncBuf := 0, -1, -1
	d.MaybeScanArgs(t, "max-wal-records", &maxWAL)
	d.MaybeScanArgs(t, "retain", &retain)
	d.MaybeScanArgs(t, "sync-buffer", &syncBuf)
	g.h = newHarness(t, nodes)
	blob := testConfig(t, "golden", 1)
	for i := 0; i < nodes; i++ {
		hn := g.h.add(i, nil, func(o *sm.Options) {
			if maxWAL > 0 {
				o.MaxWALRecords = maxWAL
			}
			if retain >= 0 {
				o.RetainWALRecords = retain
			}
			if syncBuf >= 0 {
				o.SyncBufferBytes = syncBuf
			}
		})
		install(t, hn.disk, blob, epoch)
	}
	g.h.onStep = g.step
}

// step prints one step: the input and the effects it gave.
func (g *golden) step(i int, in sm.Input, effs []sm.Effect) {
	g.steps++
	if g.quiet {
		return
	}
	fmt.Fprintf(&g.out, "n%d %s:", i, describeInput(in))
	for k, e := range effs {
		if k > 0 {
			g.out.WriteByte(';')
		}
		g.out.WriteString(" " + describeEffect(e))
	}
	g.out.WriteByte('\n')
}

func describeInput(in sm.Input) string {
	switch x := in.(type) {
	case sm.Boot:
		return "boot"
	case sm.TimerFired:
		return "timer " + x.Kind.String()
	case sm.Recv:
		return fmt.Sprintf("<- n%d %s", x.From, describeMsg(x.Msg))
	case sm.IODone:
		return fmt.Sprintf("io#%d %s", x.ID, x.Err)
	case sm.Computed:
		return fmt.Sprintf("compute#%d %s", x.ID, x.Err)
	case sm.ClientOp:
		return fmt.Sprintf("client #%d %s %s", x.ID, x.Req.Kind, x.Req.Queue)
	}
	return fmt.Sprintf("%T", in)
}

func describeMsg(m sm.Msg) string {
	s := fmt.Sprintf("%s %s term=%d", m.Type, m.Role, m.Term)
	switch {
	case m.ReqID == 0:
	case m.Type == sm.MsgReplSnapshot || m.Type == sm.MsgReplRecords || m.Type == sm.MsgReplAck:
		s += " sync=" + sm.SyncName(m.ReqID)
	default:
		s += fmt.Sprintf(" req=%d", m.ReqID)
	}
	if m.WALPos != 0 || m.LogTerm != 0 {
		s += fmt.Sprintf(" log=%d/%d", m.LogTerm, m.WALPos)
	}
	if m.PrevLSN != 0 {
		s += fmt.Sprintf(" prev=%d/%d", m.PrevTerm, m.PrevLSN)
	}
	if len(m.Bytes) > 0 {
		s += fmt.Sprintf(" bytes=%d", len(m.Bytes))
	}
	return s
}

func describeEffect(e sm.Effect) string {
	switch x := e.(type) {
	case sm.FileOp:
		s := fmt.Sprintf("io#%d %s %s", x.ID, x.Op, x.Path)
		if x.To != "" {
			s += " -> " + x.To
		}
		return s
	case sm.Compute:
		s := fmt.Sprintf("compute#%d %s", x.ID, x.Kind)
		if x.Path != "" {
			s += " " + x.Path
		}
		return s
	case sm.Send:
		return fmt.Sprintf("-> n%d %s", x.To, describeMsg(x.Msg))
	case sm.SetTimer:
		return fmt.Sprintf("set %s %v", x.Kind, x.After)
	case sm.CancelTimer:
		return "cancel " + x.Kind.String()
	case sm.Log:
		return fmt.Sprintf("%s %s", x.Level, x.Key)
	case sm.Reply:
		return fmt.Sprintf("reply #%d status=%d lsn=%d", x.ID, x.Status, x.LSN)
	case sm.Exit:
		return fmt.Sprintf("exit %d", x.Code)
	}
	return fmt.Sprintf("%T", e)
}
