// Command xcecli is the xce operator and worker client (see cmd/xcecli/clitool).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := clitool.NewCommand(ctx, os.Stdout).Execute()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "xcecli:", err)
		os.Exit(1)
	}
}
