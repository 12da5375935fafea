package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRoundOrder(t *testing.T) {
	sys := []string{"a", "b", "c"}
	for _, c := range []struct {
		round int
		want  []string
	}{
		{0, []string{"a", "b", "c"}},
		{1, []string{"c", "b", "a"}},
		{2, []string{"a", "b", "c"}},
		{3, []string{"c", "b", "a"}},
	} {
		if got := roundOrder(sys, c.round); !slices.Equal(got, c.want) {
			t.Errorf("round %d: %v, want %v", c.round, got, c.want)
		}
	}
	if !slices.Equal(sys, []string{"a", "b", "c"}) {
		t.Errorf("roundOrder reordered its input: %v", sys)
	}
}

func TestParseSystems(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"river,xce1", []string{"river", "xce1"}, ""},
		{" nats3 , xce3 ", []string{"nats3", "xce3"}, ""},
		{strings.Join(allSystems, ","), allSystems, ""},
		{"river,kafka", nil, `unknown system "kafka"`},
		{"xce1,xce1", nil, `"xce1" given twice`},
		{"", nil, `unknown system ""`},
		{"river,", nil, `unknown system ""`},
	} {
		got, err := parseSystems(c.in)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("parseSystems(%q): %v", c.in, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("parseSystems(%q): error %v, want one saying %s", c.in, err, c.wantErr)
		case c.wantErr == "" && !slices.Equal(got, c.want):
			t.Errorf("parseSystems(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// runOf builds a run's results from per-round work rates and 1-client p50s
// (ms) by system; a system absent from a round's map was not measured.
func runOf(rounds ...map[string][2]float64) []map[string]result {
	var out []map[string]result
	for _, r := range rounds {
		row := map[string]result{}
		for k, v := range r {
			row[k] = result{Work: v[0], Insert: 2 * v[0], Lat: []latency{{P50: time.Duration(v[1] * 1e6)}, {P50: time.Duration(4 * v[1] * 1e6)}}}
		}
		out = append(out, row)
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !near(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestRatios(t *testing.T) {
	res := runOf(
		map[string][2]float64{"xce3": {300, 1}, "nats3": {100, 2}},
		map[string][2]float64{"xce3": {200, 1}},                    // nats3 missing: skipped
		map[string][2]float64{"xce3": {500, 3}, "nats3": {250, 2}}, // 2x
		map[string][2]float64{"xce3": {500, 3}, "nats3": {0, 0}},   // zero denominator: skipped
	)
	for _, c := range []struct {
		f    figure
		want []float64
	}{
		{figWork, []float64{3, 2}},
		{figInsert, []float64{3, 2}},
		{figP50(0, 1), []float64{0.5, 1.5}},
		{figP50(1, 16), []float64{0.5, 1.5}},
		{figP50(5, 99), nil}, // no such client count: 0/0 skipped
	} {
		if got := ratios(res, "xce3", "nats3", c.f); !equalFloats(got, c.want) {
			t.Errorf("%s: %v, want %v", c.f.name, got, c.want)
		}
	}
}

func TestBetterPeerRatios(t *testing.T) {
	res := runOf(
		map[string][2]float64{"xce3": {300, 1}, "nats3": {100, 0.5}, "river": {150, 2}},
		map[string][2]float64{"xce3": {300, 1}, "nats3": {200, 4}, "river": {100, 2}},
		map[string][2]float64{"xce3": {300, 1}, "nats3": {200, 4}}, // river missing: skipped
	)
	for _, c := range []struct {
		name     string
		peers    []string
		f        figure
		want     []float64
		wantBest []string
	}{
		{"throughput takes the higher", []string{"nats3", "river"}, figWork, []float64{2, 1.5}, []string{"river", "nats3"}},
		{"latency takes the lower", []string{"nats3", "river"}, figP50(0, 1), []float64{2, 0.5}, []string{"nats3", "river"}},
		{"one peer", []string{"nats3"}, figWork, []float64{3, 1.5, 1.5}, []string{"nats3", "nats3", "nats3"}},
		{"no peers", nil, figWork, nil, nil},
		{"an unmeasured system", []string{"kafka"}, figWork, nil, nil},
	} {
		got, best := betterPeerRatios(res, "xce3", c.peers, c.f)
		if !equalFloats(got, c.want) || !slices.Equal(best, c.wantBest) {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, best, c.want, c.wantBest)
		}
	}
}

func TestEvaluate(t *testing.T) {
	res := runOf(
		map[string][2]float64{"xce3": {300, 1}, "nats3": {100, 2}},
		map[string][2]float64{"xce3": {250, 1.8}, "nats3": {100, 2}},
	)
	for _, c := range []struct {
		name   string
		t      target
		ok     bool
		median float64
		met    bool
	}{
		{"throughput at the bound is met", target{num: "xce3", peers: []string{"nats3"}, fig: figWork, bound: 2.75}, true, 2.75, true},
		{"throughput under the bound", target{num: "xce3", peers: []string{"nats3"}, fig: figWork, bound: 3}, true, 2.75, false},
		{"latency under the bound is met", target{num: "xce3", peers: []string{"nats3"}, fig: figP50(0, 1), bound: 0.8}, true, 0.7, true},
		{"latency over the bound", target{num: "xce3", peers: []string{"nats3"}, fig: figP50(0, 1), bound: 0.6}, true, 0.7, false},
		{"not measured", target{num: "xce1", peers: []string{"river"}, fig: figWork, bound: 6}, false, 0, false},
	} {
		v, ok := evaluate(c.t, res)
		if ok != c.ok || (ok && (!near(v.median, c.median) || v.met != c.met)) {
			t.Errorf("%s: %+v %v, want median %v met %v ok %v", c.name, v, ok, c.median, c.met, c.ok)
		}
	}
}

func TestIssueTargets(t *testing.T) {
	for _, c := range []struct {
		clients []int
		want    int
	}{
		{[]int{1, 16}, 5},
		{[]int{1}, 4},
		{[]int{16}, 4},
		{[]int{4}, 3},
	} {
		ts := issueTargets(c.clients)
		if len(ts) != c.want {
			t.Errorf("clients %v: %d targets, want %d", c.clients, len(ts), c.want)
		}
		for _, x := range ts {
			if x.bound <= 0 || len(x.peers) == 0 || x.num == "" {
				t.Errorf("clients %v: target %q incomplete", c.clients, x.what)
			}
		}
	}
}
