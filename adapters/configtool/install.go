package configtool

import (
	"errors"
	"fmt"
	"os"
	"time"

	"xce/adapters/fileio"
	"xce/sm"
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
	files := &fileio.Executor{Base: base}
	start := time.Now()
	clock := func() sm.Clock { return sm.Clock{Mono: time.Since(start), Wall: time.Now().UnixNano()} }
	queue := []sm.Input{sm.Boot{Seed: 1, Install: blob}}
	for len(queue) > 0 {
		in := queue[0]
		queue = queue[1:]
		for _, e := range n.Step(clock(), in) {
			switch x := e.(type) {
			case sm.FileOp:
				res := files.Exec(x)
				res.ID = x.ID
				queue = append(queue, res)
			case sm.Log:
				if x.Level >= sm.Warn {
					fmt.Fprintf(os.Stderr, "%s %s: %s\n", x.Level, x.Key, x.Text)
				}
			case sm.Exit:
				if x.Code != 0 {
					return fmt.Errorf("%w: %s", ErrInstall, x.Reason)
				}
				return nil
			}
		}
	}
	return fmt.Errorf("%w: the install node stopped without finishing", ErrInstall)
}
