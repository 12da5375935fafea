package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/schema"
)

// The queues of the scale load and of the single-record filler that drives
// a checkpoint (configBlob's names).
const (
	loadQueue = "q000001-"
	fillQueue = "q000002-"
)

// TestScaleReplicationAndFreshStandby (issue 9, "Done means"): 20,000
// queued 200-byte jobs — a snapshot of ~5.5 MB, five times the one 1 MiB
// message that once bounded a standby's sync (replication stopped at about
// 3,800 such jobs) — replicate to both standbys of a quorum-mode cluster;
// the standby with the highest priority, its work directory wiped,
// syncs again from the primary holding them all, by a snapshot (the
// primary checkpoints every 100 records, and 300 more records after the
// load leave it no log from lsn 0); and after kill -9 of the primary the new primary lists
// every acknowledged job.
func TestScaleReplicationAndFreshStandby(t *testing.T) {
	const jobs = 20_000
	c := newCluster(t, 3, append([]string{"--max-wal-records=100"}, fastTimings...)...)
	p, standbys, mat := startScaleCluster(t, c)
	res, err := runBulk(c.PeersFlag(), mat, loadSpec{Queue: loadQueue, Jobs: jobs, Clients: 8, Batch: 100, Payload: 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.IDs) != jobs {
		t.Fatalf("%d jobs acknowledged, want %d", len(res.IDs), jobs)
	}
	if _, err := waitInSync(c, mat, p, standbys, 30*time.Second); err != nil {
		t.Fatalf("after the load: %v", err)
	}
	// 300 more records, one job each, to the other queue: at least two
	// more checkpoints with both standbys at the tip, so the segments that
	// hold the load are gone and a standby from lsn 0 needs a snapshot.
	if _, err := runBulk(c.PeersFlag(), mat, loadSpec{Queue: fillQueue, Jobs: 300, Clients: 4, Batch: 1, Payload: 200}); err != nil {
		t.Fatal(err)
	}
	if _, err := waitInSync(c, mat, p, standbys, 30*time.Second); err != nil {
		t.Fatalf("after the filler: %v", err)
	}

	fresh := standbys[0]
	off, poff := logOffset(c, fresh), logOffset(c, p)
	if err := wipeStandby(c, mat, p, fresh); err != nil {
		t.Fatal(err)
	}
	start(t, c, fresh)
	if _, err := waitInSync(c, mat, p, []int{fresh}, 30*time.Second); err != nil {
		t.Fatalf("fresh standby: %v", err)
	}
	waitLog(t, c, fresh, off, "HA: config received and saved", time.Second) // it did start from nothing
	waitLog(t, c, p, poff, "syncing "+c.Names[fresh]+" with a snapshot", time.Second)

	failoverListsAll(t, c, mat, p, standbys, res.IDs, "fresh standby was "+c.Names[fresh])
}

// startScaleCluster installs the scale config on node 0, starts the
// three nodes and returns the primary, the standbys and the admin's
// certificate.
func startScaleCluster(t *testing.T, c *clitool.Cluster) (int, []int, *tlsconf.Material) {
	t.Helper()
	install(t, c, 0, configBlob(t, "scale", 2, 0))
	start(t, c, 0, 1, 2)
	_, p := converge(t, c, -1, 30*time.Second)
	var standbys []int
	for i := range c.Names {
		if i != p {
			standbys = append(standbys, i)
		}
	}
	return p, standbys, admin(t, c)
}

// failoverListsAll kills primary p with SIGKILL and checks that the new
// primary, one of standbys, lists every id of ids in loadQueue (what
// says which standby the test made special).
func failoverListsAll(t *testing.T, c *clitool.Cluster, mat *tlsconf.Material, p int, standbys []int, ids []uint64, what string) {
	t.Helper()
	stop(t, c, p, syscall.SIGKILL)
	np, _ := waitAnyPrimary(t, c, standbys, 15*time.Second)
	cl, err := newDoer(peersOf(c, standbys...), mat, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := waitServing(context.Background(), cl, 15*time.Second); err != nil {
		t.Fatalf("new primary %s: %v", c.Names[np], err)
	}
	if err := checkListed(context.Background(), cl, loadQueue, ids, 0); err != nil {
		t.Fatalf("new primary %s (%s): %v", c.Names[np], what, err)
	}
}

// TestStandbyFarBehindCatchesUpFromTheLog (issue 9 item 1): a standby
// killed while 40 MB of records (10,000 jobs of 4 KiB) are written — more
// than a catch-up could once carry (32 MiB) — gets those records from the
// primary's log when it comes back, not a snapshot, and is in sync; after
// kill -9 of the primary every acknowledged job is on the new one.
func TestStandbyFarBehindCatchesUpFromTheLog(t *testing.T) {
	const jobs = 10_000
	c := newCluster(t, 3, fastTimings...)
	p, standbys, mat := startScaleCluster(t, c)
	if _, err := waitInSync(c, mat, p, standbys, 30*time.Second); err != nil {
		t.Fatalf("before the load: %v", err)
	}
	behind := standbys[0]
	stop(t, c, behind, syscall.SIGKILL)
	res, err := runBulk(c.PeersFlag(), mat, loadSpec{Queue: loadQueue, Jobs: jobs, Clients: 8, Batch: 10, Payload: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.IDs) != jobs {
		t.Fatalf("%d jobs acknowledged, want %d", len(res.IDs), jobs)
	}
	poff := logOffset(c, p)
	start(t, c, behind)
	if _, err := waitInSync(c, mat, p, standbys, 30*time.Second); err != nil {
		t.Fatalf("after %s's restart: %v", c.Names[behind], err)
	}
	waitLog(t, c, p, poff, "caught up from lsn", time.Second)
	if log := logSince(c, p, poff); strings.Contains(log, "syncing "+c.Names[behind]+" with a snapshot") {
		t.Fatalf("%s was synced by a snapshot, want its records from the log:\n%s", c.Names[behind], log)
	}

	failoverListsAll(t, c, mat, p, standbys, res.IDs, c.Names[behind]+" was caught up")
}

// standbyState is the primary's view of standby name in rows[p] ("" if
// it lists none).
func standbyState(row clitool.PeerStatus, name string) string {
	for _, s := range row.Standbys {
		if s.Name == name {
			return s.State
		}
	}
	return ""
}

// waitInSync polls primary p (20 ms) until it reports every one of
// standbys "in sync" and each of them answers status as a serving standby
// of p; it returns when.
func waitInSync(c *clitool.Cluster, mat *tlsconf.Material, p int, standbys []int, timeout time.Duration) (time.Time, error) {
	nodes := append([]int{p}, standbys...)
	deadline := time.Now().Add(timeout)
	for {
		rows, err := clitool.Statuses(context.Background(), peersOf(c, nodes...), mat, time.Second)
		if err != nil {
			return time.Time{}, err
		}
		now := time.Now()
		ok := rows[0].Up && rows[0].Role == "primary"
		var states []string
		for k, s := range standbys {
			st := standbyState(rows[0], c.Names[s])
			r := rows[k+1]
			ok = ok && st == "in sync" && r.Up && r.Role == "standby" && r.Serving && r.Primary == c.Names[p]
			states = append(states, fmt.Sprintf("%s: %q (own status: up=%v role=%s term=%d serving=%v)", c.Names[s], st, r.Up, r.Role, r.Term, r.Serving))
		}
		if ok {
			return now, nil
		}
		if now.After(deadline) {
			return now, fmt.Errorf("standbys not in sync with %s (up=%v role=%s term=%d serving=%v) within %v: %s",
				c.Names[p], rows[0].Up, rows[0].Role, rows[0].Term, rows[0].Serving, timeout, states)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wipeStandby kills standby s with SIGKILL, waits until primary p no
// longer reports it in sync (so that a later "in sync" is the new
// process's), and removes its work directory: the next start is a fresh
// standby.
func wipeStandby(c *clitool.Cluster, mat *tlsconf.Material, p, s int) error {
	ch := c.Exited(s)
	if err := c.Signal(s, syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s did not exit within 10 s of SIGKILL", c.Names[s])
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rows, err := clitool.Statuses(context.Background(), peersOf(c, p), mat, time.Second)
		if err != nil {
			return err
		}
		if st := standbyState(rows[0], c.Names[s]); rows[0].Up && st != "in sync" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still reports the killed %s in sync after 15 s", c.Names[p], c.Names[s])
		}
	}
	return os.RemoveAll(c.NodeDir(s))
}

// waitServing retries a LIST (a read every role but a serving primary
// refuses) until it is answered.
func waitServing(ctx context.Context, cl *jobDoer, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := cl.Do(ctx, &schema.ListRequest{Queue: fillQueue})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no primary serving jobs within %v: %w", timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mergeIDs is the ascending union of ascending id lists.
func mergeIDs(lists ...[]uint64) []uint64 {
	var out []uint64
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
