package fileio

import "github.com/xce-hpc/xce/sm"

// DefaultBackgroundNice is how much lower than the node's own the CPU
// priority of its background Computes is (Executor.BackgroundNice, the
// daemon's --background-nice). On a machine whose CPUs the node shares
// (with its peers, in a test cluster, or with other services), a
// checkpoint's encode or a standby's sync snapshot otherwise takes a CPU
// for seconds beside the goroutines that answer requests, and every
// request waits for a CPU at each of its hand-offs: at 1M jobs on 3 nodes
// sharing 2 CPUs, requests waited 114–202 ms while a fresh standby synced,
// 40–131 ms with the encodes at nice 10 (docs/performance.md). With idle
// CPUs the priority changes nothing.
const DefaultBackgroundNice = 10

// MaxNice is the largest nice value Linux has.
const MaxNice = 19

// background reports whether a Compute of kind k is the node's background
// work, which may wait for the CPU while requests are answered: a
// checkpoint's encode, a standby's sync snapshot, a received snapshot's
// check, a standby checkpoint's build. A recovery's import is not: a promotion, and so a failover,
// waits for it.
func background(k sm.ComputeKind) bool {
	switch k {
	case sm.ComputeEncode, sm.ComputeEncodeTo, sm.ComputeVerify, sm.ComputeBuild:
		return true
	default:
		return false
	}
}

// runInBackground is inBackground (background_linux.go); a test sees
// through it which Computes run in the background.
var runInBackground = inBackground
