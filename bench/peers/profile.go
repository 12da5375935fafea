package main

// -profile-dir: after the measured rounds, one more insert phase and one
// more work phase on an xce side, each with a CPU profile of the primary
// node (its --pprof endpoint) and of this process (the clients) over the
// same window, so the per-job CPU of both ends can be read from them.
// The node's endpoint profiles for a whole number of seconds, so the
// window is the phase's median duration in the rounds plus a second;
// the idle tail costs little CPU, and a phase slower than the rounds'
// is reported rather than profiled in part.

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"
)

func profilePass(ctx context.Context, xs *xceSide, s shape, res []map[string]result, key, dir string) error {
	url := xs.cluster.pprofURL(xs.primary)
	if url == "" {
		return fmt.Errorf("the primary %s serves no profiles", xs.primary)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, ph := range []struct {
		name string
		fig  figure
		run  func() (time.Duration, error)
	}{
		{"insert", figInsert, func() (time.Duration, error) { return insertAll(ctx, s, xs.insertBatch) }},
		{"work", figWork, func() (time.Duration, error) { return xs.work(ctx, s) }},
	} {
		r := median(column(res, key, ph.fig))
		if math.IsNaN(r) || r <= 0 {
			return fmt.Errorf("no %s rate measured to size the profile window", ph.name)
		}
		secs := int(math.Ceil(float64(s.Jobs)/r)) + 1
		base := filepath.Join(dir, fmt.Sprintf("%s-%s", key, ph.name))
		d, err := profileWindow(ctx, url, secs, base, ph.run)
		if err != nil {
			return fmt.Errorf("%s: %w", ph.name, err)
		}
		if d > time.Duration(secs)*time.Second {
			return fmt.Errorf("%s took %v, longer than the %d s profile window", ph.name, d, secs)
		}
		fmt.Printf("profiles of %s's %s phase (%d jobs in %v, window %d s): %s-node.pprof, %s-client.pprof\n",
			labels[key], ph.name, s.Jobs, d.Round(time.Millisecond), secs, base, base)
	}
	return nil
}

// profileWindow starts a secs-second CPU profile of the node at url and
// of this process, runs phase, and writes both once the window is over.
func profileWindow(ctx context.Context, url string, secs int, base string, phase func() (time.Duration, error)) (time.Duration, error) {
	cf, err := os.Create(base + "-client.pprof")
	if err != nil {
		return 0, err
	}
	defer cf.Close()
	type got struct {
		body []byte
		err  error
	}
	node := make(chan got, 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%sprofile?seconds=%d", url, secs), nil)
	if err != nil {
		return 0, err
	}
	if err := pprof.StartCPUProfile(cf); err != nil {
		return 0, err
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			node <- got{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %s: %s", req.URL, resp.Status, b)
		}
		node <- got{b, err}
	}()
	d, perr := phase()
	g := <-node
	pprof.StopCPUProfile()
	if perr != nil {
		return d, perr
	}
	if g.err != nil {
		return d, g.err
	}
	return d, os.WriteFile(base+"-node.pprof", g.body, 0o644)
}
