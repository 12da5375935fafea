package metrics

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/xce-hpc/xce/adapters/api"
	"github.com/xce-hpc/xce/adapters/authz"
	"github.com/xce-hpc/xce/adapters/fileio"
	"github.com/xce-hpc/xce/adapters/runner"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

const waitBound = 10 * time.Second

// collectorOf is the node collector over a fixed view.
func collectorOf(v View, err error) prometheus.Collector {
	return &nodeCollector{view: func() (View, error) { return v, err }, conns: func() (int, int) { return 3, 2 }}
}

// A view of a primary becomes exactly these metrics: the oldest pending
// job's age at the scrape (0 for a queue with no pending job, and for one
// whose pending jobs are not ready yet), each queue's counters.
func TestCollectView(t *testing.T) {
	at := time.Unix(1_800_000_000, 500e6)
	v := View{
		At:   at,
		Name: "n0", Role: sm.RolePrimary, Term: 7, ConfigTag: 0xabc, ConfigGeneration: 4, ConfigStale: true, Ready: true,
		LostAndFound: 2, Queues: []sm.QueueDepth{
			{Queue: "batch", Pending: 5, Processing: 1, Dead: 2, OldestPendingAt: at.Unix() - 90,
				Throughput: queue.Throughput{Enqueued: 11, Claimed: 7, Acked: 3, Retried: 2, Dead: 1}},
			{Queue: "idle", OldestPendingAt: 0},
			{Queue: "later", Pending: 1, OldestPendingAt: at.Unix() + 60},
		},
		WALRecords: 42, Standbys: []StandbyLag{{Name: "n1", Records: 0}, {Name: "n2", Records: 9}}, AckedWithoutStandby: 3,
	}
	want := `
# HELP xce_acked_without_standby_total Writes this process acknowledged in seed mode while no standby held them (each can be lost by a failover; status shows degraded).
# TYPE xce_acked_without_standby_total counter
xce_acked_without_standby_total 3
# HELP xce_config_info The running config: its version tag (hex) and generation; absent before a config is loaded.
# TYPE xce_config_info gauge
xce_config_info{generation="4",tag="` + sm.TagHex(0xabc) + `"} 1
# HELP xce_config_stale 1 when the saved config is older than --conf-stale-timeout: the node has not heard a newer one for that long (config_stale).
# TYPE xce_config_stale gauge
xce_config_stale 1
# HELP xce_connections Accepted connections open, by kind: client (the API's) or peer (another controller's link to us).
# TYPE xce_connections gauge
xce_connections{kind="client"} 3
xce_connections{kind="peer"} 2
# HELP xce_lost_and_found_jobs Jobs of removed queues routed to lost_and_found by this primary's last recovery, where they wait for an operator to drain them (lost_and_found_job_count).
# TYPE xce_lost_and_found_jobs gauge
xce_lost_and_found_jobs 2
# HELP xce_queue_depth Jobs in each queue by state (pending, processing, dead); primary only.
# TYPE xce_queue_depth gauge
xce_queue_depth{queue="batch",state="dead"} 2
xce_queue_depth{queue="batch",state="pending"} 5
xce_queue_depth{queue="batch",state="processing"} 1
xce_queue_depth{queue="idle",state="dead"} 0
xce_queue_depth{queue="idle",state="pending"} 0
xce_queue_depth{queue="idle",state="processing"} 0
xce_queue_depth{queue="later",state="dead"} 0
xce_queue_depth{queue="later",state="pending"} 1
xce_queue_depth{queue="later",state="processing"} 0
# HELP xce_queue_jobs_acked_total Claims of the queue's jobs this process completed by an ack as primary; restarts at 0 with each process and promotion.
# TYPE xce_queue_jobs_acked_total counter
xce_queue_jobs_acked_total{queue="batch"} 3
xce_queue_jobs_acked_total{queue="idle"} 0
xce_queue_jobs_acked_total{queue="later"} 0
# HELP xce_queue_jobs_claimed_total Jobs of the queue this process handed out as primary (each job of a claim batch, reclaims of lapsed claims included); restarts at 0 with each process and promotion.
# TYPE xce_queue_jobs_claimed_total counter
xce_queue_jobs_claimed_total{queue="batch"} 7
xce_queue_jobs_claimed_total{queue="idle"} 0
xce_queue_jobs_claimed_total{queue="later"} 0
# HELP xce_queue_jobs_dead_total Jobs of the queue this process moved to dead as primary, by every path: a fail, a retry or a lapsed claim on the last attempt, an expiry; restarts at 0 with each process and promotion.
# TYPE xce_queue_jobs_dead_total counter
xce_queue_jobs_dead_total{queue="batch"} 1
xce_queue_jobs_dead_total{queue="idle"} 0
xce_queue_jobs_dead_total{queue="later"} 0
# HELP xce_queue_jobs_enqueued_total Jobs this process enqueued into the queue as primary (submitted, in batches each job, or fired by a schedule); restarts at 0 with each process and promotion.
# TYPE xce_queue_jobs_enqueued_total counter
xce_queue_jobs_enqueued_total{queue="batch"} 11
xce_queue_jobs_enqueued_total{queue="idle"} 0
xce_queue_jobs_enqueued_total{queue="later"} 0
# HELP xce_queue_jobs_retried_total Claims of the queue's jobs given up by a retry that put the job back to pending, applied by this process as primary (a retry on the last attempt counts as dead); restarts at 0 with each process and promotion.
# TYPE xce_queue_jobs_retried_total counter
xce_queue_jobs_retried_total{queue="batch"} 2
xce_queue_jobs_retried_total{queue="idle"} 0
xce_queue_jobs_retried_total{queue="later"} 0
# HELP xce_queue_oldest_pending_age_seconds Seconds the queue's oldest pending job has waited to be claimed since it became claimable (enqueued, its delay or run_at reached, its retry backoff over, or redriven); 0 when no pending job is claimable; primary only.
# TYPE xce_queue_oldest_pending_age_seconds gauge
xce_queue_oldest_pending_age_seconds{queue="batch"} 90.5
xce_queue_oldest_pending_age_seconds{queue="idle"} 0
xce_queue_oldest_pending_age_seconds{queue="later"} 0
# HELP xce_ready 1 when the node serves its role, as /readyz answers 200.
# TYPE xce_ready gauge
xce_ready 1
# HELP xce_replication_lag_records Records of the primary's durable log each standby has not acknowledged; primary only.
# TYPE xce_replication_lag_records gauge
xce_replication_lag_records{standby="n1"} 0
xce_replication_lag_records{standby="n2"} 9
# HELP xce_role The node's HA role: 1 for the role it has, 0 for the others.
# TYPE xce_role gauge
xce_role{role="booting"} 0
xce_role{role="candidate"} 0
xce_role{role="primary"} 1
xce_role{role="standby"} 0
xce_role{role="stopped"} 0
# HELP xce_term The term the node acts in (its own as primary, else the highest it knows).
# TYPE xce_term gauge
xce_term 7
# HELP xce_wal_records_since_checkpoint Records toward the next compaction: the primary's active WAL segment (a checkpoint starts at --max-wal-records), a standby's records appended since its last checkpoint began or its log was replaced, across syncs.
# TYPE xce_wal_records_since_checkpoint gauge
xce_wal_records_since_checkpoint 42
`
	if err := testutil.CollectAndCompare(collectorOf(v, nil), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// A node with no config has no config_info series; a failed look at the
// node reports the error and still the connections.
func TestCollectViewPartial(t *testing.T) {
	if n := testutil.CollectAndCount(collectorOf(View{Role: sm.RoleBooting}, nil), "xce_config_info"); n != 0 {
		t.Errorf("config_info without a config: %d series", n)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collectorOf(View{}, errors.New("event loop did not answer within 2s")))
	mfs, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("gather error = %v, want the loop's", err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	if strings.Join(names, ",") != "xce_connections" {
		t.Errorf("with the loop stuck, gathered %v, want only xce_connections", names)
	}
}

func TestOpAndCode(t *testing.T) {
	for _, c := range []struct {
		req  *wire.Request
		want string
	}{
		{&wire.Request{Status: &schema.StatusRequest{}}, "status"},
		{&wire.Request{Config: true}, "config"},
		{&wire.Request{Upgrade: &schema.UpgradeConfigRequest{}}, "upgrade_config"},
		{&wire.Request{Switchover: &sm.Switchover{To: -1}}, "switchover"},
		{&wire.Request{Job: &sm.JobRequest{Kind: sm.JobClaim}}, "job_claim"},
		{&wire.Request{Job: &sm.JobRequest{Kind: sm.JobEnqueue}}, "job_enqueue"},
		{&wire.Request{}, "unknown"},
		{&wire.Request{Job: &sm.JobRequest{Kind: 99}}, "job_unknown"},
		// The labels the protobuf enum's names gave.
		{&wire.Request{Job: &sm.JobRequest{Kind: sm.JobAckBatch}}, "job_ack_batch"},
		{&wire.Request{Job: &sm.JobRequest{Kind: sm.JobEnqueueBatch}}, "job_enqueue_batch"},
		{&wire.Request{Job: &sm.JobRequest{Kind: sm.JobDrainLostAndFound}}, "job_lost_and_found_drain"},
		{&wire.Request{Job: &sm.JobRequest{}}, "job_kind_unspecified"},
		{&wire.Request{Job: &sm.JobRequest{Kind: sm.JobListSchedules + 1}}, "job_unknown"},
	} {
		if got := Op(c.req); got != c.want {
			t.Errorf("Op(%v) = %q, want %q", c.req, got, c.want)
		}
	}
}

// The code label is the gRPC name of the code the API answers: each
// status the node or the daemon replies with, and the queue's refusals
// without a status, through the API's one mapping (api.CodeOf).
func TestCodeLabel(t *testing.T) {
	ack := &wire.Request{Job: &sm.JobRequest{Kind: sm.JobAck}}
	get := &wire.Request{Job: &sm.JobRequest{Kind: sm.JobGet, ID: 9}}
	claim := &wire.Request{Job: &sm.JobRequest{Kind: sm.JobClaim}}
	for _, c := range []struct {
		req  *wire.Request
		rep  *wire.Reply
		want string
	}{
		{claim, &wire.Reply{Status: sm.StatusOK, Job: &sm.Reply{OK: true}}, "OK"},
		{claim, &wire.Reply{Status: sm.StatusOK, Job: &sm.Reply{}}, "OK"}, // nothing ready: not an error
		{ack, &wire.Reply{Status: sm.StatusOK, Job: &sm.Reply{}}, "FailedPrecondition"},
		{get, &wire.Reply{Status: sm.StatusOK, Job: &sm.Reply{}}, "NotFound"},
		{ack, &wire.Reply{Status: authz.StatusForbidden}, "PermissionDenied"},
		{ack, &wire.Reply{Status: sm.StatusEAGAIN}, "Unavailable"},
		{ack, &wire.Reply{Status: sm.StatusNoConfig}, "Unavailable"},
		{ack, &wire.Reply{Status: sm.StatusEINVAL}, "InvalidArgument"},
		{ack, &wire.Reply{Status: wire.StatusBusy}, "Aborted"},
		{ack, &wire.Reply{Status: wire.StatusUnsupported}, "Unimplemented"},
		{ack, &wire.Reply{Status: sm.StatusOutcomeUnknown}, "Unknown"},
		{ack, &wire.Reply{Status: sm.StatusEIO}, "Internal"},
		{ack, &wire.Reply{Status: -99}, "Internal"},
		{&wire.Request{Config: true}, &wire.Reply{Status: sm.StatusOK}, "OK"},
		{ack, nil, "Internal"},
	} {
		if got := CodeName(api.CodeOf(c.req, c.rep)); got != c.want {
			t.Errorf("code of %+v answering %+v = %q, want %q", c.rep, c.req, got, c.want)
		}
	}
	for code, want := range map[connect.Code]string{
		api.CodeOK: "OK", connect.CodeCanceled: "Canceled", connect.CodeResourceExhausted: "ResourceExhausted",
		connect.CodeUnauthenticated: "Unauthenticated", 17: "Code(17)",
	} {
		if got := CodeName(code); got != want {
			t.Errorf("CodeName(%d) = %q, want %q", code, got, want)
		}
	}
	// connect's own names, in snake case, are the same codes by number.
	for code := connect.CodeCanceled; code <= connect.CodeUnauthenticated; code++ {
		if got := strings.ReplaceAll(strings.ToLower(CodeName(code)), "_", ""); got != strings.ReplaceAll(code.String(), "_", "") {
			t.Errorf("CodeName(%d) = %q, connect calls it %q", code, CodeName(code), code.String())
		}
	}
}

// Requests are counted by op and code; only claims feed the claim
// latency; a nil *Metrics ignores everything.
func TestObserveRequest(t *testing.T) {
	m, err := New(Config{Inspect: func(context.Context, func(*sm.Node)) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveRequestCode("job_claim", "OK", 3*time.Millisecond)
	m.ObserveRequestCode("job_claim", "Unavailable", time.Millisecond)
	m.ObserveRequestCode("job_enqueue", "OK", time.Millisecond)
	if got := testutil.ToFloat64(m.requests.WithLabelValues("job_claim", "Unavailable")); got != 1 {
		t.Errorf("claims refused Unavailable: %v, want 1", got)
	}
	if got := testutil.CollectAndCount(m.requests); got != 3 {
		t.Errorf("%d request series, want 3", got)
	}
	if got := histCount(t, m.reg, "xce_claim_duration_seconds"); got != 2 {
		t.Errorf("claim latency count %d, want 2 (the enqueue is not a claim)", got)
	}
	var nilM *Metrics
	nilM.ObserveRequestCode("job_claim", "OK", time.Millisecond)
	nilM.ObserveSync(true, time.Millisecond)
	nilM.AfterStep(nil, nil, 0)
}

// histCount is the sample count of histogram name (summed over labels).
func histCount(t *testing.T, g prometheus.Gatherer, name string) uint64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// A real single-node cluster: its metrics follow its state (role, queue
// depth after enqueues and a claim, WAL records, fsyncs, a checkpoint),
// /healthz and /readyz answer 200, and both fail once the loop stopped.
func TestNodeEndToEnd(t *testing.T) {
	m, rn, blob, stop := startNode(t, 1)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	ctx := context.Background()
	if code, body := get(t, srv.URL+"/readyz"); code != http.StatusOK || body != "ready: primary: serving\n" {
		t.Errorf("/readyz = %d %q", code, body)
	}
	const jobs = 120
	for i := range jobs {
		r, err := rn.Do(ctx, sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("x")})
		if err != nil || r.Status != sm.StatusOK {
			t.Fatalf("enqueue %d: %v %+v", i, err, r)
		}
	}
	if r, err := rn.Do(ctx, sm.JobRequest{Kind: sm.JobClaim, Queue: "q0", Host: "h0", Max: 1}); err != nil || len(r.Jobs) != 1 {
		t.Fatalf("claim: %v %+v", err, r)
	}
	_, body := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`xce_role{role="primary"} 1`,
		`xce_term 1`,
		`xce_config_info{generation="3",tag="` + sm.TagHex(sm.TagOf(blob)) + `"} 1`,
		`xce_queue_depth{queue="q0",state="pending"} 119`,
		`xce_queue_depth{queue="q0",state="processing"} 1`,
		`xce_ready 1`,
		`xce_config_stale 0`,
		// The test binary's own build: no VCS stamp, its Go version.
		`xce_build_info{goversion="` + runtime.Version() + `",revision="",version="(devel)"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, name := range []string{"xce_fsync_duration_seconds", "xce_checkpoint_duration_seconds", "xce_step_duration_seconds"} {
		deadline := time.Now().Add(waitBound)
		for histCount(t, m.reg, name) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // the checkpoint ends after its reply
		}
		if histCount(t, m.reg, name) == 0 {
			t.Errorf("%s observed nothing", name)
		}
	}
	var wal int
	if err := rn.Inspect(ctx, func(n *sm.Node) { wal = n.WALRecordsSinceCheckpoint() }); err != nil {
		t.Fatal(err)
	}
	if wal >= jobs || !strings.Contains(body, "xce_wal_records_since_checkpoint ") {
		t.Errorf("%d WAL records since the checkpoint, want fewer than %d", wal, jobs)
	}
	if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d while running", code)
	}
	stop()
	if code, body := get(t, srv.URL+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "stopped") {
		t.Errorf("/healthz after stop = %d %q, want 503 naming the stop", code, body)
	}
	if code, body := get(t, srv.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: ") {
		t.Errorf("/readyz after stop = %d %q", code, body)
	}
}

// startNode runs a single-node cluster with queues q0.. and metrics,
// until it is primary; stop ends it.
func startNode(t testing.TB, queues int) (m *Metrics, rn *runner.Runner, blob []byte, stop func()) {
	t.Helper()
	dir := t.TempDir()
	c := &schema.ClusterConfig{ConfigGeneration: 3, ClusterName: "metrics-test", Port: 7000}
	for q := range queues {
		c.Queues = append(c.Queues, &schema.Queue{Id: uint32(q + 1), Name: fmt.Sprint("q", q), VisibilityTimeoutS: 30, MaxAttempts: 5, BackoffBaseS: 2, DeadLetterRetentionS: 86400})
	}
	c.Hosts = []*schema.Host{{Name: "h0"}}
	blob, err := schema.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	provision(t, dir, blob)
	opt := sm.DefaultOptions(0, []string{"n0"})
	opt.ElectionTimeout, opt.JitterMax = 50*time.Millisecond, 10*time.Millisecond
	opt.MaxWALRecords = 100 // the least allowed: TestNodeEndToEnd's 121 records checkpoint once
	node, err := sm.NewNode(opt)
	if err != nil {
		t.Fatal(err)
	}
	m, err = New(Config{Inspect: func(ctx context.Context, f func(*sm.Node)) error { return rn.Inspect(ctx, f) }, LoopTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rn = runner.New(runner.Config{Node: node, Files: &fileio.Executor{Base: dir, ObserveSync: m.ObserveSync}, AfterStep: m.AfterStep, Seed: 1})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- rn.Run(ctx) }()
	stop = func() {
		cancel()
		<-errc
	}
	select {
	case <-rn.Ready():
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(waitBound):
		stop()
		t.Fatal("node not ready")
	}
	return m, rn, blob, stop
}

// BenchmarkView is what a scrape costs the event loop: one look at a
// primary with 1000 queues, each holding a job.
func BenchmarkView(b *testing.B) {
	const queues = 1000
	m, rn, _, stop := startNode(b, queues)
	defer stop()
	for q := range queues {
		if r, err := rn.Do(context.Background(), sm.JobRequest{Kind: sm.JobEnqueue, Queue: fmt.Sprint("q", q), Payload: []byte("x")}); err != nil || r.Status != sm.StatusOK {
			b.Fatalf("enqueue: %v %+v", err, r)
		}
	}
	var v View
	b.ResetTimer()
	for b.Loop() {
		if err := rn.Inspect(context.Background(), func(n *sm.Node) { v = ViewOf(n) }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if len(v.Queues) != queues {
		b.Fatalf("%d queues in the view, want %d", len(v.Queues), queues)
	}
	_ = m
}

// A loop that does not take the look in time: /healthz is 503 naming the
// wait, /readyz too, /metrics still answers with what it has.
func TestStuckLoop(t *testing.T) {
	m, err := New(Config{
		Inspect:     func(ctx context.Context, _ func(*sm.Node)) error { <-ctx.Done(); return ctx.Err() },
		Conns:       func() (int, int) { return 1, 0 },
		LoopTimeout: 30 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if code, body := get(t, srv.URL+"/healthz"); code != http.StatusServiceUnavailable || body != "event loop did not answer within 30ms\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, srv.URL+"/readyz"); code != http.StatusServiceUnavailable || body != "not ready: event loop did not answer within 30ms\n" {
		t.Errorf("/readyz = %d %q", code, body)
	}
	code, body := get(t, srv.URL+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, `xce_connections{kind="client"} 1`) || strings.Contains(body, "xce_role") {
		t.Errorf("/metrics with the loop stuck = %d:\n%s", code, body)
	}
}

func TestNewNeedsInspect(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrNoInspect) {
		t.Errorf("New without Inspect = %v", err)
	}
}

// provision installs blob as the node's config, durably, as the daemon's first start does.
func provision(t testing.TB, base string, blob []byte) {
	t.Helper()
	e := &fileio.Executor{Base: base}
	name := sm.VersionName(sha256.Sum256(blob))
	for _, op := range []sm.FileOp{
		{Op: sm.OpMkdir, Path: sm.ConfDir},
		{Op: sm.OpFsyncDir, Path: ""},
		{Op: sm.OpWrite, Path: sm.ConfDir + "/" + name, Data: blob},
		{Op: sm.OpFsync, Path: sm.ConfDir + "/" + name},
		{Op: sm.OpWrite, Path: sm.PointerPath, Data: sm.PointerContents(name)},
		{Op: sm.OpFsync, Path: sm.PointerPath},
		{Op: sm.OpFsyncDir, Path: sm.ConfDir},
	} {
		if d := e.Exec(op); d.Err != sm.IOOK {
			t.Fatalf("provision %v %s: %v %s", op.Op, op.Path, d.Err, d.Detail)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Go's profiles are served only when asked for (--pprof).
func TestProfilingOnlyWhenAsked(t *testing.T) {
	inspect := func(context.Context, func(*sm.Node)) error { return nil }
	for _, on := range []bool{false, true} {
		m, err := New(Config{Inspect: inspect, Profiling: on})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(m.Handler())
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/heap?debug=1"} {
			code, body := get(t, srv.URL+path)
			switch {
			case on && (code != http.StatusOK || !strings.Contains(body, "goroutine") && !strings.Contains(body, "heap")):
				t.Errorf("with profiling, %s = %d: %.200s", path, code, body)
			case !on && code != http.StatusNotFound:
				t.Errorf("without profiling, %s = %d, want 404", path, code)
			}
		}
		srv.Close()
	}
}

// TestMetricNamesPassPromlint lints everything a live node's /metrics
// serves (after requests, a claim and fsyncs, so every family has
// samples): a name or unit against the Prometheus conventions fails it.
func TestMetricNamesPassPromlint(t *testing.T) {
	m, rn, _, stop := startNode(t, 1)
	defer stop()
	ctx := context.Background()
	if r, err := rn.Do(ctx, sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q0", Payload: []byte("x")}); err != nil || r.Status != sm.StatusOK {
		t.Fatalf("enqueue: %v %+v", err, r)
	}
	m.ObserveRequestCode("submit", "OK", time.Millisecond)
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) < 10 {
		t.Fatalf("gathered %d metric families, want the node's, the request instruments and the runtime's", len(fams))
	}
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
