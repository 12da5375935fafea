package integration

// Write unavailability of a planned switchover, of a config upgrade that
// hands over before the old primary restarts, and of the same upgrade
// with --restart (the primary restarts at once and a failover elects the
// next one), on the same cluster shape with the same load: three real
// xcecontroller processes at the default timings, a few producers each
// submitting in a tight loop (every submit waits for its answer) and two
// drainers claiming and acking the jobs, so that the job state stays
// small. Unavailability of one event is the longest stretch without an
// acknowledged submit, across all producers, from the last ack before
// the event to the point where the acks have resumed (20 of them after
// the event ended). Each event is repeated XCE_SWITCHOVER_EVENTS times
// (default 20); the figures are p50 and p99 (nearest rank: with 20 events
// p99 is the worst one), reported as metrics and in RESULT lines with
// where the time went. XCE_BENCH_LOG=1 also prints each event's election,
// switchover, upgrade and recovery log lines of every node;
// XCE_SWITCHOVER_KEYED=1 gives every submit an idempotency key, so that
// the client repeats one that found no primary itself, after its backoff.
//
//	go test ./integration -run '^$' -bench BenchmarkSwitchoverUnavailability -benchtime 1x

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/schema"
)

func BenchmarkSwitchoverUnavailability(b *testing.B) {
	events := 20
	if s := os.Getenv("XCE_SWITCHOVER_EVENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("XCE_SWITCHOVER_EVENTS=%q: want a positive count", s)
		}
		events = n
	}
	for _, kind := range []string{"switchover", "upgrade", "upgrade-restart"} {
		b.Run(kind, func(b *testing.B) {
			for r := 0; r < b.N; r++ {
				runUnavailability(b, kind, events)
			}
		})
	}
}

// ackLog is the writers' record: the time of every acknowledged submit
// and the errors by kind.
type ackLog struct {
	start time.Time
	mu    sync.Mutex
	acks  []time.Duration // since start, in the order they were recorded
	errs  map[string]int
}

func (a *ackLog) now() time.Duration { return time.Since(a.start) }

func (a *ackLog) ack(at time.Duration) {
	a.mu.Lock()
	a.acks = append(a.acks, at)
	a.mu.Unlock()
}

func (a *ackLog) fail(err error) {
	kind := "other"
	var ne *client.NodeError
	switch {
	case errors.Is(err, client.ErrOutcomeUnknown):
		kind = "outcome unknown"
	case errors.Is(err, client.ErrNoPrimary):
		kind = "no primary"
	case errors.As(err, &ne):
		kind = ne.Code().String()
	}
	a.mu.Lock()
	a.errs[kind]++
	a.mu.Unlock()
}

// since counts the acks at or after t.
func (a *ackLog) since(t time.Duration) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, at := range a.acks {
		if at >= t {
			n++
		}
	}
	return n
}

// waitSince polls until n acks came at or after t, or the timeout.
func (a *ackLog) waitSince(b *testing.B, t time.Duration, n int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for a.since(t) < n {
		if time.Now().After(deadline) {
			b.Fatalf("%d acknowledged submits in %v after %v, want %d", a.since(t), timeout, t, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gap is the longest stretch between successive acks from the last ack
// before from to the last one at or before to.
func (a *ackLog) gap(from, to time.Duration) time.Duration {
	a.mu.Lock()
	at := slices.Clone(a.acks)
	a.mu.Unlock()
	slices.Sort(at)
	i, _ := slices.BinarySearch(at, from)
	i = max(i-1, 0)
	var g time.Duration
	for k := i + 1; k < len(at) && at[k] <= to; k++ {
		g = max(g, at[k]-at[k-1])
	}
	return g
}

// errCounts is "kind n, ..." of the errors since the last call, and
// forgets them.
func (a *ackLog) errCounts() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var parts []string
	for k, n := range a.errs {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(parts)
	clear(a.errs)
	return strings.Join(parts, ", ")
}

// startAckLoad starts producers submitting in a tight loop and two
// drainers; the returned func stops them.
func startAckLoad(b *testing.B, fc *faultCluster, producers int) (*ackLog, func()) {
	b.Helper()
	a := &ackLog{start: time.Now(), errs: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	newClient := func() *client.Client {
		cl, err := client.NewFromFlag(fc.peers, fc.mat, client.Options{Timeout: 3 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		return cl
	}
	keyed := os.Getenv("XCE_SWITCHOVER_KEYED") != ""
	for p := 0; p < producers; p++ {
		cl := newClient()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for seq := 0; ctx.Err() == nil; seq++ {
				req := &schema.SubmitRequest{Queue: fc.queues[seq%len(fc.queues)], Payload: fmt.Appendf(nil, "u-p%d-%d", p, seq)}
				if keyed {
					req.IdempotencyKey = string(req.Payload)
				}
				if _, err := cl.Submit(ctx, req); err == nil {
					a.ack(a.now())
				} else if ctx.Err() == nil {
					a.fail(err)
					time.Sleep(5 * time.Millisecond) // no spin while no primary answers
				}
			}
		}()
	}
	for d := 0; d < 2; d++ {
		cl := newClient()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			var carried []*schema.WalHandle
			for k := d; ctx.Err() == nil; k++ {
				rep, err := cl.Claim(ctx, &schema.ClaimRequest{Queue: fc.queues[k%len(fc.queues)], Host: "node001", Max: 256, Ack: carried})
				carried = nil
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				for _, j := range rep.GetJobs() {
					carried = append(carried, &schema.WalHandle{Id: j.GetId(), Attempt: j.GetClaims(), ClaimTerm: j.GetClaimTerm(), ClaimLsn: j.GetClaimLsn()})
				}
				if len(carried) == 0 {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	return a, func() { cancel(); wg.Wait() }
}

// unavailEvent is one event's figures.
type unavailEvent struct {
	gap  time.Duration // the longest stretch without an ack
	call time.Duration // the admin's call (switchover, push)
	// handover: the old primary's own measure, from the switchover's
	// acceptance to the target's lead (its log); 0 without one.
	handover time.Duration
	// exited: from the call to the old primary's exit (upgrades).
	exited time.Duration
}

var handoverDone = regexp.MustCompile(`switchover done: \S+ leads in term \d+ \(([^ ]+) after it began\)`)

// runUnavailability boots a cluster, runs the load and events events of
// kind, and reports their figures.
func runUnavailability(b *testing.B, kind string, events int) {
	fc := newFaultCluster(b, fcOpts{nodes: 3})
	p, _ := fc.boot()
	admin, err := client.NewFromFlag(fc.peers, fc.mat, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	a, stop := startAckLoad(b, fc, 4)
	defer stop()
	a.waitSince(b, 0, 500, 30*time.Second)
	b.Logf("%s: load running (%s)", kind, a.errCounts())

	var evs []unavailEvent
	for i := 0; i < events; i++ {
		fc.waitSynced(p, 60*time.Second)
		time.Sleep(200 * time.Millisecond) // a steady stretch before the event
		var ev unavailEvent
		old := p
		exited := fc.c.Exited(p)
		off := logOffset(fc.c, p)
		var offs []int64
		for n := range fc.c.Names {
			offs = append(offs, logOffset(fc.c, n))
		}
		t0 := a.now()
		switch kind {
		case "switchover":
			rep, err := admin.Switchover(context.Background(), "")
			if err != nil {
				b.Fatalf("event %d: switchover: %v", i, err)
			}
			ev.call = a.now() - t0
			np := nodeIndex(fc.c, rep.GetPrimary())
			if np < 0 || np == p {
				b.Fatalf("event %d: switchover answered %v", i, rep)
			}
			a.waitSince(b, a.now(), 20, 30*time.Second)
			p = np
		default:
			blob := configBlob(b, fmt.Sprintf("bench-%02d", i), len(fc.queues), 0)
			if _, err := configtool.PushTo(context.Background(), admin, blob, kind == "upgrade-restart"); err != nil {
				b.Fatalf("event %d: push: %v", i, err)
			}
			ev.call = a.now() - t0
			select {
			case code := <-exited:
				if code != 0 {
					b.Fatalf("event %d: %s exited %d after the upgrade, want 0", i, fc.name(p), code)
				}
			case <-time.After(30 * time.Second):
				b.Fatalf("event %d: %s did not exit within 30 s of the upgrade", i, fc.name(p))
			}
			ev.exited = a.now() - t0
			fc.start(p) // the service manager's restart, at once
			a.waitSince(b, t0+ev.exited, 20, 60*time.Second)
			np, _ := fc.waitHealthy(60 * time.Second)
			p = np
		}
		ev.gap = a.gap(t0, a.now())
		if m := handoverDone.FindStringSubmatch(logSince(fc.c, old, off)); m != nil {
			ev.handover, _ = time.ParseDuration(m[1])
		}
		b.Logf("%s %2d: gap %v; call %v, handover %v, old primary exited after %v; client errors: %s", kind, i,
			ev.gap.Round(time.Millisecond), ev.call.Round(time.Millisecond), ev.handover.Round(time.Millisecond), ev.exited.Round(time.Millisecond), a.errCounts())
		evs = append(evs, ev)
		if os.Getenv("XCE_BENCH_LOG") != "" {
			for n := range fc.c.Names {
				for _, line := range strings.Split(logSince(fc.c, n, offs[n]), "\n") {
					if strings.Contains(line, "upgrade") || strings.Contains(line, "push") || strings.Contains(line, "switchover") || strings.Contains(line, "romoted") || strings.Contains(line, "recover") || strings.Contains(line, "election") || strings.Contains(line, "HA") {
						b.Logf("  %s: %s", fc.name(n), line)
					}
				}
			}
		}
	}
	pick := func(f func(unavailEvent) time.Duration) []time.Duration {
		out := make([]time.Duration, len(evs))
		for i, e := range evs {
			out[i] = f(e)
		}
		return out
	}
	gaps := pick(func(e unavailEvent) time.Duration { return e.gap })
	p50, p99 := percentile(gaps, 0.50), percentile(gaps, 0.99)
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-gap-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-gap-ms")
	b.Logf("RESULT %s write unavailability over %d events: p50 %v, p99 %v, max %v; admin call p50 %v; handover p50 %v; old primary's exit p50 %v",
		kind, len(evs), p50.Round(time.Millisecond), p99.Round(time.Millisecond), slices.Max(gaps).Round(time.Millisecond),
		percentile(pick(func(e unavailEvent) time.Duration { return e.call }), 0.5).Round(time.Millisecond),
		percentile(pick(func(e unavailEvent) time.Duration { return e.handover }), 0.5).Round(time.Millisecond),
		percentile(pick(func(e unavailEvent) time.Duration { return e.exited }), 0.5).Round(time.Millisecond))
}
