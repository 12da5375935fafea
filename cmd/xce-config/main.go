// Command xce-config is the admin config tool (see cmd/xce-config/configtool).
package main

import (
	"fmt"
	"os"

	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
)

func main() {
	if err := configtool.NewCommand(os.Stdout).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "xce-config:", err)
		os.Exit(1)
	}
}
