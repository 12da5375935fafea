package integration

// Seed 002 §14.2, the OP_upgradeConfig rows, with real xcecontroller
// processes and the real `xce-config push` binary: the admin pushes a new
// config, the primary saves it with generation current+1, pushes it to its
// standbys, ACKs with the count and exits 0; the harness plays the service
// manager and starts it again.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/schemaconnect"
	"github.com/xce-hpc/xce/sm"

	"connectrpc.com/connect"
)

// upgradeArgs are the node flags of the upgrade tests (the harness's
// cluster gives every node --admin-cn admin, which enables upgrades).
var upgradeArgs = fastTimings

// pushCLI runs `xce-config push --blob` (and the extra flags) against
// peers (the cluster's --peers string unless given) and returns its
// combined output and exit code.
func pushCLI(t testing.TB, c *clitool.Cluster, blob []byte, peers string, extra ...string) (string, int) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "new.bin")
	if err := os.WriteFile(f, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	if peers == "" {
		peers = c.PeersFlag()
	}
	certs := filepath.Join(c.Dir, "certs")
	cmd := exec.Command(filepath.Join(binDir, "xce-config"), "push", "--peers", peers,
		"--cert", filepath.Join(certs, "admin.crt"), "--key", filepath.Join(certs, "admin.key"), "--ca", filepath.Join(certs, "ca.crt"),
		"--blob", f)
	cmd.Args = append(cmd.Args, extra...)
	return runTool(t, cmd)
}

// upgraded is the blob the primary saves for blob: the same config with
// generation gen (§4.4: the primary ignores the embedded one).
func upgraded(t testing.TB, blob []byte, gen uint64) []byte {
	t.Helper()
	c, err := schema.DecodeClusterConfig(blob)
	if err != nil {
		t.Fatal(err)
	}
	c.ConfigGeneration = gen
	b, err := schema.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ackLine(saved []byte, acked int) string {
	return fmt.Sprintf("upgraded: tag=%s, pushed to %d standbys; the primary restarts", tagHex(saved), acked)
}

// exitCode waits for an Exited channel taken before the push.
func exitCode(t testing.TB, exited <-chan int) int {
	t.Helper()
	select {
	case code := <-exited:
		return code
	case <-time.After(10 * time.Second):
		t.Fatal("the primary did not exit after the upgrade")
		return 0
	}
}

// checkConverged asserts every row serves saved with its generation.
func checkConverged(t testing.TB, rows []clitool.PeerStatus, saved []byte, gen uint64) {
	t.Helper()
	for _, r := range rows {
		if r.ConfigTag != tagHex(saved) || r.Generation != gen {
			t.Fatalf("%s serves tag %s generation %d, want %s generation %d:\n%s", r.Name, r.ConfigTag, r.Generation, tagHex(saved), gen, fmtRows(rows))
		}
	}
}

// test_upgrade_config_pushes_to_standby: the primary ACKs with both
// standbys counted; both standbys' conf/current name the new version
// before the primary is back; the primary exits 0, is started again, and
// the cluster converges on the new tag with generation + 1. The push asks
// for the seed's way (--restart: no switchover first), so that the
// primary's own restart is what is tested; switchover_test.go has the
// default, a handover before the restart.
func TestUpgradeConfigPushesToStandby(t *testing.T) {
	c := newCluster(t, 3, upgradeArgs...)
	old := configBlob(t, "before-upgrade", 3, 8)
	install(t, c, 0, old)
	start(t, c, 0, 1, 2)
	rows, p := converge(t, c, -1, 20*time.Second)
	if p != 0 {
		t.Fatalf("primary %s, want n0:\n%s", rows[p].Name, fmtRows(rows))
	}
	checkConverged(t, rows, old, 1)

	next := configBlob(t, "after-upgrade", 5, 8)
	saved := upgraded(t, next, 2)
	exited := c.Exited(0)
	off := logOffset(c, 0)
	out, code := pushCLI(t, c, next, "", "--restart")
	if code != 0 || strings.TrimSpace(out) != ackLine(saved, 2) {
		t.Fatalf("push: exit %d, output %q; want %q", code, out, ackLine(saved, 2))
	}
	// The ACK counted both standbys: each saved it durably before the ACK,
	// while the primary had not been started again.
	verifyConf(t, c, 1, saved)
	verifyConf(t, c, 2, saved)
	if code := exitCode(t, exited); code != 0 {
		t.Fatalf("n0 exit code %d after the upgrade, want 0 (restart)", code)
	}
	waitLog(t, c, 0, off, "Config upgraded to tag="+tagHex(saved)+" by CN=admin — requesting restart (pushed to 2 standbys)", time.Second)
	verifyConf(t, c, 0, saved)
	verifyConf(t, c, 1, saved)
	verifyConf(t, c, 2, saved)

	start(t, c, 0) // the service manager's restart
	rows, _ = converge(t, c, -1, 20*time.Second)
	checkConverged(t, rows, saved, 2)
	for i := range c.Names {
		if info := verifyConf(t, c, i, saved); info.Generation != 2 {
			t.Fatalf("%s: generation %d on disk, want 2", c.Names[i], info.Generation)
		}
	}
}

// test_upgrade_config_offline_standby_catches_up: the only standby is
// stopped during the upgrade, so the ACK counts none and push prints the
// §6.3 WARNING; the primary restarts with the new config, and the standby,
// restarted later, detects the tag mismatch and pulls it.
func TestUpgradeConfigOfflineStandbyCatchesUp(t *testing.T) {
	c := newCluster(t, 2, upgradeArgs...)
	old := configBlob(t, "before-offline", 3, 8)
	install(t, c, 0, old)
	start(t, c, 0, 1)
	converge(t, c, -1, 20*time.Second)
	if code := stop(t, c, 1, syscall.SIGTERM); code != 0 {
		t.Fatalf("n1 exit code %d after SIGTERM", code)
	}

	next := configBlob(t, "after-offline", 4, 8)
	saved := upgraded(t, next, 2)
	out, code := pushCLI(t, c, next, "")
	if code != 0 || !strings.HasPrefix(out, ackLine(saved, 0)+"\n") || !strings.Contains(out, "WARNING: ackedCount == 0: the config may not have reached any standby") {
		t.Fatalf("push: exit %d, output %q", code, out)
	}
	verifyConf(t, c, 1, old) // offline: untouched
	if code := waitExit(t, c, 0, 10*time.Second); code != 0 {
		t.Fatalf("n0 exit code %d, want 0", code)
	}

	start(t, c, 0)
	waitRole(t, c, 0, "primary", 15*time.Second)
	off := logOffset(c, 1)
	start(t, c, 1)
	waitLog(t, c, 1, off, "Standby saved config tag="+tagHex(old)+" differs from primary tag="+tagHex(saved), 15*time.Second)
	rows, p := converge(t, c, -1, 20*time.Second)
	if p != 0 {
		t.Fatalf("primary %s, want n0:\n%s", rows[p].Name, fmtRows(rows))
	}
	checkConverged(t, rows, saved, 2)
	verifyConf(t, c, 1, saved)
}

// test_upgrade_config_no_standbys: a single node saves the config, ACKs
// with no standby (no warning: --peers has none), exits 0, and the restart
// applies the new config.
func TestUpgradeConfigNoStandbys(t *testing.T) {
	c := newCluster(t, 1, upgradeArgs...)
	old := configBlob(t, "single-before", 2, 8)
	install(t, c, 0, old)
	start(t, c, 0)
	waitRole(t, c, 0, "primary", 15*time.Second)

	next := configBlob(t, "single-after", 6, 8)
	saved := upgraded(t, next, 2)
	exited := c.Exited(0)
	out, code := pushCLI(t, c, next, "")
	if code != 0 || out != ackLine(saved, 0)+"\n" {
		t.Fatalf("push: exit %d, output %q; want %q", code, out, ackLine(saved, 0))
	}
	if code := exitCode(t, exited); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	verifyConf(t, c, 0, saved)
	off := logOffset(c, 0)
	start(t, c, 0)
	st := waitRole(t, c, 0, "primary", 15*time.Second)
	if st.ConfigTag != tagHex(saved) || st.Generation != 2 {
		t.Fatalf("restarted with %+v, want tag %s generation 2", st, tagHex(saved))
	}
	waitLog(t, c, 0, off, "conf.loaded", 5*time.Second)
	queues, err := clitool.FetchConfig(context.Background(), c.PeersFlag(), admin(t, c), time.Second)
	if err != nil || queues.GetClusterName() != "single-after" || len(queues.GetQueues()) != 6 {
		t.Fatalf("running config %v, %v", queues, err)
	}

	// Not idempotent (§4.4): the same bytes again are a new generation and
	// another restart.
	exited = c.Exited(0)
	again := upgraded(t, next, 3)
	if out, code := pushCLI(t, c, next, ""); code != 0 || out != ackLine(again, 0)+"\n" {
		t.Fatalf("second push: exit %d, output %q", code, out)
	}
	if code := exitCode(t, exited); code != 0 {
		t.Fatalf("second exit code %d", code)
	}
	verifyConf(t, c, 0, again)
}

// A node without --admin-cn (the default; it replaces the §5.3 gate)
// refuses: push exits 1 with the reason, the node keeps running and
// conf/ is untouched.
func TestUpgradeConfigDisabledRefuses(t *testing.T) {
	c := newCluster(t, 1, fastTimings...)
	c.AdminCN = nil
	old := configBlob(t, "disabled", 2, 8)
	install(t, c, 0, old)
	start(t, c, 0)
	waitRole(t, c, 0, "primary", 15*time.Second)
	before := snapshotDir(t, confDir(c, 0))
	out, code := pushCLI(t, c, configBlob(t, "refused", 3, 8), "")
	refusal := `Not authorised — OP_upgradeConfig needs the admin role; certificate "admin" has the worker role; this controller allows no admin (start it with --admin-cn)`
	if code != 1 || !strings.Contains(out, refusal) {
		t.Fatalf("push: exit %d, output %q", code, out)
	}
	waitLog(t, c, 0, 0, refusal, time.Second)
	time.Sleep(200 * time.Millisecond)
	if !c.Running(0) {
		t.Fatal("the node exited after a refused upgrade")
	}
	if d := diffSnapshots(before, snapshotDir(t, confDir(c, 0))); d != "" {
		t.Fatalf("conf/ changed: %s", d)
	}
	if st := waitRole(t, c, 0, "primary", time.Second); st.ConfigTag != tagHex(old) || st.Generation != 1 {
		t.Fatalf("status %+v", st)
	}
}

// §10.12: a standby answers "Not primary — redirect to primary" with the
// primary's index, and push follows it. Here n1 is the primary (started
// alone first; there is no pre-emption) and n0, asked first, a standby.
func TestUpgradeConfigStandbyRedirects(t *testing.T) {
	c := newCluster(t, 2, upgradeArgs...)
	old := configBlob(t, "redirect-before", 3, 8)
	install(t, c, 1, old)
	start(t, c, 1)
	waitRole(t, c, 1, "primary", 15*time.Second)
	start(t, c, 0)
	rows, p := converge(t, c, -1, 20*time.Second)
	if p != 1 {
		t.Fatalf("primary %s, want n1:\n%s", rows[p].Name, fmtRows(rows))
	}

	// The standby's own answer: unavailable, naming the primary (an
	// upgrade is never forwarded).
	next := configBlob(t, "redirect-after", 4, 8)
	sum := sumOf(next)
	cl, err := client.NewFromFlag(c.PeersFlag(), admin(t, c), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = client.Forward(context.Background(), cl, 0, client.OnBehalf{}, &schema.UpgradeConfigRequest{Bytes: next, Sha256: sum[:]}, schemaconnect.XceClient.UpgradeConfig)
	cl.Close()
	var ne *client.NodeError
	var np *schema.NotPrimary
	if errors.As(err, &ne) && len(ne.Err.Details()) == 1 {
		v, _ := ne.Err.Details()[0].Value()
		np, _ = v.(*schema.NotPrimary)
	}
	if ne == nil || ne.Code() != connect.CodeUnavailable || !strings.HasPrefix(ne.Err.Message(), "Not primary") || np.GetPrimaryName() != "n1" || np.GetNode() != "n0" {
		t.Fatalf("standby's answer %v, detail %v", err, np)
	}
	verifyConf(t, c, 0, old)

	saved := upgraded(t, next, 2)
	out, code := pushCLI(t, c, next, "")
	if code != 0 || strings.TrimSpace(out) != ackLine(saved, 1) {
		t.Fatalf("push: exit %d, output %q; want %q", code, out, ackLine(saved, 1))
	}
	verifyConf(t, c, 0, saved)
	if code := waitExit(t, c, 1, 10*time.Second); code != 0 {
		t.Fatalf("n1 exit code %d, want 0", code)
	}
	start(t, c, 1)
	rows, _ = converge(t, c, -1, 20*time.Second)
	checkConverged(t, rows, saved, 2)
	if got, err := os.ReadFile(filepath.Join(confDir(c, 1), sm.VersionName(sumOf(saved)))); err != nil || !bytes.Equal(got, saved) {
		t.Fatalf("n1 conf: %v", err)
	}
}
