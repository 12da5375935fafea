package clitool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/transport/fakenodes"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

type fakeCluster struct {
	nodes     []*fakenodes.Node
	peersFlag string
	certDir   string
}

// startFakeCluster serves every node whose up[i] is true on loopback; the
// others' addresses refuse connections. Every node answers "starting"
// until Set.
func startFakeCluster(t *testing.T, up ...bool) *fakeCluster {
	t.Helper()
	c := fakenodes.Start(t, up...)
	return &fakeCluster{nodes: c.Nodes, peersFlag: c.Peers, certDir: c.CertDir}
}

// run runs xcecli with the cluster's connection flags.
func (fc *fakeCluster) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := NewCommand(context.Background(), &out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(args, "--peers", fc.peersFlag, "--cert", filepath.Join(fc.certDir, "admin.crt"),
		"--key", filepath.Join(fc.certDir, "admin.key"), "--ca", filepath.Join(fc.certDir, "ca.crt"), "--timeout", "3s",
		// A hedge of 750 ms: a slow handshake to n0 on a loaded machine
		// does not make the client dial the others too (the tests assert
		// which nodes were asked).
		"--connect-timeout", "3s"))
	err := cmd.Execute()
	return out.String(), err
}

func standby(primary int) func(*wire.Request) *wire.Reply {
	return func(req *wire.Request) *wire.Reply {
		if req.Job == nil {
			return &wire.Reply{Status: sm.StatusEINVAL, Error: "unsupported request"}
		}
		return &wire.Reply{Status: sm.StatusEAGAIN, Error: "Not primary — redirect to primary", NotPrimary: true,
			Job: &sm.Reply{Primary: primary}}
	}
}

func jobAnswer(rep *sm.Reply) func(*wire.Request) *wire.Reply {
	return func(*wire.Request) *wire.Reply {
		return &wire.Reply{Job: rep}
	}
}

func TestInProcessPrimaryFollowing(t *testing.T) {
	fc := startFakeCluster(t, true, true, true)
	n0, n1, n2 := fc.nodes[0], fc.nodes[1], fc.nodes[2]

	// n0 redirects to n2 (index 2): n1 is never asked.
	n0.Set(standby(2))
	n1.Set(standby(2))
	claimed := queue.Job{ID: 5, Queue: "batch", State: queue.Processing, Attempts: 1, Claims: 2, Claim: queue.ClaimStamp{Term: 1, LSN: 9},
		Host: "node001", ClaimedAt: 1767225600, ClaimExpiresAt: 1767225900, Stamps: queue.Stamps{MaxAttempts: 3, VisibilityTimeoutS: 300}}
	n2.Set(jobAnswer(&sm.Reply{OK: true, Jobs: []queue.Job{claimed}}))
	out, err := fc.run(t, "job", "claim", "--queue", "batch", "--host", "node001", "--max", "4")
	if err != nil {
		t.Fatalf("claim: %v\n%s", err, out)
	}
	if len(n1.Requests()) != 0 || len(n0.Requests()) != 1 || len(n2.Requests()) != 1 {
		t.Fatalf("requests: n0 %d n1 %d n2 %d", len(n0.Requests()), len(n1.Requests()), len(n2.Requests()))
	}
	got := n2.Requests()[0].Job
	if got.Kind != sm.JobClaim || got.Queue != "batch" || got.Host != "node001" || got.Max != 4 {
		t.Fatalf("primary got %v", got)
	}
	checkTable(t, out, [][]string{
		{"HANDLE", "ID", "QUEUE", "STATE", "ATTEMPTS/MAX", "PRIORITY", "HOST", "CLAIMED_AT", "CLAIM_EXPIRES", "LAST_ERROR"},
		{"5:2:1.9", "5", "batch", "processing", "1/3", "0", "node001", "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z", "-"},
	})

	// JSON output of the same.
	out, err = fc.run(t, "job", "claim", "--queue", "batch", "--host", "node001", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var views []JobView
	if err := json.Unmarshal([]byte(out), &views); err != nil || len(views) != 1 || views[0].Handle != "5:2:1.9" {
		t.Fatalf("json claim: %v %s", err, out)
	}

	// A claim that waits and carries acks: one CLAIM with both; the acks'
	// outcomes first, then the jobs; a refused ack is ErrRefused.
	n2.Set(jobAnswer(&sm.Reply{OK: true, OKs: []bool{true, false}, Jobs: []queue.Job{claimed}}))
	out, err = fc.run(t, "job", "claim", "--queue", "batch", "--host", "node001", "--wait", "2s", "--ack", "3:1:1.7", "--ack", "4:1:1.7")
	if !errors.Is(err, ErrRefused) || !strings.HasPrefix(out, "3:1:1.7 ok\n4:1:1.7 refused\nHANDLE") || !strings.Contains(out, "5:2:1.9") {
		t.Fatalf("claim with acks: %v %q", err, out)
	}
	if r := n2.Requests()[0].Job; r.Kind != sm.JobClaim || r.Wait != 2*time.Second || len(r.Handles) != 2 || FormatHandle(sm.WalHandle(r.Handles[1])) != "4:1:1.7" {
		t.Fatalf("claim with acks sent %v", r)
	}
	n2.Set(jobAnswer(&sm.Reply{OK: true, OKs: []bool{true}, Jobs: []queue.Job{claimed}}))
	out, err = fc.run(t, "job", "claim", "--queue", "batch", "--host", "node001", "--ack", "3:1:1.7", "-o", "json")
	var cv ClaimView
	if err != nil || json.Unmarshal([]byte(out), &cv) != nil || !cv.Acks.OK || len(cv.Acks.Results) != 1 || len(cv.Jobs) != 1 || cv.Jobs[0].Handle != "5:2:1.9" {
		t.Fatalf("json claim with acks: %v %s", err, out)
	}

	// Ack of one handle: ACK; "ok", exit status 0.
	n2.Set(jobAnswer(&sm.Reply{OK: true}))
	out, err = fc.run(t, "job", "ack", "5:2:1.9")
	if err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("ack: %v %q", err, out)
	}
	if r := n2.Requests()[0].Job; r.Kind != sm.JobAck || FormatHandle(sm.WalHandle(r.Handle)) != "5:2:1.9" {
		t.Fatalf("ack request %v", r)
	}

	// A refusal is an answer: ErrRefused (exit status 1) saying why.
	n2.Set(jobAnswer(&sm.Reply{OK: false}))
	out, err = fc.run(t, "job", "heartbeat", "5:1:1.9")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "handle refused") || out != "" {
		t.Fatalf("refused heartbeat: %v %q", err, out)
	}

	// Ack of several: ACK_BATCH, one line each.
	n2.Set(jobAnswer(&sm.Reply{OKs: []bool{true, false}}))
	out, err = fc.run(t, "job", "ack", "5:2:1.9", "6:1:1.9")
	if !errors.Is(err, ErrRefused) || out != "5:2:1.9 ok\n6:1:1.9 refused\n" {
		t.Fatalf("ack batch: %v %q", err, out)
	}
	if r := n2.Requests()[0].Job; r.Kind != sm.JobAckBatch || len(r.Handles) != 2 {
		t.Fatalf("ack batch request %v", r)
	}

	// A batch submit: its jobs by id, in order (the node names them by id
	// alone).
	n2.Set(jobAnswer(&sm.Reply{OK: true, IDs: []uint64{4, 5, 6}}))
	out, err = fc.run(t, "job", "submit", "--queue", "batch", "--payload", "x", "--count", "3")
	if err != nil || out != "submitted job 4 to batch\nsubmitted job 5 to batch\nsubmitted job 6 to batch\n" {
		t.Fatalf("batch submit: %v %q", err, out)
	}
	out, err = fc.run(t, "job", "submit", "--queue", "batch", "--payload", "x", "--count", "3", "-o", "json")
	var sv SubmittedView
	if err != nil || json.Unmarshal([]byte(out), &sv) != nil || sv.Queue != "batch" || !slices.Equal(sv.IDs, []uint64{4, 5, 6}) {
		t.Fatalf("batch submit, json: %v %q", err, out)
	}

	// The node's own error: its text, non-nil error.
	n2.Set(func(*wire.Request) *wire.Reply {
		return &wire.Reply{Status: sm.StatusEINVAL, Error: "Cannot submit jobs to 'lost_and_found' — this is an internal recovery queue."}
	})
	_, err = fc.run(t, "job", "submit", "--queue", "lost_and_found", "--payload", "x")
	var ne *client.NodeError
	if !errors.As(err, &ne) || ne.Node != "n2" || !strings.Contains(err.Error(), "internal recovery queue") {
		t.Fatalf("node error: %v", err)
	}

	// A primary that stepped down with the request waiting: not retried.
	n0.Set(func(*wire.Request) *wire.Reply {
		return &wire.Reply{Status: sm.StatusOutcomeUnknown, Error: "stepped down: outcome unknown, check before retrying against the primary"}
	})
	n2.Set(jobAnswer(&sm.Reply{OK: true}))
	_, err = fc.run(t, "job", "submit", "--queue", "batch")
	if !errors.Is(err, client.ErrOutcomeUnknown) || len(n1.Requests())+len(n2.Requests()) != 0 {
		t.Fatalf("unknown outcome: %v (n1 %d, n2 %d requests)", err, len(n1.Requests()), len(n2.Requests()))
	}
}

func TestInProcessDownPeersAndListings(t *testing.T) {
	fc := startFakeCluster(t, false, true, true)
	n1, n2 := fc.nodes[1], fc.nodes[2]

	// n0 down, n1 does not know the primary: n2 is tried next.
	n1.Set(standby(-1))
	dead := queue.Job{ID: 9, Queue: "gpu", State: queue.Dead, Attempts: 2, Claims: 2,
		LastError: "max attempts exceeded", Stamps: queue.Stamps{MaxAttempts: 2}}
	n2.Set(jobAnswer(&sm.Reply{OK: true, Jobs: []queue.Job{dead}}))
	out, err := fc.run(t, "job", "get", "9", "-o", "json")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	var v JobView
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.ID != 9 || v.State != "dead" || v.LastError != "max attempts exceeded" {
		t.Fatalf("get json: %v %s", err, out)
	}
	if r := n2.Requests()[0].Job; r.Kind != sm.JobGet || r.ID != 9 {
		t.Fatalf("get request %v", r)
	}
	n2.Set(jobAnswer(&sm.Reply{OK: false}))
	if _, err := fc.run(t, "job", "get", "10"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("get missing: %v", err)
	}

	// Nobody primary: the error names every peer tried.
	n2.Set(standby(-1))
	_, err = fc.run(t, "job", "sweep")
	if !errors.Is(err, client.ErrNoPrimary) || !strings.Contains(err.Error(), "n0: ") || !strings.Contains(err.Error(), "n2: Not primary") {
		t.Fatalf("no primary: %v", err)
	}

	// queue list / host list: the config from the first peer that has one.
	blob, err := configtool.EncodeFile("../../../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n1.Set(func(*wire.Request) *wire.Reply {
		return &wire.Reply{Status: sm.StatusEAGAIN, Error: "no config loaded yet"}
	})
	n2.Set(func(req *wire.Request) *wire.Reply {
		if !req.Config {
			return &wire.Reply{Status: sm.StatusEINVAL, Error: "unexpected"}
		}
		return &wire.Reply{Config: &schema.ConfigReply{Blob: blob, VersionTag: sm.TagOf(blob)}}
	})
	out, err = fc.run(t, "queue", "list")
	if err != nil {
		t.Fatalf("queue list: %v", err)
	}
	checkTable(t, out, [][]string{
		{"ID", "NAME", "VISIBILITY", "MAX_ATTEMPTS", "BACKOFF", "RETENTION", "PRIORITY"},
		{"1", "batch", "5m", "3", "10s", "7d", "0"},
		{"2", "gpu", "10m", "2", "30s", "7d", "10"},
		{"-", "lost_and_found", "-", "-", "-", "-", "-", "(recovery)"},
	})
	out, err = fc.run(t, "host", "list", "-o", "json")
	if err != nil {
		t.Fatalf("host list: %v", err)
	}
	var hosts []HostRow
	if err := json.Unmarshal([]byte(out), &hosts); err != nil || len(hosts) != 3 || hosts[0].Name != "node001" ||
		hosts[0].Resources[0] != "a100" || hosts[2].Name != "lost_and_found" || !hosts[2].Recovery {
		t.Fatalf("host list json: %v %s", err, out)
	}
}

// hungAddr is a listener that accepts TCP and never answers (a SIGSTOPped
// controller: its kernel still completes the handshake).
func hungAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never read
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// xcecli status asks every peer at once: the rows keep --peers order, and
// a hung peer costs --connect-timeout once, not a timeout per row.
func TestStatusesPastHungPeer(t *testing.T) {
	fc := startFakeCluster(t, true, true)
	for i, n := range fc.nodes {
		n.Set(func(*wire.Request) *wire.Reply {
			return &wire.Reply{StatusReply: &schema.StatusReply{
				Name: n.Name, Priority: uint32(i + 1), Role: "standby", Primary: -1}}
		})
	}
	mat, err := tlsconf.Load(filepath.Join(fc.certDir, "admin.crt"), filepath.Join(fc.certDir, "admin.key"), filepath.Join(fc.certDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rows, err := statuses(context.Background(), "hung="+hungAddr(t)+","+fc.peersFlag, mat, 5*time.Second, 400*time.Millisecond)
	d := time.Since(start)
	if err != nil || len(rows) != 3 {
		t.Fatalf("rows %+v, err %v", rows, err)
	}
	if rows[0].Name != "hung" || rows[0].Up || rows[0].Error == "" || !rows[1].Up || rows[1].Name != "n0" || !rows[2].Up || rows[2].Name != "n1" {
		t.Fatalf("rows %+v", rows)
	}
	if d > 2500*time.Millisecond { // was 5 s (the timeout) for the hung row alone
		t.Fatalf("status with a hung peer took %v", d)
	}
}

// xcecli job commands reach the primary past a first peer that accepts
// TCP and never answers (a SIGSTOPped controller) within the connect
// timeout, not the request timeout; the mutation was never sent to the
// hung peer, so its outcome is known.
func TestInProcessHungFirstPeer(t *testing.T) {
	fc := startFakeCluster(t, true, true)
	fc.nodes[0].Set(jobAnswer(&sm.Reply{OK: true, Jobs: []queue.Job{{ID: 1, Queue: "batch"}}}))
	fc.nodes[1].Set(standby(1))
	var out bytes.Buffer
	cmd := NewCommand(context.Background(), &out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"job", "submit", "--queue", "batch", "--peers", "hung=" + hungAddr(t) + "," + fc.peersFlag,
		"--cert", filepath.Join(fc.certDir, "admin.crt"), "--key", filepath.Join(fc.certDir, "admin.key"),
		"--ca", filepath.Join(fc.certDir, "ca.crt"), "--timeout", "5s"})
	start := time.Now()
	err := cmd.Execute()
	d := time.Since(start)
	t.Logf("hung first peer to primary: %v", d)
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, out.String())
	}
	if len(fc.nodes[0].Requests()) != 1 {
		t.Fatalf("the primary got %d requests, want 1", len(fc.nodes[0].Requests()))
	}
	// The old client waited --timeout (5 s here) on the hung peer; the
	// bound is generous for a noisy machine.
	if d > 2500*time.Millisecond {
		t.Fatalf("reaching the primary past a hung peer took %v", d)
	}
}
