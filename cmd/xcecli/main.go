// Command xcecli is the xce operator and worker client (see cmd/xcecli/clitool).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/xce-hpc/xce/cmd/internal/cliexit"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
)

// Exit codes (docs/operations.md, "Exit codes"): 0 done, 1 failed, 2 a
// usage error.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	cmd, err := clitool.NewCommand(ctx, os.Stdout).ExecuteC()
	stop()
	os.Exit(cliexit.Exit(os.Stderr, "xcecli", cmd, err))
}
