package integration

// BenchmarkScale (issue 9 item 6, `make bench-scale`): real
// xcecontroller processes with the default timings hold a large queue of
// 200-byte jobs, on one node and on three in quorum mode, and it prints
// one table of what matters at that size. Being a benchmark it never runs
// in `make test`; each step waits at most -scale-wait and reports a
// figure it did not reach as "not within". Recorded in
// docs/performance.md ("Scale").
//
//	go test ./integration -run '^$' -bench '^BenchmarkScale$' -benchtime 1x -timeout 60m -v -scale-jobs 100000

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
)

var (
	scaleJobs    = flag.Int("scale-jobs", 100_000, "BenchmarkScale: jobs queued before the measurements")
	scaleClients = flag.Int("scale-clients", 16, "BenchmarkScale: concurrent clients of the initial load")
	scaleBatch   = flag.Int("scale-batch", 100, "BenchmarkScale: jobs per ENQUEUE_BATCH")
	scaleWait    = flag.Duration("scale-wait", 2*time.Minute, "BenchmarkScale: bound on each wait (a sync, a checkpoint, a recovery, a failover)")
	scaleListMax = flag.Int("scale-list-max", 200_000, "BenchmarkScale: above this many jobs, read back by count (xce_queue_depth) instead of listing every id (LIST costs the whole queue per page)")
	scaleNodes   = flag.String("scale-nodes", "1,3", "BenchmarkScale: cluster sizes to run, comma-separated (1 and/or 3)")
	scaleLogs    = flag.String("scale-logs", "", "BenchmarkScale: copy every node's log into this directory (<nodes>-<name>.log) at the end of each cluster's run")
	scaleArgs    = flag.String("scale-args", "", "BenchmarkScale: more xcecontroller flags for every node, space-separated (e.g. \"--bulk-write-rate 128\")")
	scaleKillIn  = flag.Duration("scale-kill-in-checkpoint", 0, "BenchmarkScale: the failover's kill -9 waits, with a 4-client load running, until the standby that was not wiped begins a checkpoint and this long more, so that it lands while that standby builds or writes it; 0: right after the fresh standby's sync")
	scaleRestart = flag.Duration("scale-restart-standby", 0, "BenchmarkScale: before the failover, the standby that was not wiped (the one the election prefers) is killed with SIGKILL and started again, and the kill -9 of the primary comes this long after, with a 4-client load running; 0: no restart")
)

const scalePayload = 200

// scaleFigures is one cluster size's column: figure name to text.
type scaleFigures map[string]string

// The table's rows, in order, with the targets.
var scaleRows = []struct{ key, target string }{
	{"queued jobs", ""},
	{"enqueue jobs/s (initial load)", ""},
	{"standbys in sync after the load", ""},
	{"primary RSS before / after", ""},
	{"RSS per queued job", "<= 450 B"},
	{"snapshot on disk (newest / data/snap)", ""},
	{"checkpoint: jobs in it", ""},
	{"checkpoint duration (log line to durable)", ""},
	{"longest probe request during the checkpoint", "<= 50 ms"},
	{"primary's steps over 50 ms, filler phase", ""},
	{"longest probe request, whole filler phase", ""},
	{"filler enqueue jobs/s (1 job per request)", ""},
	{"primary before / after the checkpoint", "no election"},
	{"recovery: kill -9, exec to serving", "<= 2 s (1M, 1 node)"},
	{"enqueue jobs/s, 4 clients, standbys in sync", ""},
	{"fresh standby: exec to in sync", "<= 15 s (1M, 3 nodes)"},
	{"fresh standby synced by", ""},
	{"enqueue jobs/s, 4 clients, while it syncs", ""},
	{"longest probe request while it syncs", "<= 50 ms"},
	{"primary's steps over 50 ms while it syncs", ""},
	{"failover: kill -9 during a standby checkpoint", ""},
	{"failover: kill -9 after a standby's restart", ""},
	{"failover: kill -9 to a standby reporting primary", "<= 2 s"},
	{"failover: kill -9 to serving jobs", ""},
	{"dual primary in the 3 s after", "none"},
	{"the new primary's state came from", ""},
	{"every acknowledged job listed (read back)", ""},
	{"roles and terms at the end", ""},
}

func BenchmarkScale(b *testing.B) {
	if b.N > 1 {
		b.Skip("one run per invocation: use -benchtime 1x")
	}
	var cols []int
	for _, f := range strings.Split(*scaleNodes, ",") {
		switch strings.TrimSpace(f) {
		case "1":
			cols = append(cols, 1)
		case "3":
			cols = append(cols, 3)
		default:
			b.Fatalf("-scale-nodes %q: only 1 and 3", *scaleNodes)
		}
	}
	figs := make([]scaleFigures, len(cols))
	for k := range figs {
		figs[k] = scaleFigures{}
	}
	// The table even when a step fails the benchmark: what was measured
	// up to there.
	defer printScaleTable(b, cols, figs)
	for k, nodes := range cols {
		t0 := time.Now()
		scaleRun(b, nodes, *scaleJobs, figs[k])
		b.Logf("%d node(s): %v", nodes, time.Since(t0).Round(time.Second))
	}
}

func printScaleTable(b *testing.B, cols []int, figs []scaleFigures) {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "SCALE %d jobs of %d B\t", *scaleJobs, scalePayload)
	for _, n := range cols {
		fmt.Fprintf(tw, "%d node(s)\t", n)
	}
	fmt.Fprintln(tw, "target")
	for _, r := range scaleRows {
		fmt.Fprintf(tw, "%s\t", r.key)
		for k, f := range figs {
			v := f[r.key]
			if v == "" {
				v = "-"
			}
			if len(v) > 60 { // whole in the log, cut in the table
				b.Logf("%d node(s): %s: %s", cols[k], r.key, v)
				v = v[:57] + "..."
			}
			fmt.Fprintf(tw, "%s\t", v)
		}
		fmt.Fprintln(tw, r.target)
	}
	tw.Flush()
	fmt.Fprint(os.Stdout, sb.String())
}

// scaleRun measures one cluster of nodes holding jobs jobs into f.
func scaleRun(b *testing.B, nodes, jobs int, f scaleFigures) {
	wait := *scaleWait
	c := newCluster(b, nodes, strings.Fields(*scaleArgs)...)
	defer c.Stop()
	defer keepLogs(b, c, nodes)
	c.MetricsPorts = freePorts(b, nodes)
	install(b, c, 0, configBlob(b, "scale", 2, 0))
	for i := range c.Names {
		start(b, c, i)
	}
	p := 0
	if nodes == 1 {
		waitRole(b, c, 0, "primary", 20*time.Second)
	} else {
		_, p = converge(b, c, -1, 30*time.Second)
	}
	var standbys []int
	for i := range c.Names {
		if i != p {
			standbys = append(standbys, i)
		}
	}
	mat := admin(b, c)
	peers := c.PeersFlag()
	cl, err := newDoer(peers, mat, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := waitServing(ctx, cl, wait); err != nil {
		b.Fatal(err)
	}

	// The load.
	rss0 := make([]int64, nodes)
	for i := range rss0 {
		rss0[i] = must(b, func() (int64, error) { return nodeRSS(c, i) })
	}
	ld, err := startBulk(peers, mat, loadSpec{Queue: loadQueue, Jobs: jobs, Clients: *scaleClients, Batch: *scaleBatch, Payload: scalePayload, Tolerate: true})
	if err != nil {
		b.Fatal(err)
	}
	res, cut, err := ld.within(2 * wait)
	if err != nil {
		b.Fatalf("initial load: %v", err)
	}
	f["queued jobs"] = fmt.Sprint(len(res.IDs))
	if cut {
		f["queued jobs"] += fmt.Sprintf(" of %d: load stopped after %v", jobs, 2*wait)
	}
	if res.Unknown > 0 || res.Refused > 0 {
		f["queued jobs"] += fmt.Sprintf(" (+%d unknown outcome, %d batches refused)", res.Unknown, res.Refused)
	}
	f["enqueue jobs/s (initial load)"] = fmt.Sprintf("%.0f (%v)", res.rate(), res.Elapsed.Round(time.Millisecond))
	if nodes > 1 {
		t0 := time.Now()
		var term uint64
		p, standbys, term = leader(b, c, wait)
		at, err := waitInSync(c, mat, p, standbys, wait)
		f["standbys in sync after the load"] = sinceOr(at.Sub(t0), err)
		if term != 1 {
			f["standbys in sync after the load"] += fmt.Sprintf(" (%s primary in term %d)", c.Names[p], term)
		}
	}
	time.Sleep(time.Second) // let the last replies' buffers go
	rss1 := must(b, func() (int64, error) { return nodeRSS(c, p) })
	f["primary RSS before / after"] = fmt.Sprintf("%s / %s", mib(rss0[p]), mib(rss1))
	f["RSS per queued job"] = fmt.Sprintf("%d B", (rss1-rss0[p])/int64(len(res.IDs)))

	// A checkpoint of the full queue, driven by single-job enqueues to
	// the filler queue, with the probe running.
	term0 := statusOf(b, c, mat, p).Term
	fill := scaleCheckpoint(b, c, mat, p, res.IDs[0], wait, f)
	newest, total, err := newestSnapshot(c, p)
	if err != nil {
		b.Fatal(err)
	}
	f["snapshot on disk (newest / data/snap)"] = fmt.Sprintf("%s (%d B/job) / %s", mib(newest), newest/int64(len(res.IDs)), mib(total))
	acked := map[string][]uint64{loadQueue: res.IDs, fillQueue: fill.IDs}
	unknown := map[string]int{loadQueue: res.Unknown, fillQueue: fill.Unknown}
	if nodes > 1 {
		// The checkpoint may have cost the primary its majority: go on
		// with whichever node leads once the cluster has converged.
		np, nstandbys, term := leader(b, c, wait)
		f["primary before / after the checkpoint"] = fmt.Sprintf("%s term %d / %s term %d", c.Names[p], term0, c.Names[np], term)
		p, standbys = np, nstandbys
		if _, err := waitInSync(c, mat, p, standbys, wait); err != nil {
			b.Fatalf("after the checkpoint: %v", err)
		}
	}

	if nodes == 1 {
		stop(b, c, 0, syscall.SIGKILL)
		t0 := time.Now()
		start(b, c, 0)
		err := waitServing(ctx, cl, wait)
		f["recovery: kill -9, exec to serving"] = sinceOr(time.Since(t0), err)
	} else {
		synced := scaleFreshStandby(b, c, mat, p, standbys[len(standbys)-1], res.IDs[0], wait, f)
		acked[loadQueue] = mergeIDs(acked[loadQueue], synced.IDs)
		unknown[loadQueue] += synced.Unknown
		fo := scaleFailover(b, c, mat, p, standbys, wait, f)
		acked[loadQueue] = mergeIDs(acked[loadQueue], fo.IDs)
		unknown[loadQueue] += fo.Unknown
	}

	t0 := time.Now()
	var retries []string
	for _, q := range []string{loadQueue, fillQueue} {
		for {
			var err error
			if len(acked[loadQueue]) > *scaleListMax {
				err = checkCount(b, c, mat, q, len(acked[q]), unknown[q])
			} else {
				err = checkListed(ctx, cl, q, acked[q], unknown[q])
			}
			if err == nil {
				break
			}
			if !errors.Is(err, client.ErrNoPrimary) || time.Since(t0) > wait {
				f["every acknowledged job listed (read back)"] = "NO: " + err.Error()
				b.Errorf("%d node(s): read back: %v", nodes, err)
				return
			}
			// The primary changed under the read (a finding in itself):
			// read the queue again from the one that serves now.
			retries = append(retries, err.Error())
			b.Logf("%d node(s): read back of %s: %v; again", nodes, q, err)
			if err := waitServing(ctx, cl, wait); err != nil {
				b.Fatal(err)
			}
		}
	}
	how := "every id listed"
	if len(acked[loadQueue]) > *scaleListMax {
		how = "by count, xce_queue_depth"
	}
	f["every acknowledged job listed (read back)"] = fmt.Sprintf("yes, %d + %d jobs, %s (%v, %d restarts)", len(acked[loadQueue]), len(acked[fillQueue]), how, time.Since(t0).Round(time.Millisecond), len(retries))
	rows, err := clitool.Statuses(ctx, peers, mat, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	var terms []string
	for _, r := range rows {
		if r.Up {
			terms = append(terms, fmt.Sprintf("%s %s term %d", r.Name, r.Role, r.Term))
		}
	}
	f["roles and terms at the end"] = strings.Join(terms, ", ")
}

// scaleCheckpoint enqueues single jobs to the filler queue (8 clients)
// until primary p completes a checkpoint (xce_checkpoint_duration_seconds
// counts one more) while a probe GETs job probeID every 5 ms; it returns
// the filler's result. The checkpoint's start is its wal.checkpoint log
// line, written once sm has built and encoded the snapshot; its end is
// start + the histogram's duration, which runs from that step to the
// snapshot being durable. The probe's longest request in flight in that
// window is the stall.
func scaleCheckpoint(b *testing.B, c *clitool.Cluster, mat *tlsconf.Material, p int, probeID uint64, wait time.Duration, f scaleFigures) loadResult {
	// A checkpoint still running (the load's last records may have
	// started one) ends first, so that the one measured starts under the
	// probe: every "checkpoint: writing" line so far is counted done.
	for deadline := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		done, _ := ckptHist(b, c, p)
		if started := strings.Count(logSince(c, p, 0), "checkpoint: writing"); float64(started) <= done {
			break
		}
		if time.Now().After(deadline) {
			f["checkpoint duration (log line to durable)"] = fmt.Sprintf("the one begun by the load did not end within %v", wait)
			return loadResult{}
		}
	}
	count0, sum0 := ckptHist(b, c, p)
	off := logOffset(c, p)
	pr, err := startProbe(c.PeersFlag(), mat, probeID, 5*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	fill, err := startBulk(c.PeersFlag(), mat, loadSpec{Queue: fillQueue, Clients: 8, Batch: 1, Payload: scalePayload, Tolerate: true})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	count, sum := count0, sum0
	for deadline := t0.Add(wait); count == count0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		count, sum = ckptHist(b, c, p)
	}
	fill.stop()
	fr, err := fill.wait()
	if err != nil {
		b.Fatalf("filler: %v", err)
	}
	pr.stop()
	f["filler enqueue jobs/s (1 job per request)"] = fmt.Sprintf("%.0f (%d unknown outcome, %d refused)", fr.rate(), fr.Unknown, fr.Refused)
	whole := pr.window(t0, time.Now())
	f["longest probe request, whole filler phase"] = fmt.Sprintf("%v (%d requests, %d errors)", whole.max.Round(100*time.Microsecond), whole.n, whole.errors)
	if count == count0 {
		f["checkpoint duration (log line to durable)"] = fmt.Sprintf("none completed within %v", wait)
		return fr
	}
	log := logSince(c, p, off)
	f["primary's steps over 50 ms, filler phase"] = slowSteps(log)
	f["checkpoint: jobs in it"] = checkpointJobs(findLine(log, "checkpoint: writing"))
	dur := time.Duration((sum - sum0) / (count - count0) * float64(time.Second))
	from := logTime(b, log, "checkpoint: writing")
	in := pr.window(from, from.Add(dur))
	keepProbe(b, c, "checkpoint", pr, from, from.Add(dur))
	f["checkpoint duration (log line to durable)"] = dur.Round(time.Millisecond).String()
	f["longest probe request during the checkpoint"] = fmt.Sprintf("%v (%d requests, %d errors)", in.max.Round(100*time.Microsecond), in.n, in.errors)
	return fr
}

// checkCount checks that the serving primary's xce_queue_depth of queue
// (pending jobs: none is claimed here) counts the acked jobs and at most
// unknown more.
func checkCount(b *testing.B, c *clitool.Cluster, mat *tlsconf.Material, queue string, acked, unknown int) error {
	rows, err := clitool.Statuses(context.Background(), c.PeersFlag(), mat, time.Second)
	if err != nil {
		return err
	}
	for i, r := range rows {
		if !r.Up || r.Role != "primary" || !r.Serving {
			continue
		}
		code, text := httpGet(b, c, i, "/metrics")
		if code != 200 {
			return fmt.Errorf("%s /metrics: %d %s", r.Name, code, text)
		}
		key := `xce_queue_depth{queue="` + queue + `",state="pending"} `
		for _, line := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(line, key); ok {
				x, err := strconv.ParseFloat(v, 64) // 1e+06: the text format's float
				if err != nil {
					return fmt.Errorf("%s: %q: %w", r.Name, line, err)
				}
				if n := int(x); n < acked || n > acked+unknown {
					return fmt.Errorf("%w: %s counts %d pending jobs in %s; %d were acknowledged, %d had an unknown outcome", errMissing, r.Name, n, queue, acked, unknown)
				}
				return nil
			}
		}
		return fmt.Errorf("%s /metrics has no %s", r.Name, key)
	}
	return fmt.Errorf("%w: no serving primary to count on", client.ErrNoPrimary)
}

// leader waits for the cluster to converge and returns its primary, the
// standbys and the term.
func leader(b *testing.B, c *clitool.Cluster, wait time.Duration) (int, []int, uint64) {
	rows, p, err := c.WaitConverged(context.Background(), -1, wait)
	if err != nil {
		b.Fatalf("%v\n%s", err, fmtRows(rows))
	}
	var standbys []int
	for i := range c.Names {
		if i != p {
			standbys = append(standbys, i)
		}
	}
	return p, standbys, rows[p].Term
}

// checkpointJobs is the "(N jobs)" of a wal.checkpoint line.
func checkpointJobs(line string) string {
	_, rest, ok := strings.Cut(line, "(")
	if !ok {
		return "?"
	}
	n, _, _ := strings.Cut(rest, " jobs)")
	return n
}

// ckptHist is primary p's xce_checkpoint_duration_seconds count and sum.
func ckptHist(b *testing.B, c *clitool.Cluster, p int) (float64, float64) {
	m := scrape(b, c, p)
	return m["xce_checkpoint_duration_seconds_count"], m["xce_checkpoint_duration_seconds_sum"]
}

// scaleFreshStandby measures an open-ended 4-client load for 3 s with
// every standby in sync, then wipes standby s and restarts it, with the
// same load and the probe running until p reports it in sync. It returns
// what the loads got acknowledged.
func scaleFreshStandby(b *testing.B, c *clitool.Cluster, mat *tlsconf.Material, p, s int, probeID uint64, wait time.Duration, f scaleFigures) loadResult {
	spec := loadSpec{Queue: loadQueue, Clients: 4, Batch: *scaleBatch, Payload: scalePayload, Tolerate: true}
	base, err := startBulk(c.PeersFlag(), mat, spec)
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	base.stop()
	br, err := base.wait()
	if err != nil {
		b.Fatalf("baseline load: %v", err)
	}
	f["enqueue jobs/s, 4 clients, standbys in sync"] = fmt.Sprintf("%.0f", br.rate())

	if err := wipeStandby(c, mat, p, s); err != nil {
		b.Fatal(err)
	}
	poff := logOffset(c, p)
	pr, err := startProbe(c.PeersFlag(), mat, probeID, 5*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	ld, err := startBulk(c.PeersFlag(), mat, spec)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	start(b, c, s)
	at, syncErr := waitInSync(c, mat, p, []int{s}, wait)
	ld.stop()
	lr, err := ld.wait()
	pr.stop()
	if err != nil {
		b.Fatalf("load during the sync: %v", err)
	}
	f["fresh standby: exec to in sync"] = sinceOr(at.Sub(t0), syncErr)
	how := "catch-up from the log"
	if line := findLine(logSince(c, p, poff), "syncing "+c.Names[s]+" with a snapshot"); line != "" {
		_, how, _ = strings.Cut(line, "with a ")
		how, _, _ = strings.Cut(how, "\t")
	}
	f["fresh standby synced by"] = how
	f["primary's steps over 50 ms while it syncs"] = slowSteps(logSince(c, p, poff))
	f["enqueue jobs/s, 4 clients, while it syncs"] = fmt.Sprintf("%.0f", lr.rate())
	in := pr.window(t0, at)
	keepProbe(b, c, "sync", pr, t0, at)
	f["longest probe request while it syncs"] = fmt.Sprintf("%v (%d requests, %d errors)", in.max.Round(100*time.Microsecond), in.n, in.errors)
	if lr.Unknown > 0 || lr.Refused > 0 {
		f["enqueue jobs/s, 4 clients, while it syncs"] += fmt.Sprintf(" (%d unknown outcome, %d refused)", lr.Unknown, lr.Refused)
	}
	return loadResult{IDs: mergeIDs(br.IDs, lr.IDs), Unknown: br.Unknown + lr.Unknown}
}

// scaleFailover kills primary p with SIGKILL and times a standby
// reporting primary (status every 10 ms) and then serving jobs; then it
// watches the survivors for 3 s for two serving primaries at once. With
// -scale-restart-standby, the first standby is killed and started again
// and the kill comes that long after, under a 4-client load; with
// -scale-kill-in-checkpoint, the kill waits, under that load, for the
// first standby's checkpoint to begin and that long more; it returns
// what that load got acknowledged.
func scaleFailover(b *testing.B, c *clitool.Cluster, mat *tlsconf.Material, p int, standbys []int, wait time.Duration, f scaleFigures) (lr loadResult) {
	offs := map[int]int64{}
	for _, s := range standbys {
		offs[s] = logOffset(c, s)
	}
	// The first standby: not the fresh one, so its checkpoint builds on
	// the state its last one kept, and the one the election prefers (the
	// better priority) when both are in sync.
	s := standbys[0]
	if *scaleRestart > 0 {
		// A restarted standby holds no job state in memory until it builds
		// it again: the failover shows whether it had by then.
		stop(b, c, s, syscall.SIGKILL)
		start(b, c, s)
	}
	if *scaleRestart > 0 || *scaleKillIn > 0 {
		ld, err := startBulk(c.PeersFlag(), mat, loadSpec{Queue: loadQueue, Clients: 4, Batch: *scaleBatch, Payload: scalePayload, Tolerate: true})
		if err != nil {
			b.Fatal(err)
		}
		defer func() {
			ld.stop()
			var err error
			if lr, err = ld.wait(); err != nil {
				b.Fatalf("load during the failover: %v", err)
			}
		}()
	}
	if d := *scaleRestart; d > 0 {
		time.Sleep(d)
		f["failover: kill -9 after a standby's restart"] = fmt.Sprintf("%s restarted %v before, under load", c.Names[s], d)
	}
	if d := *scaleKillIn; d > 0 {
		waitLog(b, c, s, offs[s], "standby checkpoint: compacting", wait)
		time.Sleep(d)
		f["failover: kill -9 during a standby checkpoint"] = fmt.Sprintf("%s's, %v after it began", c.Names[s], d)
	}
	killed := time.Now()
	stop(b, c, p, syscall.SIGKILL)
	np, at, err := pollPrimary(c, mat, standbys, wait)
	f["failover: kill -9 to a standby reporting primary"] = sinceOr(at.Sub(killed), err)
	if err != nil {
		return
	}
	cl, err := newDoer(peersOf(c, np), mat, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	err = waitServing(context.Background(), cl, wait)
	f["failover: kill -9 to serving jobs"] = sinceOr(time.Since(killed), err)
	most := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		rows, err := clitool.Statuses(context.Background(), peersOf(c, standbys...), mat, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, r := range rows {
			if r.Up && r.Role == "primary" && r.Serving {
				n++
			}
		}
		most = max(most, n)
	}
	if most > 1 {
		f["dual primary in the 3 s after"] = fmt.Sprintf("YES: %d serving primaries at once", most)
	} else {
		f["dual primary in the 3 s after"] = "none seen (status every 50 ms)"
	}
	f["the new primary's state came from"] = c.Names[np] + ": " + recoveredFrom(logSince(c, np, offs[np]))
	return
}

// recoveredFrom is how a promoted node's log says it got its job state.
func recoveredFrom(log string) string {
	line := findLine(log, "wal.snapshot-loaded")
	if line == "" {
		return "no snapshot loaded (replayed its log)"
	}
	_, text, _ := strings.Cut(line, "\tINFO\t")
	text, _, _ = strings.Cut(text, "\t")
	return text
}

// sinceOr is d, or why it was not reached.
func sinceOr(d time.Duration, err error) string {
	if err != nil {
		return "not within the wait: " + err.Error()
	}
	return d.Round(time.Millisecond).String()
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func must[T any](b *testing.B, f func() (T, error)) T {
	b.Helper()
	v, err := f()
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// keepLogs copies the node logs of c into -scale-logs, if set: the
// benchmark's figures say what happened, the logs say why.
func keepLogs(b *testing.B, c *clitool.Cluster, nodes int) {
	if *scaleLogs == "" {
		return
	}
	if err := os.MkdirAll(*scaleLogs, 0o755); err != nil {
		b.Errorf("-scale-logs: %v", err)
		return
	}
	for i, name := range c.Names {
		data, err := os.ReadFile(logPath(c, i))
		if err == nil {
			err = os.WriteFile(filepath.Join(*scaleLogs, fmt.Sprintf("%d-%s.log", nodes, name)), data, 0o644)
		}
		if err != nil {
			b.Errorf("-scale-logs: %s: %v", name, err)
		}
	}
}

// keepProbe writes the probe's requests of at least 20 ms in [from, to]
// to -scale-logs (<nodes>-probe-<phase>.txt), times in UTC as the nodes'
// logs have them.
func keepProbe(b *testing.B, c *clitool.Cluster, phase string, pr *probe, from, to time.Time) {
	if *scaleLogs == "" {
		return
	}
	if err := os.MkdirAll(*scaleLogs, 0o755); err != nil {
		b.Errorf("-scale-logs: %v", err)
		return
	}
	head := fmt.Sprintf("# %s window %s .. %s (UTC): sent, took, error\n", phase, from.UTC().Format("15:04:05.000000"), to.UTC().Format("15:04:05.000000"))
	name := filepath.Join(*scaleLogs, fmt.Sprintf("%d-probe-%s.txt", len(c.Names), phase))
	if err := os.WriteFile(name, []byte(head+pr.slow(from, to, 20*time.Millisecond)), 0o644); err != nil {
		b.Errorf("-scale-logs: %v", err)
	}
}

// slowSteps summarises the loop.slow-step lines of a node's log: how many
// steps took over runner.SlowStep, the longest and its input.
func slowSteps(log string) string {
	var n int
	var longest time.Duration
	var what string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "loop.slow-step") {
			continue
		}
		_, rest, _ := strings.Cut(line, "slow step: ")
		in, took, _ := strings.Cut(rest, " took ")
		took, _, _ = strings.Cut(took, "\t")
		d, err := time.ParseDuration(took)
		if err != nil {
			continue
		}
		n++
		if d > longest {
			longest, what = d, in
		}
	}
	if n == 0 {
		return "none"
	}
	return fmt.Sprintf("%d, longest %v (%s)", n, longest, what)
}
