// Command xcesim runs one simulated xce cluster schedule and prints its
// trace: `make run` uses it until the daemon exists.
package main

import (
	"flag"
	"fmt"
	"github.com/xce-hpc/xce/buildinfo"
	"os"
	"strings"

	"github.com/xce-hpc/xce/sim"
)

func main() {
	seed := flag.Uint64("seed", 1, "schedule seed")
	generated := flag.Bool("generated", false, "run the generated (faulty) schedule for -seed instead of the clean demo boot")
	trace := flag.Bool("trace", true, "print the trace")
	all := flag.Bool("all", false, "print every trace line (messages, timers, I/O), not only logs and simulator events")
	version := flag.Bool("version", false, "print the build (module version, VCS revision) and exit")
	flag.Parse()
	if *version {
		fmt.Println("xcesim", buildinfo.Read())
		return
	}
	sc := sim.Demo(*seed)
	if *generated {
		sc = sim.Generate(*seed)
	}
	fmt.Printf("scenario: %s\n", sc)
	var out func(string)
	if *trace {
		out = func(s string) {
			if *all || interesting(s) {
				fmt.Println(s)
			}
		}
	}
	rep, fail := sim.NewWorld(sc, out).Run()
	fmt.Printf("\nboot to converged: %v   failover after primary kill: %v   rejoin: %v   dual-primary time: %v   events: %d   trace hash: %016x\n",
		rep.BootTime, rep.FailoverTime, rep.RejoinTime, rep.DualPrimary, rep.Events, rep.TraceHash)
	if fail != nil {
		fmt.Fprintln(os.Stderr, fail.Error())
		os.Exit(1)
	}
	fmt.Println("all properties held (S1-S4, S7, L1-L3)")
}

// interesting keeps log lines and simulator events: the story of the run.
func interesting(line string) bool {
	for _, k := range []string{" INFO ", " WARN ", " ERROR ", " FATAL ", " -- ", "process start", "kill -9", "exit "} {
		if strings.Contains(line, k) {
			return true
		}
	}
	return false
}
