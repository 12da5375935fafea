package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// healthz: the process is alive and its event loop takes a look at the
// node within the loop timeout.
func (m *Metrics) healthz(w http.ResponseWriter, _ *http.Request) {
	if err := m.inspect(func(*sm.Node) {}); err != nil {
		reply(w, http.StatusServiceUnavailable, errLoop(err, m.cfg.LoopTimeout).Error())
		return
	}
	reply(w, http.StatusOK, "ok")
}

// readyz: the node serves its role (sm Readiness); 503 with the reason
// otherwise.
func (m *Metrics) readyz(w http.ResponseWriter, _ *http.Request) {
	var ready bool
	var why string
	if err := m.inspect(func(n *sm.Node) { ready, why = n.Readiness() }); err != nil {
		reply(w, http.StatusServiceUnavailable, "not ready: "+errLoop(err, m.cfg.LoopTimeout).Error())
		return
	}
	if !ready {
		reply(w, http.StatusServiceUnavailable, "not ready: "+why)
		return
	}
	reply(w, http.StatusOK, "ready: "+why)
}

// errLoop says why the event loop gave no look at the node.
func errLoop(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("event loop did not answer within %v", timeout)
	}
	return fmt.Errorf("event loop: %w", err)
}

// reply writes one line of text (newlines in it folded).
func reply(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintln(w, strings.Join(strings.Fields(text), " "))
}
