package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
)

// BenchmarkQueueThroughput is the load generator of DESIGN §6's queue
// row, through the client API (package client): one durable controller
// on loopback, 64 clients (one connection each) submitting jobs
// (SubmitBatch of 50, like River's InsertMany), then 64 workers claiming
// (batches of 16), each claim carrying the acks of the batch before:
// sub-benchmark stream claims on a Work stream per worker
// (client.Worker), unary with a Claim call each. Each iteration inserts
// and works 20,000 jobs, then times 500 single Submits one after another on
// one client (the submit latency: one request, one durable write). The
// metrics are jobs/s, the latency's median and 99th percentile, and the
// CPU time the node's process and this one (the clients) spent per job
// worked: on a shared machine the rates follow the other load, the CPU
// per job much less.
//
//	go test ./integration -run '^$' -bench QueueThroughput -benchtime 3x
func BenchmarkQueueThroughput(b *testing.B) {
	b.Run("unary", func(b *testing.B) { queueThroughput(b, false) })
	b.Run("stream", func(b *testing.B) { queueThroughput(b, true) })
}

func queueThroughput(b *testing.B, stream bool) {
	const jobs, conns, batch, insertBatch, singles = 20_000, 64, 16, 50, 500
	c := newCluster(b, 1)
	blob := configBlob(b, "bench", 1, 0)
	install(b, c, 0, blob)
	start(b, c, 0)
	mat := admin(b, c)
	ctx := context.Background()
	queue := "q000001-"
	newClient := func() *client.Client {
		cl, err := client.New([]client.Peer{{Name: c.Names[0], Addr: fmt.Sprintf("127.0.0.1:%d", c.Port(0))}}, mat, client.Options{Timeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cl.Close() })
		return cl
	}
	probe := newClient()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := probe.List(ctx, &schema.ListRequest{Queue: queue}); err == nil {
			break
		} else if time.Now().After(deadline) {
			b.Fatalf("the node never served jobs: %v", err)
		}
	}
	// conns connections in all, the probe's included: one certificate
	// may hold at most 64 (transport.DefaultMaxConnsPerClient).
	clients := []*client.Client{probe}
	for len(clients) < conns {
		cl := newClient()
		// Connected before the timer starts, as the old framing's
		// benchmark dialled its connections.
		if _, err := cl.List(ctx, &schema.ListRequest{Queue: queue}); err != nil {
			b.Fatalf("client %d: %v", len(clients), err)
		}
		clients = append(clients, cl)
	}
	var failed atomic.Bool // a client failed: every loop stops
	fail := func(format string, args ...any) {
		b.Errorf(format, args...)
		failed.Store(true)
	}
	var insertT, workT, nodeCPU, clientCPU time.Duration
	var lat []time.Duration
	nodePid := pidServing(b, c.NodeDir(0))
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		t0 := time.Now()
		var wg sync.WaitGroup
		for p := 0; p < conns; p++ {
			wg.Go(func() {
				per := jobs / conns
				for k := 0; k < per; k += insertBatch {
					payloads := make([][]byte, min(insertBatch, per-k))
					for i := range payloads {
						payloads[i] = []byte("job-payload-0123456789")
					}
					if _, err := clients[p].SubmitBatch(ctx, &schema.SubmitBatchRequest{Queue: queue, Payloads: payloads}); err != nil {
						fail("submit batch: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		if failed.Load() {
			b.FailNow()
		}
		insertT += time.Since(t0)
		t1, n1, c1 := time.Now(), procCPU(b, nodePid), selfCPU(b)
		var worked atomic.Int64
		want := int64(jobs / conns * conns)
		for w := 0; w < conns; w++ {
			wg.Go(func() {
				cl := clients[w]
				claim := cl.Claim
				if stream {
					wk := cl.Worker()
					defer wk.Close()
					claim = wk.Claim
				}
				var done []*schema.WalHandle // worked, acked on the next claim
				for worked.Load() < want && !failed.Load() {
					rep, err := claim(ctx, &schema.ClaimRequest{Queue: queue, Host: "node001", Max: batch, Ack: done})
					if err != nil {
						fail("claim: %v", err)
						return
					}
					if err := allAcked(rep.GetOks(), len(done)); err != nil {
						fail("claim: %v", err)
						return
					}
					worked.Add(int64(len(done)))
					done = handlesOf(rep.GetJobs())
				}
				if len(done) > 0 { // the last batch, when the loop stops early
					rep, err := cl.AckBatch(ctx, &schema.AckBatchRequest{Handles: done})
					if err == nil {
						err = allAcked(rep.GetOks(), len(done))
					}
					if err != nil {
						fail("ack batch: %v", err)
					}
				}
			})
		}
		wg.Wait()
		if failed.Load() {
			b.FailNow()
		}
		workT += time.Since(t1)
		nodeCPU += procCPU(b, nodePid) - n1
		clientCPU += selfCPU(b) - c1
		for range singles {
			t := time.Now()
			if _, err := probe.Submit(ctx, &schema.SubmitRequest{Queue: queue, Payload: []byte("job-payload-0123456789")}); err != nil {
				b.Fatalf("submit: %v", err)
			}
			lat = append(lat, time.Since(t))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(jobs/conns*conns*b.N)/insertT.Seconds(), "inserts/s")
	b.ReportMetric(float64(jobs/conns*conns*b.N)/workT.Seconds(), "worked/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "submit-p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "submit-p99-µs")
	b.ReportMetric(float64(nodeCPU.Microseconds())/float64(jobs/conns*conns*b.N), "node-cpu-µs/job")
	b.ReportMetric(float64(clientCPU.Microseconds())/float64(jobs/conns*conns*b.N), "client-cpu-µs/job")
}

// pidServing is the process whose command line names dir (a node's work
// directory, unique to the test).
func pidServing(b *testing.B, dir string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmd, []byte(filepath.Dir(dir))) && bytes.Contains(cmd, []byte("xcecontroller")) {
			return pid
		}
	}
	b.Fatalf("no process serves %s", dir)
	return 0
}

// procCPU is the user and system CPU time process pid used so far
// (/proc/pid/stat, in clock ticks of 10 ms: USER_HZ is 100 on Linux).
func procCPU(b *testing.B, pid int) time.Duration {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's closing parenthesis: utime and
	// stime are the 12th and 13th.
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	if len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %d fields after the command", pid, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return time.Duration(u+s) * 10 * time.Millisecond
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// handlesOf is the handles of claimed jobs.
func handlesOf(jobs []*schema.SnapshotJob) []*schema.WalHandle {
	hs := make([]*schema.WalHandle, len(jobs))
	for i, j := range jobs {
		hs[i] = &schema.WalHandle{Id: j.GetId(), Attempt: j.GetClaims(), ClaimTerm: j.GetClaimTerm(), ClaimLsn: j.GetClaimLsn()}
	}
	return hs
}

// allAcked: n acks sent, every one taken.
func allAcked(oks []bool, n int) error {
	if len(oks) != n {
		return fmt.Errorf("%d ack results for %d acks", len(oks), n)
	}
	for i, ok := range oks {
		if !ok {
			return fmt.Errorf("ack %d of %d refused", i, n)
		}
	}
	return nil
}
