package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
)

// BenchmarkSubmitLatency times single Submits, one after another from
// each of 1 or 16 clients, on one node and on three in quorum mode (issue
// 9's target: p50 <= 450 µs on three nodes, 1 client; issue 23's compare
// 1 and 16 clients with the peers), and reports from each node's metrics
// its mean fsync and step and its fsyncs and steps per submit. Each b.N
// is one round of submits.
//
//	go test ./integration -run '^$' -bench SubmitLatency -benchtime 3x
func BenchmarkSubmitLatency(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("nodes=%d/clients=%d", nodes, clients), func(b *testing.B) { submitLatency(b, nodes, clients) })
		}
	}
}

// submitLatency times single submits from clients concurrent clients,
// each with its own connection, every one waiting for its answer before
// its next submit.
func submitLatency(b *testing.B, nodes, clients int) {
	const warm, timed = 200, 2000
	c := newCluster(b, nodes)
	c.MetricsPorts = freePorts(b, nodes) // for the per-node figures
	install(b, c, 0, configBlob(b, "bench", 2, 0))
	for i := range c.Names {
		start(b, c, i)
	}
	if nodes == 1 {
		waitRole(b, c, 0, "primary", 20*time.Second)
	} else {
		converge(b, c, -1, 30*time.Second)
	}
	cls := make([]*client.Client, clients)
	for k := range cls {
		cl, err := client.NewFromFlag(c.PeersFlag(), admin(b, c), client.Options{Timeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		cls[k] = cl
	}
	ctx := context.Background()
	if err := waitServing(ctx, &jobDoer{cl: cls[0]}, 30*time.Second); err != nil {
		b.Fatal(err)
	}
	req := &schema.SubmitRequest{Queue: "q000001-", Payload: make([]byte, 200)}
	// run has every client submit n jobs, one after another, and returns
	// each submit's time.
	run := func(n int) []time.Duration {
		lats := make([][]time.Duration, clients)
		var g errgroup.Group
		for k, cl := range cls {
			g.Go(func() error {
				for range n {
					t := time.Now()
					if _, err := cl.Submit(ctx, req); err != nil {
						return err
					}
					lats[k] = append(lats[k], time.Since(t))
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		return slices.Concat(lats...)
	}
	run(warm / clients)
	before := make([]map[string]float64, nodes)
	for i := range nodes {
		before[i] = scrape(b, c, i)
	}
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		lat = append(lat, run(timed/clients)...)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds()), "p90-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	// Where a submit's time goes, from each node's own histograms over
	// the timed submits: the mean WAL fsync and event-loop step, and the
	// steps per submit (n0 is the first node, not always the primary).
	for i := range nodes {
		after := scrape(b, c, i)
		mean := func(name, labels string) float64 {
			n := after[name+"_count"+labels] - before[i][name+"_count"+labels]
			if n == 0 {
				return 0
			}
			return (after[name+"_sum"+labels] - before[i][name+"_sum"+labels]) / n * 1e6
		}
		steps := after["xce_step_duration_seconds_count"] - before[i]["xce_step_duration_seconds_count"]
		b.ReportMetric(mean("xce_fsync_duration_seconds", `{target="file"}`), fmt.Sprintf("n%d-fsync-µs", i))
		b.ReportMetric(mean("xce_step_duration_seconds", ""), fmt.Sprintf("n%d-step-µs", i))
		b.ReportMetric(steps/float64(len(lat)), fmt.Sprintf("n%d-steps/submit", i))
		fsyncs := after[`xce_fsync_duration_seconds_count{target="file"}`] - before[i][`xce_fsync_duration_seconds_count{target="file"}`]
		b.ReportMetric(fsyncs/float64(len(lat)), fmt.Sprintf("n%d-fsyncs/submit", i))
	}
}
