package main

// The per-job CPU budget read from a CPU profile: every sample goes to
// one category by its stack, and a category's CPU over the phase's jobs
// is its share of one job. The fsync is counted twice on purpose: its
// on-CPU part here, its wait (off CPU) from the node's fsync histogram
// (parseHistogram), which also gives the checkpoints a phase caused.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// The categories, in the order the tables list them.
const (
	catTLS       = "TLS (crypto)"
	catHTTP2     = "HTTP/2 (net/http)"
	catConnect   = "Connect"
	catProto     = "protobuf"
	catNetIO     = "socket read/write syscalls"
	catSM        = "xce: state machine (sm)"
	catWAL       = "xce: WAL framing and file writes"
	catSnapshot  = "xce: checkpoints (snapshot encode, read back)"
	catFsync     = "fsync (on CPU)"
	catPeer      = "xce: peer transport and wire"
	catXce       = "xce: API, runner, client, other"
	catBench     = "bench harness"
	catGC        = "GC"
	catScheduler = "Go scheduler, timers, netpoll"
	catRuntime   = "runtime, other"
	catOther     = "other libraries"
)

var budgetCategories = []string{catTLS, catHTTP2, catConnect, catProto, catNetIO, catSM, catWAL, catSnapshot, catFsync, catPeer, catXce, catBench, catGC, catScheduler, catRuntime, catOther}

// helperPrefixes are the packages whose frames are charged to their
// caller: the runtime (allocation, stack growth, maps), the standard
// library's general helpers, and small utility modules.
var helperPrefixes = []string{
	"runtime.", "internal/", "sync.", "sync/", "syscall.", "os.", "io.", "bufio.", "bytes.", "errors.",
	"context.", "time.", "sort.", "slices.", "maps.", "strconv.", "strings.", "fmt.", "reflect.", "unicode",
	"math", "encoding/binary.", "hash/", "container/", "iter.", "log/slog.", "golang.org/x/sync/", "aeshashbody", "memeqbody",
	"indexbytebody", "cmpbody", "gogo", "type:.eq.",
}

// classify names the category of one sample's stack, leaf first.
func classify(stack []string) string {
	has := func(match func(string) bool) bool {
		for _, f := range stack {
			if match(f) {
				return true
			}
		}
		return false
	}
	prefix := func(ps ...string) func(string) bool {
		return func(f string) bool {
			for _, p := range ps {
				if strings.HasPrefix(f, p) {
					return true
				}
			}
			return false
		}
	}
	switch {
	case has(prefix("os.(*File).Sync", "syscall.Fsync", "syscall.Fdatasync", "internal/poll.(*FD).Fsync")):
		return catFsync
	case has(prefix("runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcStart", "runtime.gcMarkDone", "runtime.gcMarkTermination")):
		return catGC
	case has(prefix("github.com/xce-hpc/xce/host/compute.", "github.com/xce-hpc/xce/sm.(*SnapshotData).", "github.com/xce-hpc/xce/sm.(*SnapshotLoad).", "github.com/xce-hpc/xce/sm.(*compactInput).")):
		return catSnapshot
	case has(prefix("github.com/xce-hpc/xce/adapters/fileio.", "github.com/xce-hpc/xce/sm/wal.")):
		return catWAL
	case has(prefix("internal/poll.(*FD).Read", "internal/poll.(*FD).Write", "internal/poll.(*FD).Writev", "net.(*netFD).", "net.(*conn).Read", "net.(*conn).Write")):
		return catNetIO
	}
	for _, f := range stack {
		if prefix(helperPrefixes...)(f) {
			continue
		}
		switch {
		case strings.HasPrefix(f, "crypto/"), strings.HasPrefix(f, "vendor/golang.org/x/crypto/"), strings.HasPrefix(f, "golang.org/x/crypto/"):
			return catTLS
		case strings.HasPrefix(f, "net/http."), strings.HasPrefix(f, "golang.org/x/net/http2"), strings.HasPrefix(f, "vendor/golang.org/x/net/http2"), strings.HasPrefix(f, "vendor/golang.org/x/net/http/"), strings.HasPrefix(f, "net/textproto."), strings.HasPrefix(f, "net/url."):
			return catHTTP2
		case strings.HasPrefix(f, "connectrpc.com/connect"):
			return catConnect
		case strings.HasPrefix(f, "google.golang.org/protobuf/"), strings.HasPrefix(f, "github.com/xce-hpc/xce/schema."), strings.HasPrefix(f, "github.com/xce-hpc/xce/schema/"):
			return catProto
		case strings.HasPrefix(f, "github.com/xce-hpc/xce/bench/"):
			return catBench
		case strings.HasPrefix(f, "github.com/xce-hpc/xce/sm"):
			return catSM
		case strings.HasPrefix(f, "github.com/xce-hpc/xce/adapters/transport."), strings.HasPrefix(f, "github.com/xce-hpc/xce/adapters/wire."):
			return catPeer
		case strings.HasPrefix(f, "github.com/xce-hpc/xce/"):
			return catXce
		case strings.HasPrefix(f, "net."):
			return catNetIO
		default:
			return catOther
		}
	}
	if has(prefix("runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.netpoll", "runtime.sysmon", "runtime.timer", "runtime.(*timer", "runtime.(*timers", "runtime.mcall", "runtime.goexit0", "runtime.notesleep", "runtime.futex", "runtime.stopm", "runtime.startm", "runtime.wakep")) {
		return catScheduler
	}
	return catRuntime
}

// cpuBudget is the CPU of each category in a profile, and the total.
type cpuBudget struct {
	byCat map[string]time.Duration
	total time.Duration
}

// budgetOf reads a CPU profile and sums its samples by category.
func budgetOf(r io.Reader) (cpuBudget, error) {
	p, err := profile.Parse(r)
	if err != nil {
		return cpuBudget{}, fmt.Errorf("parse profile: %w", err)
	}
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			vi = i
		}
	}
	if vi < 0 {
		return cpuBudget{}, fmt.Errorf("not a CPU profile (sample types %v)", p.SampleType)
	}
	b := cpuBudget{byCat: map[string]time.Duration{}}
	for _, s := range p.Sample {
		var stack []string
		for _, loc := range s.Location {
			for _, l := range loc.Line { // innermost (inlined) first
				if l.Function != nil {
					stack = append(stack, l.Function.Name)
				}
			}
		}
		d := time.Duration(s.Value[vi])
		b.byCat[classify(stack)] += d
		b.total += d
	}
	return b, nil
}

// histStats are one histogram's count and sum of seconds, over all its
// labels (for the fsyncs: files and directories together).
type histStats struct {
	count float64
	sum   float64
}

func (h histStats) minus(o histStats) histStats { return histStats{h.count - o.count, h.sum - o.sum} }

// The node's histograms the budget reads.
const (
	metricFsync      = "xce_fsync_duration_seconds"
	metricCheckpoint = "xce_checkpoint_duration_seconds"
)

// parseHistogram reads name's _count and _sum from the Prometheus text
// exposition, summed over its labels.
func parseHistogram(text []byte, name string) (histStats, error) {
	var st histStats
	seen := false
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var dst *float64
		switch {
		case strings.HasPrefix(line, name+"_count{"), strings.HasPrefix(line, name+"_count "):
			dst = &st.count
		case strings.HasPrefix(line, name+"_sum{"), strings.HasPrefix(line, name+"_sum "):
			dst = &st.sum
		default:
			continue
		}
		// name{labels} value [timestamp]
		rest := line
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		} else {
			rest = strings.TrimLeftFunc(rest, func(r rune) bool { return r != ' ' })
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return histStats{}, fmt.Errorf("metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return histStats{}, fmt.Errorf("metrics line %q: %w", line, err)
		}
		*dst += v
		seen = true
	}
	if err := sc.Err(); err != nil {
		return histStats{}, err
	}
	if !seen {
		return histStats{}, fmt.Errorf("no %s in the metrics", name)
	}
	return st, nil
}
