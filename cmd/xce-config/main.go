// Command xce-config is the admin config tool (see adapters/configtool).
package main

import (
	"fmt"
	"os"

	"xce/adapters/configtool"
)

func main() {
	if err := configtool.NewCommand(os.Stdout).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "xce-config:", err)
		os.Exit(1)
	}
}
