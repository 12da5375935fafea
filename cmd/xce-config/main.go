// Command xce-config is the admin config tool (see cmd/xce-config/configtool).
package main

import (
	"os"

	"github.com/xce-hpc/xce/cmd/internal/cliexit"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
)

// Exit codes (docs/operations.md, "Exit codes"): 0 done, 1 failed, 2 a
// usage error.
func main() {
	cmd, err := configtool.NewCommand(os.Stdout).ExecuteC()
	os.Exit(cliexit.Exit(os.Stderr, "xce-config", cmd, err))
}
