package daemon

import (
	"context"
	"errors"
	"net"
	"sync/atomic"

	"github.com/xce-hpc/xce/adapters/metrics"
	"github.com/xce-hpc/xce/adapters/runner"
	"github.com/xce-hpc/xce/adapters/transport"
	"github.com/xce-hpc/xce/sm"
)

// errNotStarted: the runner is not built yet (a scrape during startup).
var errNotStarted = errors.New("node not started yet")

// newMetrics builds the node's metrics, read through the runner rnp will
// hold, and binds addr (--metrics-addr). With addr "" it returns nil: no
// metrics, no endpoint. profiling adds /debug/pprof/ (--pprof).
func newMetrics(addr string, profiling bool, rnp *atomic.Pointer[runner.Runner], tr *transport.Transport) (*metrics.Metrics, net.Listener, error) {
	if addr == "" {
		return nil, nil, nil
	}
	mx, err := metrics.New(metrics.Config{
		Inspect: func(ctx context.Context, f func(n *sm.Node)) error {
			rn := rnp.Load()
			if rn == nil {
				return errNotStarted
			}
			return rn.Inspect(ctx, f)
		},
		Conns:     tr.OpenConns,
		Refused:   tr.Refused,
		Profiling: profiling,
	})
	if err != nil {
		return nil, nil, err
	}
	ln, err := metrics.Listen(addr)
	if err != nil {
		return nil, nil, err
	}
	return mx, ln, nil
}
