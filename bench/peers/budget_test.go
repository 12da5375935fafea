package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		name  string
		stack []string // leaf first
		want  string
	}{
		{"AES under TLS", []string{"crypto/internal/fips140/aes/gcm.gcmAesDec", "crypto/tls.(*halfConn).decrypt", "crypto/tls.(*Conn).Read", "net/http.(*http2serverConn).readFrames"}, catTLS},
		{"an allocation charged to protobuf", []string{"runtime.mallocgc", "runtime.makeslice", "google.golang.org/protobuf/proto.MarshalOptions.marshal", "connectrpc.com/connect.(*protoBinaryCodec).Marshal"}, catProto},
		{"generated code is protobuf", []string{"github.com/xce-hpc/xce/schema.(*Job).ProtoReflect", "github.com/xce-hpc/xce/adapters/api.render"}, catProto},
		{"Connect's envelope", []string{"runtime.memmove", "bytes.(*Buffer).Write", "connectrpc.com/connect.(*envelopeReader).Read"}, catConnect},
		{"HTTP/2 framing", []string{"runtime.selectgo", "net/http.(*http2serverConn).serve"}, catHTTP2},
		{"a socket write under TLS", []string{"internal/runtime/syscall/linux.Syscall6", "syscall.write", "internal/poll.(*FD).Write", "net.(*conn).Write", "crypto/tls.(*Conn).Write"}, catNetIO},
		{"a WAL file write is the WAL's", []string{"internal/runtime/syscall/linux.Syscall6", "syscall.write", "internal/poll.(*FD).Write", "os.(*File).Write", "github.com/xce-hpc/xce/adapters/fileio.(*Executor).run"}, catWAL},
		{"fsync", []string{"internal/runtime/syscall/linux.Syscall6", "syscall.Fsync", "internal/poll.(*FD).Fsync", "os.(*File).Sync", "github.com/xce-hpc/xce/adapters/fileio.(*Executor).run"}, catFsync},
		{"a checkpoint's encode", []string{"github.com/xce-hpc/xce/sm.encodeJobs", "github.com/xce-hpc/xce/sm.(*compactInput).encode", "github.com/xce-hpc/xce/sm.(*SnapshotData).EncodeTo", "github.com/xce-hpc/xce/host/compute.Exec", "github.com/xce-hpc/xce/adapters/fileio.(*Executor).Compute"}, catSnapshot},
		{"a checkpoint reading the last snapshot", []string{"github.com/xce-hpc/xce/sm/wal.eachField", "github.com/xce-hpc/xce/sm/wal.ReadSnapshot", "github.com/xce-hpc/xce/sm.(*SnapshotLoad).Import"}, catSnapshot},
		{"the state machine", []string{"github.com/xce-hpc/xce/sm/queue.(*node).less", "github.com/xce-hpc/xce/sm/queue.(*jobHeap).up", "github.com/xce-hpc/xce/sm.(*Node).Step"}, catSM},
		{"a map lookup in sm", []string{"internal/runtime/maps.ctrlGroup.matchFull", "github.com/xce-hpc/xce/sm.HandleOf"}, catSM},
		{"peer transport", []string{"github.com/xce-hpc/xce/adapters/wire.WriteFrame", "github.com/xce-hpc/xce/adapters/transport.(*Transport).servePeer"}, catPeer},
		{"the runner", []string{"github.com/xce-hpc/xce/adapters/runner.(*Runner).step", "github.com/xce-hpc/xce/adapters/runner.(*Runner).Run"}, catXce},
		{"the harness", []string{"github.com/xce-hpc/xce/bench/peers.insertAll.func1"}, catBench},
		{"GC marking", []string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"}, catGC},
		{"GC assist inside protobuf", []string{"runtime.scanobject", "runtime.gcAssistAlloc", "runtime.mallocgc", "google.golang.org/protobuf/proto.Unmarshal"}, catGC},
		{"the scheduler", []string{"internal/runtime/syscall/linux.Syscall6", "runtime.netpoll", "runtime.findRunnable", "runtime.schedule", "runtime.park_m", "runtime.mcall"}, catScheduler},
		{"runtime alone", []string{"runtime.memclrNoHeapPointers", "runtime.bgMarkWorkerSomething"}, catRuntime},
		{"another library", []string{"github.com/spf13/cobra.(*Command).execute"}, catOther},
		{"an empty stack", nil, catRuntime},
	} {
		if got := classify(c.stack); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestBudgetOf builds a CPU profile of three stacks and reads it back.
func TestBudgetOf(t *testing.T) {
	fn := map[string]*profile.Function{}
	var fns []*profile.Function
	loc := func(names ...string) []*profile.Location {
		var out []*profile.Location
		for _, n := range names {
			f, ok := fn[n]
			if !ok {
				f = &profile.Function{ID: uint64(len(fns) + 1), Name: n}
				fn[n] = f
				fns = append(fns, f)
			}
			out = append(out, &profile.Location{Line: []profile.Line{{Function: f}}})
		}
		return out
	}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
		Sample: []*profile.Sample{
			{Value: []int64{3, 30_000_000}, Location: loc("crypto/tls.(*Conn).Read")},
			{Value: []int64{1, 10_000_000}, Location: loc("github.com/xce-hpc/xce/sm.(*Node).Step")},
			{Value: []int64{2, 20_000_000}, Location: loc("runtime.mallocgc", "crypto/tls.(*Conn).Write")},
		},
	}
	var locs []*profile.Location
	for _, s := range p.Sample {
		locs = append(locs, s.Location...)
	}
	for i, l := range locs {
		l.ID = uint64(i + 1)
	}
	p.Location, p.Function = locs, fns
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	b, err := budgetOf(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b.total != 60*time.Millisecond || b.byCat[catTLS] != 50*time.Millisecond || b.byCat[catSM] != 10*time.Millisecond {
		t.Errorf("budget %+v: want 60 ms in all, 50 ms TLS, 10 ms sm", b)
	}
	if _, err := budgetOf(strings.NewReader("not a profile")); err == nil {
		t.Error("a non-profile parsed")
	}
	p.SampleType = []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}, {Type: "inuse_space", Unit: "bytes"}}
	buf.Reset()
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := budgetOf(&buf); err == nil || !strings.Contains(err.Error(), "not a CPU profile") {
		t.Errorf("a heap profile: %v, want not a CPU profile", err)
	}
}

func TestParseHistogram(t *testing.T) {
	good := `# HELP xce_fsync_duration_seconds Time of each fsync the node asked for, of a file or of a directory.
# TYPE xce_fsync_duration_seconds histogram
xce_fsync_duration_seconds_bucket{target="file",le="5e-05"} 0
xce_fsync_duration_seconds_sum{target="dir"} 0.5
xce_fsync_duration_seconds_count{target="dir"} 2
xce_fsync_duration_seconds_sum{target="file"} 1.25
xce_fsync_duration_seconds_count{target="file"} 100 1700000000000
xce_claim_duration_seconds_count 7
xce_checkpoint_duration_seconds_sum 0.25
xce_checkpoint_duration_seconds_count 1
`
	for _, c := range []struct {
		name    string
		text    string
		metric  string
		want    histStats
		wantErr string
	}{
		{"file and dir summed, a timestamp ignored", good, metricFsync, histStats{count: 102, sum: 1.75}, ""},
		{"no labels", "xce_fsync_duration_seconds_count 3\nxce_fsync_duration_seconds_sum 0.003\n", metricFsync, histStats{count: 3, sum: 0.003}, ""},
		{"another histogram of the same text", good, metricCheckpoint, histStats{count: 1, sum: 0.25}, ""},
		{"a name that prefixes another is not it", "xce_fsync_duration_seconds_total_count 3\n", metricFsync, histStats{}, "no xce_fsync_duration_seconds"},
		{"no such metric", "xce_claim_duration_seconds_count 7\n", metricFsync, histStats{}, "no xce_fsync_duration_seconds"},
		{"a bad value", "xce_fsync_duration_seconds_count{target=\"file\"} many\n", metricFsync, histStats{}, "many"},
		{"no value", "xce_fsync_duration_seconds_count{target=\"file\"}\n", metricFsync, histStats{}, "no value"},
	} {
		got, err := parseHistogram([]byte(c.text), c.metric)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one saying %s", c.name, err, c.wantErr)
		case c.wantErr == "" && (!near(got.count, c.want.count) || !near(got.sum, c.want.sum)):
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
