package main

// The tables at the end of a run: each round's figures, each system's
// medians, xce's ratios to each peer round by round, and issue 23's
// targets met or missed. Every ratio comes from one round of one run
// (both systems measured minutes apart on the same machine); medians are
// over rounds.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// figure is one measured quantity of a result.
type figure struct {
	name   string
	higher bool // higher is better (throughput); otherwise lower is (latency)
	get    func(result) float64
}

var (
	figInsert = figure{"inserted jobs/s", true, func(r result) float64 { return r.Insert }}
	figWork   = figure{"worked jobs/s", true, func(r result) float64 { return r.Work }}
)

// figP50 is the submit p50 of the i-th client count.
func figP50(i, clients int) figure {
	return figure{fmt.Sprintf("submit p50, %d client(s)", clients), false, func(r result) float64 {
		if i >= len(r.Lat) {
			return 0
		}
		return float64(r.Lat[i].P50)
	}}
}

// ratios is num's figure over den's, in each round that measured both.
func ratios(res []map[string]result, num, den string, f figure) []float64 {
	var out []float64
	for _, row := range res {
		n, ok1 := row[num]
		d, ok2 := row[den]
		if ok1 && ok2 && f.get(d) != 0 {
			out = append(out, f.get(n)/f.get(d))
		}
	}
	return out
}

// betterPeerRatios is num's figure over the better of the peers' in each
// round that measured num and every peer (the higher throughput, the
// lower latency), and which peer was the better one.
func betterPeerRatios(res []map[string]result, num string, peers []string, f figure) ([]float64, []string) {
	var out []float64
	var best []string
	for _, row := range res {
		n, ok := row[num]
		if !ok || len(peers) == 0 {
			continue
		}
		bestKey := ""
		for _, p := range peers {
			r, ok := row[p]
			if !ok {
				bestKey = ""
				break
			}
			if bestKey == "" || (f.higher && f.get(r) > f.get(row[bestKey])) || (!f.higher && f.get(r) < f.get(row[bestKey])) {
				bestKey = p
			}
		}
		if bestKey == "" || f.get(row[bestKey]) == 0 {
			continue
		}
		out = append(out, f.get(n)/f.get(row[bestKey]))
		best = append(best, bestKey)
	}
	return out, best
}

// target is one of issue 23's targets: num's figure against the better
// of peers', at least bound for throughput, at most bound for latency.
type target struct {
	what  string
	num   string
	peers []string
	fig   figure
	bound float64
}

// issueTargets are issue 23's targets for a run whose latency client
// counts are clients (a target whose count was not measured is left out).
func issueTargets(clients []int) []target {
	t := []target{
		{"3 nodes: worked >= 3x the better peer", sysXce3, []string{sysNATS3, sysRiver}, figWork, 3},
		{"3 nodes: inserted >= 3x the better peer", sysXce3, []string{sysNATS3, sysRiver}, figInsert, 3},
	}
	if i := slices.Index(clients, 1); i >= 0 {
		t = append(t, target{"3 nodes: single-submit p50, 1 client <= 0.8x NATS JetStream's", sysXce3, []string{sysNATS3}, figP50(i, 1), 0.8})
	}
	if i := slices.Index(clients, 16); i >= 0 {
		t = append(t, target{"3 nodes: submit p50, 16 clients <= 0.5x River's", sysXce3, []string{sysRiver}, figP50(i, 16), 0.5})
	}
	return append(t, target{"1 node: worked >= 6x River's", sysXce1, []string{sysRiver}, figWork, 6})
}

// verdict is a target's outcome in one run.
type verdict struct {
	perRound []float64
	best     []string // the better peer in each round
	median   float64
	met      bool
}

// evaluate judges t on the median of its per-round ratios; ok is false
// when no round measured t's system and all its peers.
func evaluate(t target, res []map[string]result) (verdict, bool) {
	q, best := betterPeerRatios(res, t.num, t.peers, t.fig)
	if len(q) == 0 {
		return verdict{}, false
	}
	v := verdict{perRound: q, best: best, median: median(q)}
	if t.fig.higher {
		v.met = v.median >= t.bound
	} else {
		v.met = v.median <= t.bound
	}
	return v, true
}

// printTables writes the run's tables; sys is the systems in -systems order.
// printWarmup gives the warm-up rounds' figures, if any ran: each
// system's first round on its fresh processes, counted in no median.
func printWarmup(w io.Writer, s shape, sys []string, warm []map[string]result) {
	if len(warm) == 0 {
		return
	}
	fmt.Fprintln(w, "warm-up rounds (not measured: in no median or ratio):")
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	printRounds(tw, s, sys, warm, "warm-up ")
	tw.Flush()
	fmt.Fprintln(w)
}

// printRounds writes the header and a row per round and system to tw,
// each round numbered after prefix.
func printRounds(tw io.Writer, s shape, sys []string, res []map[string]result, prefix string) {
	cols := []string{"round", "system", "insert jobs/s", "work jobs/s"}
	for _, c := range s.Clients {
		cols = append(cols, fmt.Sprintf("submit p50 / p99 ms, %d client(s)", c))
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for r, row := range res {
		for _, key := range sys {
			got, ok := row[key]
			if !ok {
				continue
			}
			cells := []string{prefix + fmt.Sprint(r+1), labels[key], fmt.Sprintf("%.0f", got.Insert), fmt.Sprintf("%.0f", got.Work)}
			for _, l := range got.Lat {
				cells = append(cells, l.String())
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
	}
}

func printTables(w io.Writer, s shape, sys []string, res []map[string]result) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	printRounds(tw, s, sys, res, "")
	for _, key := range sys {
		cells := []string{"median", labels[key]}
		for _, f := range []figure{figInsert, figWork} {
			cells = append(cells, fmt.Sprintf("%.0f", median(column(res, key, f))))
		}
		for i := range s.Clients {
			p50 := median(column(res, key, figP50(i, s.Clients[i])))
			p99 := median(column(res, key, figure{get: func(r result) float64 {
				if i >= len(r.Lat) {
					return 0
				}
				return float64(r.Lat[i].P99)
			}}))
			cells = append(cells, fmt.Sprintf("%.2f / %.2f", p50/1e6, p99/1e6))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()

	// xce against each peer of the same node count, and River.
	pairs := [][2]string{{sysXce3, sysNATS3}, {sysXce3, sysRiver}, {sysXce1, sysNATS1}, {sysXce1, sysRiver}}
	figs := []figure{figInsert, figWork}
	for i, c := range s.Clients {
		figs = append(figs, figP50(i, c))
	}
	fmt.Fprintln(w, "\nxce/peer, each round and the median (throughput: above 1 is more for xce; latency: below 1 is faster for xce):")
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	cols := []string{"ratio", "round"}
	for _, f := range figs {
		cols = append(cols, f.name)
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for _, p := range pairs {
		if !slices.Contains(sys, p[0]) || !slices.Contains(sys, p[1]) {
			continue
		}
		name := labels[p[0]] + " / " + labels[p[1]]
		per := make([][]float64, len(figs))
		for k, f := range figs {
			per[k] = ratios(res, p[0], p[1], f)
		}
		for r := range per[0] {
			cells := []string{name, fmt.Sprint(r + 1)}
			for k := range figs {
				cells = append(cells, fmt.Sprintf("%.2fx", per[k][r]))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if len(per[0]) > 0 {
			cells := []string{name, "median"}
			for k := range figs {
				cells = append(cells, fmt.Sprintf("%.2fx", median(per[k])))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
	}
	tw.Flush()

	fmt.Fprintln(w, "\nissue 23's targets (medians over rounds of ratios within a round):")
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tper round (better peer)\tmedian\toutcome")
	for _, t := range issueTargets(s.Clients) {
		v, ok := evaluate(t, res)
		if !ok {
			fmt.Fprintf(tw, "%s\tnot measured (needs %s and %s)\t\t\n", t.what, t.num, strings.Join(t.peers, ", "))
			continue
		}
		var per []string
		for r, q := range v.perRound {
			per = append(per, fmt.Sprintf("%.2fx (%s)", q, labels[v.best[r]]))
		}
		outcome := "missed"
		if v.met {
			outcome = "met"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2fx\t%s\n", t.what, strings.Join(per, ", "), v.median, outcome)
	}
	tw.Flush()
}

// column is key's figure in each round that measured key.
func column(res []map[string]result, key string, f figure) []float64 {
	var out []float64
	for _, row := range res {
		if r, ok := row[key]; ok {
			out = append(out, f.get(r))
		}
	}
	return out
}
