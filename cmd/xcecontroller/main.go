// Command xcecontroller runs one xce controller node (systemd Type=notify).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/xce-hpc/xce/cmd/xcecontroller/daemon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := 0
	err := daemon.NewCommand(ctx, func(c int) { code = c }).Execute()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "xcecontroller:", err)
		code = 2
	}
	os.Exit(code)
}
