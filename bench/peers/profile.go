package main

// -profile-dir: after the measured rounds, one more insert phase and one
// more work phase on each xce side, with a CPU profile of every node
// (its --pprof endpoint) and of this process (the clients) over the same
// window, and the nodes' fsync histograms read before and after; then a
// table of CPU per job by category (budget.go) for the primary, the
// standbys together and the client. The node's endpoint profiles for a
// whole number of seconds, so the window is twice the phase's median
// duration in the rounds (scaled to -profile-jobs) plus a second: the
// idle tail costs little CPU, and a phase longer than its window is an
// error rather than a profile of part of it.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"
)

// phaseProfile is what one profiled phase measured.
type phaseProfile struct {
	jobs   int
	took   time.Duration
	window int          // seconds
	nodes  []cpuBudget  // by node index
	fsync  []fsyncStats // by node index: the phase's count and seconds
	client cpuBudget
}

func profilePass(ctx context.Context, xs *xceSide, s shape, res []map[string]result, key, dir string, jobs int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ps := s
	ps.Jobs = jobs
	prim := xs.cluster.index(xs.primary)
	if prim < 0 {
		return fmt.Errorf("the primary %s is none of the nodes", xs.primary)
	}
	for _, ph := range []struct {
		name string
		fig  figure
		run  func() (time.Duration, error)
	}{
		{"insert", figInsert, func() (time.Duration, error) { return insertAll(ctx, ps, xs.insertBatch) }},
		{"work", figWork, func() (time.Duration, error) { return xs.work(ctx, ps) }},
	} {
		r := median(column(res, key, ph.fig))
		if math.IsNaN(r) || r <= 0 {
			return fmt.Errorf("no %s rate measured to size the profile window", ph.name)
		}
		secs := int(math.Ceil(2*float64(jobs)/r)) + 1
		base := filepath.Join(dir, fmt.Sprintf("%s-%s", key, ph.name))
		pp, err := profileWindow(ctx, xs.cluster, secs, base, ph.run)
		if err != nil {
			return fmt.Errorf("%s: %w", ph.name, err)
		}
		if pp.took > time.Duration(secs)*time.Second {
			return fmt.Errorf("%s took %v, longer than the %d s profile window", ph.name, pp.took, secs)
		}
		pp.jobs = jobs
		printBudget(os.Stdout, labels[key], ph.name, base, prim, pp)
	}
	return nil
}

// profileWindow profiles every node of xc and this process for secs
// seconds while phase runs, and writes the profiles under base.
func profileWindow(ctx context.Context, xc *xceCluster, secs int, base string, phase func() (time.Duration, error)) (phaseProfile, error) {
	n := len(xc.c.Names)
	pp := phaseProfile{window: secs, nodes: make([]cpuBudget, n), fsync: make([]fsyncStats, n)}
	before := make([]fsyncStats, n)
	for i := range n {
		b, err := httpGet(ctx, xc.metricsURL(i)+"/metrics")
		if err == nil {
			before[i], err = parseFsync(b)
		}
		if err != nil {
			return pp, fmt.Errorf("node %s metrics: %w", xc.c.Names[i], err)
		}
	}
	var cbuf bytes.Buffer
	if err := pprof.StartCPUProfile(&cbuf); err != nil {
		return pp, err
	}
	bodies := make([][]byte, n)
	var g errgroup.Group
	for i := range n {
		g.Go(func() error {
			b, err := httpGet(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", xc.metricsURL(i), secs))
			bodies[i] = b
			return err
		})
	}
	took, perr := phase()
	gerr := g.Wait()
	pprof.StopCPUProfile()
	pp.took = took
	if perr != nil {
		return pp, perr
	}
	if gerr != nil {
		return pp, gerr
	}
	for i := range n {
		b, err := httpGet(ctx, xc.metricsURL(i)+"/metrics")
		if err != nil {
			return pp, err
		}
		after, err := parseFsync(b)
		if err != nil {
			return pp, fmt.Errorf("node %s metrics: %w", xc.c.Names[i], err)
		}
		pp.fsync[i] = fsyncStats{count: after.count - before[i].count, sum: after.sum - before[i].sum}
		path := fmt.Sprintf("%s-%s.pprof", base, xc.c.Names[i])
		if err := os.WriteFile(path, bodies[i], 0o644); err != nil {
			return pp, err
		}
		if pp.nodes[i], err = budgetOf(bytes.NewReader(bodies[i])); err != nil {
			return pp, fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := os.WriteFile(base+"-client.pprof", cbuf.Bytes(), 0o644); err != nil {
		return pp, err
	}
	var err error
	pp.client, err = budgetOf(bytes.NewReader(cbuf.Bytes()))
	return pp, err
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	return b, err
}

// printBudget writes one phase's CPU per job by category: the primary,
// the standbys together, the client.
func printBudget(w io.Writer, label, phase, base string, prim int, pp phaseProfile) {
	perJob := func(d time.Duration) string {
		return fmt.Sprintf("%.2f", float64(d)/float64(time.Microsecond)/float64(pp.jobs))
	}
	var standby cpuBudget
	standby.byCat = map[string]time.Duration{}
	var sfs fsyncStats
	for i, b := range pp.nodes {
		if i == prim {
			continue
		}
		for k, v := range b.byCat {
			standby.byCat[k] += v
		}
		standby.total += b.total
		sfs.count += pp.fsync[i].count
		sfs.sum += pp.fsync[i].sum
	}
	cols := []string{"category", "primary µs/job"}
	if len(pp.nodes) > 1 {
		cols = append(cols, "standbys µs/job")
	}
	cols = append(cols, "client µs/job")
	fmt.Fprintf(w, "\nCPU per job, %s, %s phase: %d jobs in %v (profiles over %d s: %s-*.pprof)\n",
		label, phase, pp.jobs, pp.took.Round(time.Millisecond), pp.window, base)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	row := func(name string, get func(cpuBudget) time.Duration) {
		cells := []string{name, perJob(get(pp.nodes[prim]))}
		if len(pp.nodes) > 1 {
			cells = append(cells, perJob(get(standby)))
		}
		cells = append(cells, perJob(get(pp.client)))
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	for _, c := range budgetCategories {
		row(c, func(b cpuBudget) time.Duration { return b.byCat[c] })
	}
	row("total CPU", func(b cpuBudget) time.Duration { return b.total })
	frow := func(name string, get func(fsyncStats) float64) {
		cells := []string{name, fmt.Sprintf("%.2f", get(pp.fsync[prim]))}
		if len(pp.nodes) > 1 {
			cells = append(cells, fmt.Sprintf("%.2f", get(sfs)))
		}
		fmt.Fprintln(tw, strings.Join(append(cells, ""), "\t"))
	}
	frow("fsyncs per 1000 jobs", func(st fsyncStats) float64 { return 1000 * st.count / float64(pp.jobs) })
	frow("fsync wait µs/job (off CPU, the node's histogram)", func(st fsyncStats) float64 { return st.sum * 1e6 / float64(pp.jobs) })
	tw.Flush()
}
