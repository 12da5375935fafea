package configtool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/authz"
	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/transport/fakenodes"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

type pushCluster struct {
	nodes   []*fakenodes.Node
	peers   string
	certDir string
}

// startPushCluster serves every node whose up[i] is true on loopback; the
// others' addresses refuse connections. Every node answers "starting"
// until Set.
func startPushCluster(t *testing.T, up ...bool) *pushCluster {
	t.Helper()
	c := fakenodes.Start(t, up...)
	return &pushCluster{nodes: c.Nodes, peers: c.Peers, certDir: c.CertDir}
}

func (pc *pushCluster) flags(extra ...string) []string {
	return append([]string{"push", "--peers", pc.peers, "--cert", filepath.Join(pc.certDir, "admin.crt"),
		"--key", filepath.Join(pc.certDir, "admin.key"), "--ca", filepath.Join(pc.certDir, "ca.crt"), "--timeout", "3s",
		// A hedge of 750 ms: a slow handshake to n0 on a loaded machine
		// does not make the client dial the others too (asserted below).
		"--connect-timeout", "3s"}, extra...)
}

func (pc *pushCluster) admin(t *testing.T) *tlsconf.Material {
	t.Helper()
	mat, err := tlsconf.Load(filepath.Join(pc.certDir, "admin.crt"), filepath.Join(pc.certDir, "admin.key"), filepath.Join(pc.certDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return mat
}

func upgradeOK(tag uint64, acked uint32) func(*wire.Request) *wire.Reply {
	return func(*wire.Request) *wire.Reply {
		return &wire.Reply{Upgrade: &schema.UpgradeConfigReply{VersionTag: tag, AckedCount: acked}}
	}
}

func upgradeErr(status int32, msg string, primary int32) func(*wire.Request) *wire.Reply {
	return func(*wire.Request) *wire.Reply {
		return &wire.Reply{Status: status, Error: msg,
			Upgrade: &schema.UpgradeConfigReply{Error: msg, Primary: primary}}
	}
}

const notPrimary = "Not primary — redirect to primary"

// upgradeNotPrimary is a standby's refusal naming primary (-1: none).
func upgradeNotPrimary(primary int32) func(*wire.Request) *wire.Reply {
	return func(*wire.Request) *wire.Reply {
		return &wire.Reply{Status: sm.StatusEAGAIN, Error: notPrimary, NotPrimary: true,
			Upgrade: &schema.UpgradeConfigReply{Error: notPrimary, Primary: primary}}
	}
}

// The YAML is encoded and sent with its SHA-256; a standby's redirect is
// followed (n1 is never asked); the ACK is printed without a warning when
// standbys confirmed.
func TestPushFollowsRedirect(t *testing.T) {
	pc := startPushCluster(t, true, true, true)
	pc.nodes[0].Set(upgradeNotPrimary(2))
	pc.nodes[1].Set(upgradeNotPrimary(2))
	pc.nodes[2].Set(upgradeOK(0x0123456789abcdef, 2))
	out, err := run(t, pc.flags("--config", sample)...)
	if err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	if out != "upgraded: tag=0123456789abcdef, pushed to 2 standbys; the primary restarts\n" {
		t.Fatalf("output %q", out)
	}
	if n := len(pc.nodes[1].Requests()); n != 0 {
		t.Fatalf("n1 asked %d times; the redirect to n2 should have been followed", n)
	}
	reqs := pc.nodes[2].Requests()
	if len(reqs) != 1 || reqs[0].Upgrade == nil {
		t.Fatalf("n2 requests %v", reqs)
	}
	want, err := EncodeFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	u := reqs[0].Upgrade
	sum := sha256.Sum256(want)
	if !bytes.Equal(u.GetBytes(), want) || !bytes.Equal(u.GetSha256(), sum[:]) {
		t.Fatal("n2 did not receive the encoded YAML with its SHA-256")
	}
	if u.GetRestart() {
		t.Fatal("restart set without --restart: the primary would skip the switchover")
	}
}

// --restart travels in the request (the primary then restarts without a
// switchover); the answer is printed as any upgrade's.
func TestPushRestartFlag(t *testing.T) {
	pc := startPushCluster(t, true, true)
	pc.nodes[0].Set(upgradeOK(0x42, 1))
	out, err := run(t, pc.flags("--config", sample, "--restart")...)
	if err != nil || out != "upgraded: tag=0000000000000042, pushed to 1 standbys; the primary restarts\n" {
		t.Fatalf("push --restart: %q, %v", out, err)
	}
	reqs := pc.nodes[0].Requests()
	if len(reqs) != 1 || reqs[0].Upgrade == nil || !reqs[0].Upgrade.GetRestart() {
		t.Fatalf("n0 requests %v, want one upgrade with restart", reqs)
	}
}

// ackedCount == 0 with standbys in --peers prints the seed §6.3 WARNING;
// a single-node cluster has nobody to warn about.
func TestPushWarnsWhenNoStandbyAcked(t *testing.T) {
	pc := startPushCluster(t, true, false)
	pc.nodes[0].Set(upgradeOK(7, 0))
	out, err := run(t, pc.flags("--config", sample)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "upgraded: tag=0000000000000007, pushed to 0 standbys; the primary restarts\n") ||
		!strings.Contains(out, "WARNING: ackedCount == 0: the config may not have reached any standby (1 in --peers)") {
		t.Fatalf("output %q", out)
	}

	single := startPushCluster(t, true)
	single.nodes[0].Set(upgradeOK(8, 0))
	out, err = run(t, single.flags("--config", sample)...)
	if err != nil || strings.Contains(out, "WARNING") {
		t.Fatalf("single node: %q, %v", out, err)
	}
}

// The primary's refusal is an error with its text (exit 1 in main), and
// is not sent anywhere else.
func TestPushRefused(t *testing.T) {
	pc := startPushCluster(t, true, true)
	pc.nodes[0].Set(upgradeErr(sm.StatusEINVAL, "SHA-256 mismatch — blob corrupted in transit", -1))
	pc.nodes[1].Set(upgradeOK(1, 0))
	out, err := run(t, pc.flags("--config", sample)...)
	var re *PushRefusedError
	if !errors.As(err, &re) || re.Peer != "n0" || !strings.Contains(err.Error(), "SHA-256 mismatch — blob corrupted in transit") {
		t.Fatalf("err %v, out %q", err, out)
	}
	if len(pc.nodes[1].Requests()) != 0 {
		t.Fatal("a refused upgrade was sent to another node")
	}
}

// Down, starting and standby nodes are skipped (nothing was applied
// there); with nobody accepting, every attempt is listed. A refusal of
// the caller (upgrades disabled there) is a definite answer.
func TestPushSkipsAndLists(t *testing.T) {
	pc := startPushCluster(t, false, true, true, true)
	pc.nodes[1].Set(upgradeNotPrimary(-1))
	// n2 keeps answering "starting"
	pc.nodes[3].Set(upgradeOK(9, 2))
	res, err := Push(context.Background(), pc.peers, pc.admin(t), 3*time.Second, mustEncode(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Peer != "n3" || res.VersionTag != 9 || res.AckedCount != 2 || res.Standbys != 3 {
		t.Fatalf("result %+v", res)
	}

	pc.nodes[3].Set(upgradeNotPrimary(-1))
	_, err = Push(context.Background(), pc.peers, pc.admin(t), 3*time.Second, mustEncode(t))
	if !errors.Is(err, ErrPushNoPrimary) || errors.Is(err, ErrPushUnknown) {
		t.Fatalf("nobody accepting: %v", err)
	}
	for _, w := range []string{"n0: ", "n1: " + notPrimary, "n2: starting", "n3: " + notPrimary} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("nobody accepting: %v lacks %q", err, w)
		}
	}

	disabled := "OP_upgradeConfig is disabled on this controller (no admin is configured: start it with --admin-cn)"
	for _, i := range []int{1, 2, 3} {
		pc.nodes[i].Set(upgradeErr(authz.StatusForbidden, disabled, -1))
	}
	_, err = Push(context.Background(), pc.peers, pc.admin(t), 3*time.Second, mustEncode(t))
	var re *PushRefusedError
	if !errors.As(err, &re) || !errors.Is(err, authz.ErrForbidden) || !strings.Contains(err.Error(), disabled) {
		t.Fatalf("disabled: %v", err)
	}
}

// A request that reached a node without an answer is not sent elsewhere:
// a second upgrade would restart the primary again.
func TestPushUnknownOutcome(t *testing.T) {
	pc := startPushCluster(t, true, true)
	release := make(chan struct{})
	defer close(release)
	pc.nodes[0].Set(func(req *wire.Request) *wire.Reply {
		if req.Upgrade == nil { // the client's check of a new connection
			return &wire.Reply{StatusReply: &schema.StatusReply{Name: "n0", Primary: -1}}
		}
		<-release
		return &wire.Reply{}
	})
	pc.nodes[1].Set(upgradeOK(1, 0))
	_, err := Push(context.Background(), pc.peers, pc.admin(t), 300*time.Millisecond, mustEncode(t))
	if !errors.Is(err, ErrPushUnknown) {
		t.Fatalf("err %v, want ErrPushUnknown", err)
	}
	if len(pc.nodes[1].Requests()) != 0 {
		t.Fatal("an upgrade of unknown outcome was sent to another node")
	}
	pc.nodes[0].Set(upgradeErr(sm.StatusOutcomeUnknown, "runner: node stopped; outcome unknown", -1))
	if _, err := Push(context.Background(), pc.peers, pc.admin(t), 3*time.Second, mustEncode(t)); !errors.Is(err, ErrPushUnknown) {
		t.Fatalf("outcome-unknown status: %v", err)
	}
}

// A blob is checked locally before anything is sent.
func TestPushBlobChecked(t *testing.T) {
	pc := startPushCluster(t, true)
	pc.nodes[0].Set(upgradeOK(1, 0))
	dir := t.TempDir()
	for name, data := range map[string]string{"empty": "", "garbage": "\xff\xff\xff"} {
		f := writeFile(t, dir, name, data)
		if _, err := run(t, pc.flags("--blob", f)...); err == nil {
			t.Errorf("%s blob accepted", name)
		}
	}
	noQueues, _ := schema.Encode(&schema.ClusterConfig{Port: 7001})
	f := writeFile(t, dir, "noqueues", string(noQueues))
	if _, err := run(t, pc.flags("--blob", f)...); err == nil {
		t.Error("blob without queues accepted")
	}
	if n := len(pc.nodes[0].Requests()); n != 0 {
		t.Fatalf("%d requests sent for invalid blobs", n)
	}
	good := writeFile(t, dir, "good", string(mustEncode(t)))
	if out, err := run(t, pc.flags("--blob", good)...); err != nil || !strings.HasPrefix(out, "upgraded: ") {
		t.Fatalf("good blob: %q, %v", out, err)
	}
	if _, err := Push(context.Background(), pc.peers, pc.admin(t), time.Second, make([]byte, sm.MaxConfigSize+1)); err == nil {
		t.Fatal("oversized blob sent")
	}
}

func mustEncode(t *testing.T) []byte {
	t.Helper()
	b, err := EncodeFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A node that refuses our certificate (TLS 1.3 says so on the first read,
// after the request was written) never read the request: the next peer is
// tried, and the outcome is not "unknown".
func TestPushForeignCertificateSkipped(t *testing.T) {
	pc := startPushCluster(t, true)
	pc.nodes[0].Set(upgradeOK(1, 0))
	foreign := t.TempDir()
	if err := DevCerts(foreign, nil, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	real, err := os.ReadFile(filepath.Join(pc.certDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.ReadFile(filepath.Join(foreign, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	bundle := writeFile(t, foreign, "bundle.crt", string(own)+string(real))
	mat, err := tlsconf.Load(filepath.Join(foreign, "admin.crt"), filepath.Join(foreign, "admin.key"), bundle)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Push(context.Background(), pc.peers, mat, 3*time.Second, mustEncode(t))
	if !errors.Is(err, ErrPushNoPrimary) || errors.Is(err, ErrPushUnknown) {
		t.Fatalf("err %v, want ErrPushNoPrimary", err)
	}
	if n := len(pc.nodes[0].Requests()); n != 0 {
		t.Fatalf("the node answered %d requests from a foreign certificate", n)
	}
}

// hungListener accepts TCP connections and never answers, as a SIGSTOPped
// controller does (its kernel still completes the handshake).
func hungListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// push finds the primary as xcecli does: a hung first peer costs the
// connect timeout at most, not the 10 s answer timeout, and the upgrade
// (a mutation) was never sent to it, so the outcome is known.
func TestPushPastHungPeer(t *testing.T) {
	pc := startPushCluster(t, true, true)
	pc.nodes[0].Set(upgradeOK(5, 1))
	pc.nodes[1].Set(upgradeNotPrimary(1))
	peers := "hung=" + hungListener(t) + "," + pc.peers
	start := time.Now()
	res, err := Push(context.Background(), peers, pc.admin(t), 0, mustEncode(t))
	d := time.Since(start)
	t.Logf("hung first peer to primary: %v", d)
	if err != nil || res.Peer != "n0" || res.VersionTag != 5 {
		t.Fatalf("result %+v, err %v", res, err)
	}
	// The old client waited DefaultPushTimeout (10 s) here; generous for
	// a noisy machine.
	if d > 2500*time.Millisecond {
		t.Fatalf("reaching the primary past a hung peer took %v", d)
	}
}
