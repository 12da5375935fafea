package integration

// The load generator of the scale benchmark (scale_bench_test.go) and the
// scale test (scale_test.go): C clients, each a jobDoer (one kept HTTP/2
// connection per node, the tests' primary-following rules), enqueue jobs
// of a fixed payload size with ENQUEUE_BATCH. Every reply is checked (OK,
// one job per payload) and every acknowledged id kept, so that readBack
// can prove no acknowledgement was lost. It lives with the tests because
// its client does: a second client for a binary would duplicate it. (The
// history tests' load, history_test.go, is another thing: single
// operations of every kind, each recorded for the linearizability
// checker; this one only fills queues, fast.)

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
)

// loadSpec is one load: Jobs jobs (0: until stop is called) of Payload
// bytes into Queue, Clients connections each sending batches of Batch.
// With Tolerate, a batch whose outcome is unknown or that no primary took
// (a failover) is counted and the client goes on after a pause; without,
// it ends the load with an error.
type loadSpec struct {
	Queue    string
	Jobs     int
	Clients  int
	Batch    int
	Payload  int
	Tolerate bool
}

// loadResult is what a load got acknowledged.
type loadResult struct {
	IDs      []uint64 // every acknowledged job id, ascending
	Requests int
	Unknown  int // jobs in batches whose outcome is unknown (there or not)
	Refused  int // batches no primary took (certainly not there)
	Elapsed  time.Duration
}

func (r loadResult) rate() float64 { return float64(len(r.IDs)) / r.Elapsed.Seconds() }

// bulkLoad is a running load generator.
type bulkLoad struct {
	spec    loadSpec
	next    atomic.Int64 // jobs handed to clients so far
	stopped atomic.Bool
	t0      time.Time
	done    chan struct{}
	mu      sync.Mutex
	res     loadResult
	err     error
}

// startBulk starts spec against the cluster of peersFlag.
func startBulk(peersFlag string, mat *tlsconf.Material, spec loadSpec) (*bulkLoad, error) {
	if spec.Clients < 1 || spec.Batch < 1 || spec.Payload < 1 {
		return nil, fmt.Errorf("load spec %+v: clients, batch and payload must be positive", spec)
	}
	clients := make([]*jobDoer, spec.Clients)
	for i := range clients {
		cl, err := newDoer(peersFlag, mat, 10*time.Second)
		if err != nil {
			return nil, err
		}
		clients[i] = cl
	}
	l := &bulkLoad{spec: spec, t0: time.Now(), done: make(chan struct{})}
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Go(func() {
			defer cl.Close()
			if err := l.client(i, cl); err != nil {
				l.fail(err)
			}
		})
	}
	go func() {
		wg.Wait()
		l.res.Elapsed = time.Since(l.t0)
		slices.Sort(l.res.IDs)
		if k := len(l.res.IDs); l.err == nil && len(slices.Compact(slices.Clone(l.res.IDs))) != k {
			l.err = fmt.Errorf("load: the same job id acknowledged twice among %d jobs", k)
		}
		close(l.done)
	}()
	return l, nil
}

// client sends batches until the quota is used up, the load is stopped or
// a request fails.
func (l *bulkLoad) client(who int, cl *jobDoer) error {
	ctx := context.Background()
	for seq := 0; !l.stopped.Load(); seq++ {
		n := l.spec.Batch
		if l.spec.Jobs > 0 {
			from := l.next.Add(int64(n)) - int64(n)
			if from >= int64(l.spec.Jobs) {
				return nil
			}
			n = min(n, l.spec.Jobs-int(from))
		}
		payloads := make([][]byte, n)
		for k := range payloads {
			payloads[k] = payload(l.spec.Payload, fmt.Sprintf("load c%d b%d j%d ", who, seq, k))
		}
		res, err := cl.Do(ctx, &schema.SubmitBatchRequest{Queue: l.spec.Queue, Payloads: payloads})
		if l.spec.Tolerate && (errors.Is(err, client.ErrOutcomeUnknown) || errors.Is(err, client.ErrNoPrimary)) {
			l.mu.Lock()
			if errors.Is(err, client.ErrOutcomeUnknown) {
				l.res.Unknown += n
			} else {
				l.res.Refused++
			}
			l.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("load client %d, batch %d of %d jobs: %w", who, seq, n, err)
		}
		ids := res.Reply.GetIds()
		if len(ids) != n {
			return fmt.Errorf("load client %d, batch %d: %d jobs acknowledged for %d payloads", who, seq, len(ids), n)
		}
		for k, id := range ids {
			if id == 0 {
				return fmt.Errorf("load client %d, batch %d: job %d acknowledged without an id", who, seq, k)
			}
		}
		l.mu.Lock()
		l.res.IDs = append(l.res.IDs, ids...)
		l.res.Requests++
		l.mu.Unlock()
	}
	return nil
}

func (l *bulkLoad) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
	l.stopped.Store(true)
}

// stop ends an open-ended load after the requests in flight are answered.
func (l *bulkLoad) stop() { l.stopped.Store(true) }

// wait returns the result once every client has finished.
func (l *bulkLoad) wait() (loadResult, error) {
	<-l.done
	return l.res, l.err
}

// within waits at most d for the load to end by itself, then stops it;
// cut reports that it had to.
func (l *bulkLoad) within(d time.Duration) (res loadResult, cut bool, err error) {
	select {
	case <-l.done:
	case <-time.After(d):
		cut = true
		l.stop()
	}
	res, err = l.wait()
	return res, cut, err
}

// runBulk runs spec to the end.
func runBulk(peersFlag string, mat *tlsconf.Material, spec loadSpec) (loadResult, error) {
	l, err := startBulk(peersFlag, mat, spec)
	if err != nil {
		return loadResult{}, err
	}
	return l.wait()
}

// payload is size bytes: tag, then filler.
func payload(size int, tag string) []byte {
	b := make([]byte, size)
	n := copy(b, tag)
	for i := n; i < size; i++ {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// errMissing: checkListed found an acknowledged job absent.
var errMissing = errors.New("acknowledged job missing")

// checkListed lists queue page by page and checks that it holds every job
// of acked (ascending ids) and at most unknown more (the jobs of requests
// whose outcome is unknown).
func checkListed(ctx context.Context, doer *jobDoer, queue string, acked []uint64, unknown int) error {
	var got []uint64
	for after := uint64(0); ; {
		res, err := doer.Do(ctx, &schema.ListRequest{Queue: queue, AfterId: after})
		if err != nil {
			return fmt.Errorf("list %s after id %d: %w", queue, after, err)
		}
		jobs := res.Reply.GetJobs()
		for _, j := range jobs {
			got = append(got, j.GetId())
		}
		if !res.Reply.GetMore() || len(jobs) == 0 {
			break
		}
		after = jobs[len(jobs)-1].GetId()
	}
	for i, k := 0, 0; i < len(acked); i++ {
		for k < len(got) && got[k] < acked[i] {
			k++
		}
		if k == len(got) || got[k] != acked[i] {
			return fmt.Errorf("%w: job %d (%d of %d acknowledged jobs listed in %s)", errMissing, acked[i], countIn(got, acked), len(acked), queue)
		}
	}
	if len(got) > len(acked)+unknown {
		return fmt.Errorf("%s lists %d jobs: %d were acknowledged and %d had an unknown outcome", queue, len(got), len(acked), unknown)
	}
	return nil
}

// countIn is how many of want (ascending) got (ascending) holds.
func countIn(got, want []uint64) int {
	n := 0
	for _, id := range want {
		if _, ok := slices.BinarySearch(got, id); ok {
			n++
		}
	}
	return n
}
