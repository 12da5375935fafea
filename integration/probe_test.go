package integration

// A latency probe: one client on its own kept connection issues a cheap
// request (GET of one job) every few milliseconds and keeps every
// sample, so that the longest request stall within any window (a
// checkpoint, a standby's sync) can be read off afterwards.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/schema"
)

type probeSample struct {
	at  time.Time // when the request was sent
	dur time.Duration
	err error
}

type probe struct {
	stopc   chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples []probeSample
}

// startProbe GETs job id through the cluster of peersFlag every interval.
func startProbe(peersFlag string, mat *tlsconf.Material, id uint64, interval time.Duration) (*probe, error) {
	cl, err := newDoer(peersFlag, mat, 10*time.Second)
	if err != nil {
		return nil, err
	}
	p := &probe{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cl.Close()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			t0 := time.Now()
			_, err := cl.Do(context.Background(), &schema.GetRequest{Id: id})
			s := probeSample{at: t0, dur: time.Since(t0), err: err}
			p.mu.Lock()
			p.samples = append(p.samples, s)
			p.mu.Unlock()
			select {
			case <-p.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return p, nil
}

func (p *probe) stop() {
	close(p.stopc)
	<-p.done
}

// probeStats summarise the samples of a window.
type probeStats struct {
	n      int
	max    time.Duration
	errors int
}

// window is the stats of the requests in flight at any moment of
// [from, to]: a request sent before from that was still waiting counts.
func (p *probe) window(from, to time.Time) probeStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var st probeStats
	for _, s := range p.samples {
		if s.at.After(to) || s.at.Add(s.dur).Before(from) {
			continue
		}
		st.n++
		if s.err != nil {
			st.errors++
		}
		if s.dur > st.max {
			st.max = s.dur
		}
	}
	return st
}

// slow lists the requests in flight at any moment of [from, to] that
// took at least min, one line each (send time in UTC, duration, error),
// to line a stall up against the nodes' logs.
func (p *probe) slow(from, to time.Time, min time.Duration) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var sb strings.Builder
	for _, s := range p.samples {
		if s.dur < min || s.at.After(to) || s.at.Add(s.dur).Before(from) {
			continue
		}
		fmt.Fprintf(&sb, "%s\t%v\t%v\n", s.at.UTC().Format("15:04:05.000000"), s.dur.Round(100*time.Microsecond), s.err)
	}
	return sb.String()
}
