package main

// -profile-dir: after the measured rounds, one more insert phase, one
// more work phase and one more run of one client's single submits on
// each xce side, with a CPU profile of every node
// (its --pprof endpoint) and of this process (the clients) while the
// phase runs, and the nodes' fsync histograms read before and after;
// then a table of CPU per job by category (budget.go) for the primary,
// the standbys together and the client. The node's endpoint profiles for
// a whole number of seconds, so each node is profiled in back-to-back
// one-second windows until the phase is over and the windows merged:
// the gaps between windows are a request's round trip, and the last
// window's idle tail costs little CPU.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/pprof/profile"
	"golang.org/x/sync/errgroup"
)

// phaseProfile is what one profiled phase measured.
type phaseProfile struct {
	jobs   int
	took   time.Duration
	window int         // seconds profiled (the most of any node)
	nodes  []cpuBudget // by node index
	fsync  []histStats // by node index: the phase's fsyncs
	ckpt   []histStats // by node index: the checkpoints completed in the phase
	client cpuBudget
}

func profilePass(ctx context.Context, xs *xceSide, s shape, key, dir string, jobs int) error {
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
		jobs int // what the phase's CPU is divided by
		run  func() (time.Duration, error)
	}{
		{"insert", jobs, func() (time.Duration, error) { return insertAll(ctx, ps, xs.insertBatch) }},
		{"work", jobs, func() (time.Duration, error) { return xs.work(ctx, ps) }},
		// One client's single submits, one after another: the shape of
		// the 1-client latency target, whose CPU per submit is the cost
		// of one replicated round trip rather than a share of a batch.
		{"submit", ps.Submits, func() (time.Duration, error) {
			t0 := time.Now()
			_, err := submitLatency(ctx, ps, 1, xs.submit)
			return time.Since(t0), err
		}},
		// The same submits from 16 clients at once: the shape of the
		// 16-client target, where the requests share their fsyncs and the
		// CPU per request bounds how many go round in a millisecond.
		{"submit16", ps.Submits, func() (time.Duration, error) {
			t0 := time.Now()
			_, err := submitLatency(ctx, ps, 16, xs.submit)
			return time.Since(t0), err
		}},
	} {
		base := filepath.Join(dir, fmt.Sprintf("%s-%s", key, ph.name))
		pp, err := profileWindow(ctx, xs.cluster, base, ph.run)
		if err != nil {
			return fmt.Errorf("%s: %w", ph.name, err)
		}
		pp.jobs = ph.jobs
		printBudget(os.Stdout, labels[key], ph.name, base, prim, pp)
	}
	return nil
}

// profileWindow profiles every node of xc and this process while phase
// runs, and writes the profiles under base.
func profileWindow(ctx context.Context, xc *xceCluster, base string, phase func() (time.Duration, error)) (phaseProfile, error) {
	n := len(xc.c.Names)
	pp := phaseProfile{nodes: make([]cpuBudget, n), fsync: make([]histStats, n), ckpt: make([]histStats, n)}
	// metrics reads node i's fsync and checkpoint histograms.
	metrics := func(i int) (fsync, ckpt histStats, err error) {
		b, err := httpGet(ctx, xc.metricsURL(i)+"/metrics")
		if err == nil {
			fsync, err = parseHistogram(b, metricFsync)
		}
		if err == nil {
			ckpt, err = parseHistogram(b, metricCheckpoint)
		}
		if err != nil {
			err = fmt.Errorf("node %s metrics: %w", xc.c.Names[i], err)
		}
		return fsync, ckpt, err
	}
	fsBefore, ckBefore := make([]histStats, n), make([]histStats, n)
	allocsBefore := make([][]byte, n)
	for i := range n {
		var err error
		if fsBefore[i], ckBefore[i], err = metrics(i); err != nil {
			return pp, err
		}
		// The allocation profile counts from the process's start: the
		// phase's allocations are the one after it less this one
		// (go tool pprof -diff_base).
		if allocsBefore[i], err = httpGet(ctx, xc.metricsURL(i)+"/debug/pprof/allocs"); err != nil {
			return pp, err
		}
	}
	var cbuf bytes.Buffer
	if err := pprof.StartCPUProfile(&cbuf); err != nil {
		return pp, err
	}
	bodies := make([][]byte, n)
	windows := make([]int, n)
	done := make(chan struct{})
	var g errgroup.Group
	for i := range n {
		g.Go(func() error {
			var parts []*profile.Profile
			for {
				b, err := httpGet(ctx, xc.metricsURL(i)+"/debug/pprof/profile?seconds=1")
				if err != nil {
					return err
				}
				p, err := profile.ParseData(b)
				if err != nil {
					return fmt.Errorf("node %s profile: %w", xc.c.Names[i], err)
				}
				parts = append(parts, p)
				select {
				case <-done:
					merged, err := profile.Merge(parts)
					if err != nil {
						return fmt.Errorf("node %s: merge %d profiles: %w", xc.c.Names[i], len(parts), err)
					}
					var buf bytes.Buffer
					if err := merged.Write(&buf); err != nil {
						return err
					}
					bodies[i], windows[i] = buf.Bytes(), len(parts)
					return nil
				default:
				}
			}
		})
	}
	took, perr := phase()
	close(done)
	gerr := g.Wait()
	pprof.StopCPUProfile()
	pp.window = slices.Max(windows)
	pp.took = took
	if perr != nil {
		return pp, perr
	}
	if gerr != nil {
		return pp, gerr
	}
	for i := range n {
		fs, ck, err := metrics(i)
		if err != nil {
			return pp, err
		}
		pp.fsync[i], pp.ckpt[i] = fs.minus(fsBefore[i]), ck.minus(ckBefore[i])
		path := fmt.Sprintf("%s-%s.pprof", base, xc.c.Names[i])
		if err := os.WriteFile(path, bodies[i], 0o644); err != nil {
			return pp, err
		}
		allocs, err := httpGet(ctx, xc.metricsURL(i)+"/debug/pprof/allocs")
		if err != nil {
			return pp, err
		}
		if err := os.WriteFile(fmt.Sprintf("%s-%s.allocs-before.pprof", base, xc.c.Names[i]), allocsBefore[i], 0o644); err != nil {
			return pp, err
		}
		if err := os.WriteFile(fmt.Sprintf("%s-%s.allocs-after.pprof", base, xc.c.Names[i]), allocs, 0o644); err != nil {
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
	var sfs histStats
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
	fmt.Fprintf(w, "\nCPU per job, %s, %s phase: %d jobs in %v (each node profiled over %d s: %s-*.pprof)\n",
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
	// hrow is a row from the nodes' histograms; standbys false leaves
	// their cell out (the checkpoint histogram observes a primary's only).
	hrow := func(name string, prim, sb histStats, standbys bool, get func(histStats) float64) {
		cells := []string{name, fmt.Sprintf("%.2f", get(prim))}
		if len(pp.nodes) > 1 {
			if standbys {
				cells = append(cells, fmt.Sprintf("%.2f", get(sb)))
			} else {
				cells = append(cells, "not observed")
			}
		}
		fmt.Fprintln(tw, strings.Join(append(cells, ""), "\t"))
	}
	perK := func(st histStats) float64 { return 1000 * st.count / float64(pp.jobs) }
	usPerJob := func(st histStats) float64 { return st.sum * 1e6 / float64(pp.jobs) }
	hrow("fsyncs per 1000 jobs", pp.fsync[prim], sfs, true, perK)
	hrow("fsync wait µs/job (off CPU, the node's histogram)", pp.fsync[prim], sfs, true, usPerJob)
	hrow("checkpoints completed in the phase", pp.ckpt[prim], histStats{}, false, func(st histStats) float64 { return st.count })
	hrow("checkpoint time µs/job (wall, the node's histogram)", pp.ckpt[prim], histStats{}, false, usPerJob)
	tw.Flush()
}
