package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
)

// BenchmarkSubmitLatency times single Submits one after another from one
// client, on one node and on three in quorum mode (issue 9's target: p50
// <= 450 µs on three nodes). Each b.N is one round of submits.
//
//	go test ./integration -run '^$' -bench SubmitLatency -benchtime 3x
func BenchmarkSubmitLatency(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) { submitLatency(b, nodes) })
	}
}

func submitLatency(b *testing.B, nodes int) {
	const warm, timed = 200, 2000
	c := newCluster(b, nodes)
	install(b, c, 0, configBlob(b, "bench", 2, 0))
	for i := range c.Names {
		start(b, c, i)
	}
	if nodes == 1 {
		waitRole(b, c, 0, "primary", 20*time.Second)
	} else {
		converge(b, c, -1, 30*time.Second)
	}
	cl, err := client.NewFromFlag(c.PeersFlag(), admin(b, c), client.Options{Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := waitServing(ctx, &jobDoer{cl: cl}, 30*time.Second); err != nil {
		b.Fatal(err)
	}
	req := &schema.SubmitRequest{Queue: "q000001-", Payload: make([]byte, 200)}
	submit := func() time.Duration {
		t := time.Now()
		if _, err := cl.Submit(ctx, req); err != nil {
			b.Fatal(err)
		}
		return time.Since(t)
	}
	for range warm {
		submit()
	}
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		for range timed {
			lat = append(lat, submit())
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds()), "p90-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
