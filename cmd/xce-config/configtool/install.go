package configtool

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/xce-hpc/xce/adapters/fileio"
	"github.com/xce-hpc/xce/host/loop"
	"github.com/xce-hpc/xce/sm"
)

// ErrInstall is returned when the install node exits non-zero.
var ErrInstall = errors.New("config install failed")

// Install saves blob into base/conf with the daemon's own code path: an
// sm.Node booted in install mode, its file effects executed by the real
// file adapter (fsync of every file and directory), synchronously.
func Install(base, name string, keepN int, blob []byte) error {
	if err := os.MkdirAll(base, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", base, err)
	}
	if err := fileio.CheckLocalFS(base); err != nil {
		return err
	}
	release, err := fileio.Lock(base)
	if err != nil {
		return fmt.Errorf("%w (stop the node first, or change a running cluster with xce-config push)", err)
	}
	defer release()
	opt := sm.DefaultOptions(0, []string{name})
	opt.KeepN = keepN
	n, err := sm.NewNode(opt)
	if err != nil {
		return err
	}
	h := &installHost{files: &fileio.Executor{Base: base}}
	start := time.Now()
	clock := func() sm.Clock { return sm.Clock{Mono: time.Since(start), Wall: time.Now().UnixNano()} }
	h.queue = []sm.Input{sm.Boot{Seed: 1, Install: blob}}
	for len(h.queue) > 0 {
		in := h.queue[0]
		h.queue = h.queue[1:]
		if _, x := loop.Step(n, clock(), in, h); x != nil {
			if x.Code != 0 {
				return fmt.Errorf("%w: %s", ErrInstall, x.Reason)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: the install node stopped without finishing", ErrInstall)
}

// installHost runs an install node's effects: file operations and
// Computes at once, in order, on the real files (every lane, loop.LaneOf,
// run at once: each lane's completions in its issue order, as loop.Host
// asks); warnings to stderr; nothing else leaves it.
type installHost struct {
	files *fileio.Executor
	queue []sm.Input
}

func (h *installHost) File(x sm.FileOp) {
	res := h.files.Exec(x)
	res.ID = x.ID
	h.queue = append(h.queue, res)
}

func (h *installHost) Compute(x sm.Compute) {
	res := h.files.Compute(x)
	res.ID = x.ID
	h.queue = append(h.queue, res)
}

func (h *installHost) Log(x sm.Log) {
	if x.Level >= sm.Warn {
		fmt.Fprintf(os.Stderr, "%s %s: %s\n", x.Level, x.Key, x.Text)
	}
}

func (h *installHost) Unknown(e sm.Effect) {
	fmt.Fprintf(os.Stderr, "install: unknown effect %T\n", e)
}

// An install node is alone and answers no one: these have nowhere to go.
func (*installHost) Send(sm.Send)                 {}
func (*installHost) SetTimer(sm.SetTimer)         {}
func (*installHost) CancelTimer(sm.CancelTimer)   {}
func (*installHost) Reply(sm.Reply)               {}
func (*installHost) UpgradeReply(sm.UpgradeReply) {}

func (*installHost) SwitchoverReply(sm.SwitchoverReply) {}
func (*installHost) Exit(sm.Exit)                       {}
