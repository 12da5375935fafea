package clitool

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

func TestParseHandle(t *testing.T) {
	good := map[string][4]uint64{
		"12:3:1.40":           {12, 3, 1, 40},
		" 7:1:0.1 ":           {7, 1, 0, 1},
		"1099511627777:2:1.5": {1<<40 | 1, 2, 1, 5},
		"18446744073709551615:4294967295:18446744073709551615.18446744073709551615": {1<<64 - 1, 1<<32 - 1, 1<<64 - 1, 1<<64 - 1},
	}
	for in, want := range good {
		h, err := ParseHandle(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if got := [4]uint64{h.GetId(), uint64(h.GetAttempt()), h.GetClaimTerm(), h.GetClaimLsn()}; got != want {
			t.Fatalf("%q: got %v", in, h)
		}
		if got := FormatHandle(h); got != strings.TrimSpace(in) {
			t.Fatalf("round trip %q -> %q", in, got)
		}
	}
	for _, in := range []string{"", "12", "12:", ":3", "12:3", "0:1:1.1", "1:0:1.1", "a:b:1.1", "1:4294967296:1.1", "-1:2:1.1",
		"1:2:3", "1:2:3.", "1:2:.3", "1:2:3.0", "1:2:x.3", "1:2:3.4.5", "1:2:-3.4", "1.5:2:1.1", "1:2:3:4.5", "1:2:3.4:"} {
		if h, err := ParseHandle(in); err == nil {
			t.Fatalf("%q accepted as %v", in, h)
		} else if !strings.Contains(err.Error(), "ID:ATTEMPT:TERM.LSN") {
			t.Fatalf("%q: error %q does not name the form", in, err)
		}
	}
}

func TestJobHandleOnlyForProcessing(t *testing.T) {
	j := &schema.SnapshotJob{Id: 9, Claims: 4, Attempts: 1, State: schema.JobState_JOB_STATE_PROCESSING, ClaimTerm: 2, ClaimLsn: 77}
	if h := JobHandle(j); h == nil || FormatHandle(h) != "9:4:2.77" {
		t.Fatalf("processing job handle: %v (want claims, not attempts, and the claim stamp)", h)
	}
	for _, st := range []schema.JobState{schema.JobState_JOB_STATE_PENDING, schema.JobState_JOB_STATE_DEAD} {
		j.State = st
		if h := JobHandle(j); h != nil {
			t.Fatalf("%v job has handle %v", st, h)
		}
	}
}

func TestBuildSubmit(t *testing.T) {
	req, err := BuildSubmit(SubmitOpts{Queue: "batch", Payload: []byte("x"), Priority: 5, Delay: 30 * time.Second,
		Expires: time.Hour, Host: "node001", Resource: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := &schema.SubmitRequest{Queue: "batch", Payload: []byte("x"), Priority: 5, Delay: 30,
		Expires: 3600, Host: "node001", Resource: 1}
	if !proto.Equal(req, want) {
		t.Fatalf("got %v want %v", req, want)
	}
	req, err = BuildSubmit(SubmitOpts{Queue: "batch", RunAt: "2030-01-02T03:04:05Z"})
	if err != nil {
		t.Fatal(err)
	}
	if sr, ok := req.(*schema.SubmitRequest); !ok || sr.GetRunAt() != time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).Unix() || sr.GetDelay() != 0 {
		t.Fatalf("run-at: %v", req)
	}
	// --count: one batch of that many payloads, the same options.
	req, err = BuildSubmit(SubmitOpts{Queue: "batch", Payload: []byte("x"), Priority: 5, Host: "node001", Count: 3})
	wantBatch := &schema.SubmitBatchRequest{Queue: "batch", Payloads: [][]byte{[]byte("x"), []byte("x"), []byte("x")}, Priority: 5, Host: "node001"}
	if err != nil || !proto.Equal(req, wantBatch) {
		t.Fatalf("batch: got %v, %v; want %v", req, err, wantBatch)
	}
	// --idempotency-key: the submit's key; a batch's jobs KEY/1..KEY/n.
	req, err = BuildSubmit(SubmitOpts{Queue: "batch", Payload: []byte("x"), Key: "nightly-7"})
	if sr, ok := req.(*schema.SubmitRequest); err != nil || !ok || sr.GetIdempotencyKey() != "nightly-7" {
		t.Fatalf("keyed submit: %v, %v", req, err)
	}
	req, err = BuildSubmit(SubmitOpts{Queue: "batch", Payload: []byte("x"), Count: 2, Key: "k"})
	if br, ok := req.(*schema.SubmitBatchRequest); err != nil || !ok || strings.Join(br.GetIdempotencyKeys(), ",") != "k/1,k/2" {
		t.Fatalf("keyed batch: %v, %v", req, err)
	}
	if _, err := BuildSubmit(SubmitOpts{Queue: "batch", Count: 1001}); err == nil {
		t.Error("a batch of 1001 accepted")
	}
	for name, o := range map[string]SubmitOpts{
		"no queue":         {},
		"delay and run-at": {Queue: "q", Delay: time.Second, RunAt: "2030-01-02T03:04:05Z"},
		"fractional delay": {Queue: "q", Delay: 1500 * time.Millisecond},
		"negative delay":   {Queue: "q", Delay: -time.Second},
		"negative expires": {Queue: "q", Expires: -time.Second},
		"bad run-at":       {Queue: "q", RunAt: "tomorrow"},
	} {
		if _, err := BuildSubmit(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestBuildOthers(t *testing.T) {
	req, err := BuildAck([]string{"5:2:1.9"})
	if a, ok := req.(*schema.AckRequest); err != nil || !ok || FormatHandle(a.GetHandle()) != "5:2:1.9" {
		t.Fatalf("ack one: %v %v", req, err)
	}
	req, err = BuildAck([]string{"5:2:1.9", "6:1:1.9"})
	if b, ok := req.(*schema.AckBatchRequest); err != nil || !ok || len(b.GetHandles()) != 2 || FormatHandle(b.GetHandles()[1]) != "6:1:1.9" {
		t.Fatalf("ack batch: %v %v", req, err)
	}
	if _, err := BuildAck([]string{"5:2:1.9", "x"}); err == nil {
		t.Fatal("bad handle in batch accepted")
	}
	if _, err := BuildAck(nil); err == nil {
		t.Fatal("empty ack accepted")
	}

	claim, err := BuildClaim("gpu", "node001", 4, 0, nil)
	if err != nil || !proto.Equal(claim, &schema.ClaimRequest{Queue: "gpu", Host: "node001", Max: 4}) {
		t.Fatalf("claim: %v %v", claim, err)
	}
	claim, err = BuildClaim("gpu", "node001", 4, 1500*time.Millisecond, []string{"5:2:1.9", "6:1:1.9"})
	if err != nil || !proto.Equal(claim, &schema.ClaimRequest{Queue: "gpu", Host: "node001", Max: 4, WaitMs: 1500,
		Ack: []*schema.WalHandle{{Id: 5, Attempt: 2, ClaimTerm: 1, ClaimLsn: 9}, {Id: 6, Attempt: 1, ClaimTerm: 1, ClaimLsn: 9}}}) {
		t.Fatalf("claim with wait and acks: %v %v", claim, err)
	}
	for _, c := range []struct {
		queue, host string
		max         int
		wait        time.Duration
		acks        []string
	}{{"", "h", 1, 0, nil}, {"q", "", 1, 0, nil}, {"q", "h", 0, 0, nil}, {"q", "h", 1, -time.Second, nil},
		{"q", "h", 1, 21 * time.Second, nil}, {"q", "h", 1, 0, []string{"5:2:1.9", "x"}}} {
		if _, err := BuildClaim(c.queue, c.host, c.max, c.wait, c.acks); err == nil {
			t.Errorf("claim %+v accepted", c)
		}
	}

	req, err = BuildHandleOp(sm.JobRetry, "3:1:2.8", "disk full")
	if err != nil || !proto.Equal(req, &schema.RetryRequest{Handle: &schema.WalHandle{Id: 3, Attempt: 1, ClaimTerm: 2, ClaimLsn: 8}, Error: "disk full"}) {
		t.Fatalf("retry: %v %v", req, err)
	}
	req, err = BuildHandleOp(sm.JobFail, "3:1:2.8", "bad input")
	if err != nil || !proto.Equal(req, &schema.FailRequest{Handle: &schema.WalHandle{Id: 3, Attempt: 1, ClaimTerm: 2, ClaimLsn: 8}, Error: "bad input"}) {
		t.Fatalf("fail: %v %v", req, err)
	}
	req, err = BuildHandleOp(sm.JobHeartbeat, "3:1:2.8", "")
	if err != nil || !proto.Equal(req, &schema.HeartbeatRequest{Handle: &schema.WalHandle{Id: 3, Attempt: 1, ClaimTerm: 2, ClaimLsn: 8}}) {
		t.Fatalf("heartbeat: %v %v", req, err)
	}
	if _, err := BuildHandleOp(sm.JobHeartbeat, "3:1:2.8", "why"); err == nil {
		t.Fatal("a heartbeat with an error text accepted")
	}
	if _, err := BuildHandleOp(sm.JobAck, "3:1:2.8", ""); err == nil {
		t.Fatal("an ack as a handle op accepted")
	}
	if _, err := BuildHandleOp(sm.JobFail, "3", ""); err == nil {
		t.Fatal("fail without attempt accepted")
	}
	if _, err := BuildHandleOp(sm.JobFail, "3:1", ""); err == nil {
		t.Fatal("fail with a handle without its claim stamp accepted")
	}

	for kind, want := range map[sm.JobKind]proto.Message{sm.JobRedrive: &schema.RedriveRequest{Id: 42},
		sm.JobCancel: &schema.CancelRequest{Id: 42}, sm.JobGet: &schema.GetRequest{Id: 42}} {
		req, err = BuildIDOp(kind, "42")
		if err != nil || !proto.Equal(req, want) {
			t.Fatalf("%s: %v %v", kind, req, err)
		}
	}
	if _, err := BuildIDOp(sm.JobList, "42"); err == nil {
		t.Fatal("a list as an id op accepted")
	}
	for _, bad := range []string{"0", "-1", "x", "4:1"} {
		if _, err := BuildIDOp(sm.JobGet, bad); err == nil {
			t.Errorf("id %q accepted", bad)
		}
	}

	reg, err := BuildRegister(RegisterOpts{Name: "nightly", Spec: "@every 1d", Queue: "batch", Payload: []byte("p"), Priority: 3, Expires: 2 * time.Hour})
	want := &schema.RegisterScheduleRequest{Name: "nightly", Spec: "@every 1d", Queue: "batch", Payload: []byte("p"),
		Fire: &schema.WalFireOpts{Priority: 3, ExpiresS: 7200}}
	if err != nil || !proto.Equal(reg, want) {
		t.Fatalf("register: %v %v", reg, err)
	}
	for _, o := range []RegisterOpts{{Spec: "@every 1m", Queue: "q"}, {Name: "n", Queue: "q"}, {Name: "n", Spec: "@every 1m"},
		{Name: "n", Spec: "@every 1m", Queue: "q", Expires: time.Millisecond}} {
		if _, err := BuildRegister(o); err == nil {
			t.Errorf("register %+v accepted", o)
		}
	}
}

func TestReadPayload(t *testing.T) {
	f := filepath.Join(t.TempDir(), "p")
	if err := os.WriteFile(f, []byte{0, 1, 2}, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := readPayload("", false, f, nil); err != nil || !bytes.Equal(b, []byte{0, 1, 2}) {
		t.Fatalf("file: %v %v", b, err)
	}
	if b, err := readPayload("", false, "-", strings.NewReader("in")); err != nil || string(b) != "in" {
		t.Fatalf("stdin: %q %v", b, err)
	}
	if b, err := readPayload("text", true, "", nil); err != nil || string(b) != "text" {
		t.Fatalf("flag: %q %v", b, err)
	}
	if b, err := readPayload("", false, "", nil); err != nil || b != nil {
		t.Fatalf("none: %q %v", b, err)
	}
	if _, err := readPayload("", true, f, nil); err == nil {
		t.Fatal("both accepted")
	}
	if _, err := readPayload("", false, filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Fatal("missing file accepted")
	}
}

func sampleJobs() []*schema.SnapshotJob {
	st := &schema.WalStamps{VisibilityTimeoutS: 300, MaxAttempts: 3, BackoffBaseS: 10}
	return []*schema.SnapshotJob{
		{Id: 5, Queue: "batch", State: schema.JobState_JOB_STATE_PROCESSING, Attempts: 1, Claims: 2, ClaimTerm: 3, ClaimLsn: 41, Priority: 7, Host: "node001",
			ClaimedAt: 1767225600, ClaimExpiresAt: 1767225900, Stamps: st, Payload: []byte("hello")},
		{Id: 6, Queue: "batch", State: schema.JobState_JOB_STATE_DEAD, Attempts: 3, Claims: 3, Stamps: st,
			LastError: "boom\nsecond line", DiedAt: 1767225999, Payload: []byte{0xff, 0xfe}},
	}
}

func TestPrintJobs(t *testing.T) {
	var b bytes.Buffer
	if err := PrintJobs(&b, sampleJobs(), true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines: %q", b.String())
	}
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "HANDLE ID QUEUE STATE ATTEMPTS/MAX PRIORITY HOST CLAIMED_AT CLAIM_EXPIRES LAST_ERROR" {
		t.Fatalf("header %q", lines[0])
	}
	if f := strings.Fields(lines[1]); strings.Join(f, " ") != "5:2:3.41 5 batch processing 1/3 7 node001 2026-01-01T00:00:00Z 2026-01-01T00:05:00Z -" {
		t.Fatalf("row 1 %q", lines[1])
	}
	if f := strings.Fields(lines[2]); strings.Join(f, " ") != "- 6 batch dead 3/3 0 - - - boom second line" {
		t.Fatalf("row 2 %q", lines[2])
	}
	b.Reset()
	if err := PrintJobs(&b, sampleJobs(), false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "HANDLE") || !strings.HasPrefix(b.String(), "ID ") {
		t.Fatalf("without handle: %q", b.String())
	}

	b.Reset()
	if err := printJobsAs(&b, "json", sampleJobs(), true); err != nil {
		t.Fatal(err)
	}
	var views []JobView
	if err := json.Unmarshal(b.Bytes(), &views); err != nil {
		t.Fatal(err)
	}
	if len(views) != 2 || views[0].Handle != "5:2:3.41" || views[0].ClaimLSN != 41 || views[0].Payload != "hello" || views[0].MaxAttempts != 3 ||
		views[1].Handle != "" || views[1].PayloadBase64 != "//4=" || views[1].State != "dead" || views[1].DiedAt != 1767225999 {
		t.Fatalf("json: %+v", views)
	}
}

func TestFmtSecs(t *testing.T) {
	for in, want := range map[uint32]string{0: "0s", 1: "1s", 90: "1m30s", 300: "5m", 3600: "1h", 604800: "7d", 90061: "1d1h1m1s"} {
		if got := fmtSecs(in); got != want {
			t.Errorf("fmtSecs(%d) = %q want %q", in, got, want)
		}
	}
}

func sampleConfig() *schema.ClusterConfig {
	return &schema.ClusterConfig{ClusterName: "dev", Port: 7600,
		Queues: []*schema.Queue{
			{Id: 1, Name: "batch", VisibilityTimeoutS: 300, MaxAttempts: 3, BackoffBaseS: 10, DeadLetterRetentionS: 604800},
			{Id: 2, Name: "gpu", VisibilityTimeoutS: 600, MaxAttempts: 2, BackoffBaseS: 30, Priority: 10},
		},
		Hosts:     []*schema.Host{{Name: "node001", Address: "10.0.0.1", ResourceIds: []uint32{1, 7}}, {Name: "node002"}},
		Resources: []*schema.Resource{{Id: 1, Name: "a100", Count: 4}},
	}
}

func TestQueueAndHostListings(t *testing.T) {
	var b bytes.Buffer
	if err := PrintQueues(&b, QueueRows(sampleConfig()), "table"); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"ID", "NAME", "VISIBILITY", "MAX_ATTEMPTS", "BACKOFF", "RETENTION", "PRIORITY"},
		{"1", "batch", "5m", "3", "10s", "7d", "0"},
		{"2", "gpu", "10m", "2", "30s", "forever", "10"},
		{"-", "lost_and_found", "-", "-", "-", "-", "-", "(recovery)"},
	}
	checkTable(t, b.String(), want)

	b.Reset()
	if err := PrintHosts(&b, HostRows(sampleConfig()), "table"); err != nil {
		t.Fatal(err)
	}
	checkTable(t, b.String(), [][]string{
		{"NAME", "ADDRESS", "RESOURCES"},
		{"node001", "10.0.0.1", "a100(1),7"},
		{"node002", "-", "-"},
		{"lost_and_found", "-", "-", "(recovery)"},
	})

	b.Reset()
	if err := PrintQueues(&b, QueueRows(&schema.ClusterConfig{}), "json"); err != nil {
		t.Fatal(err)
	}
	var qs []QueueRow
	if err := json.Unmarshal(b.Bytes(), &qs); err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Name != "lost_and_found" || !qs[0].Recovery {
		t.Fatalf("empty config queues: %+v", qs)
	}
	b.Reset()
	if err := PrintHosts(&b, HostRows(sampleConfig()), "json"); err != nil {
		t.Fatal(err)
	}
	var hs []HostRow
	if err := json.Unmarshal(b.Bytes(), &hs); err != nil {
		t.Fatal(err)
	}
	if len(hs) != 3 || hs[0].Resources[0] != "a100" || hs[0].Resources[1] != "" || !hs[2].Recovery || hs[1].Recovery {
		t.Fatalf("hosts json: %+v", hs)
	}
}

func checkTable(t *testing.T, out string, want [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, l := range lines {
		if got := strings.Fields(l); strings.Join(got, "|") != strings.Join(want[i], "|") {
			t.Fatalf("line %d: got %q want %q\n%s", i, got, want[i], out)
		}
	}
}

func TestBuildDrain(t *testing.T) {
	if r, err := BuildDrain("batch", "h1", false); err != nil || r == nil || r.GetQueue() != "batch" || r.GetHost() != "h1" || r.GetCancel() {
		t.Fatalf("move: %v %v", r, err)
	}
	if r, err := BuildDrain("", "", true); err != nil || !r.GetCancel() || r.GetQueue() != "" {
		t.Fatalf("cancel: %v %v", r, err)
	}
	for _, c := range []struct {
		q, h   string
		cancel bool
		want   string
	}{{"", "", false, "--to-queue is required"}, {"", "h1", false, "--to-queue is required"}, {"batch", "", true, "not both"}, {"", "h1", true, "not both"}} {
		if _, err := BuildDrain(c.q, c.h, c.cancel); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("BuildDrain(%q, %q, %v): %v, want %q", c.q, c.h, c.cancel, err, c.want)
		}
	}
}

// Every request Send takes names its operation as the protobuf
// JobRequest's kind did (the outcome-unknown error says it); any other
// message is no job operation, and Send refuses it unsent.
func TestKindOf(t *testing.T) {
	for want, m := range map[string]proto.Message{
		"enqueue": &schema.SubmitRequest{}, "enqueue-batch": &schema.SubmitBatchRequest{}, "claim": &schema.ClaimRequest{},
		"ack": &schema.AckRequest{}, "ack-batch": &schema.AckBatchRequest{}, "heartbeat": &schema.HeartbeatRequest{},
		"retry": &schema.RetryRequest{}, "fail": &schema.FailRequest{}, "cancel": &schema.CancelRequest{}, "get": &schema.GetRequest{},
		"list": &schema.ListRequest{}, "redrive": &schema.RedriveRequest{}, "sweep": &schema.SweepRequest{}, "tick": &schema.TickRequest{},
		"lost-and-found-drain": &schema.DrainLostAndFoundRequest{}, "register": &schema.RegisterScheduleRequest{},
		"unregister": &schema.UnregisterScheduleRequest{},
	} {
		if got := KindOf(m).String(); got != want {
			t.Errorf("KindOf(%T) = %q, want %q", m, got, want)
		}
	}
	if k := KindOf(&schema.StatusRequest{}); k != 0 {
		t.Errorf("KindOf(StatusRequest) = %v, want 0", k)
	}
	if _, err := Send(context.Background(), nil, &schema.StatusRequest{}); err == nil || !strings.Contains(err.Error(), "not the request of a job operation") {
		t.Errorf("Send(StatusRequest): %v", err)
	}
}

// A job's JSON names its state for every state, pending (the enum's zero
// value, which protobuf leaves out of its own encodings) included.
func TestJobJSONCarriesState(t *testing.T) {
	for st, want := range map[schema.JobState]string{schema.JobState_JOB_STATE_PENDING: "pending",
		schema.JobState_JOB_STATE_PROCESSING: "processing", schema.JobState_JOB_STATE_DEAD: "dead"} {
		var out strings.Builder
		if err := writeJSON(&out, ViewOf(&schema.SnapshotJob{Id: 3, Queue: "batch", State: st})); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out.String()), &m); err != nil || m["state"] != want {
			t.Errorf("%v: state %v in %s, want %q (%v)", st, m["state"], out.String(), want, err)
		}
	}
}

// A retry's --delay is whole seconds, 0 (the backoff) to 24h; schedule
// list prints each schedule's next fire time ("-" for never).
func TestRetryDelayAndScheduleList(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
		bad  string
	}{
		{0, 0, ""}, {30 * time.Second, 30, ""}, {24 * time.Hour, 86400, ""},
		{1500 * time.Millisecond, 0, "whole seconds"}, {-time.Second, 0, "negative"}, {24*time.Hour + time.Second, 0, "at most 24h"},
	} {
		got, err := BuildRetryDelay(c.d)
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) || !strings.Contains(err.Error(), "--delay") {
				t.Errorf("--delay %v: %d, %v; want an error naming --delay and %q", c.d, got, err, c.bad)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("--delay %v: %d, %v; want %d", c.d, got, err, c.want)
		}
	}
	scheds := []*schema.ScheduleInfo{
		{Name: "backup", Spec: "CRON_TZ=Europe/Berlin 0 3 * * *", Queue: "batch", NextFire: 1_800_000_000, Fire: &schema.WalFireOpts{Priority: 3}},
		{Name: "leap", Spec: "0 0 29 2 *", Queue: "batch"},
	}
	var b strings.Builder
	if err := PrintSchedules(&b, "table", scheds); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"NEXT_FIRE", "backup", "CRON_TZ=Europe/Berlin 0 3 * * *", "2027-01-15T08:00:00Z", "leap"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := PrintSchedules(&b, "json", scheds); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"next_fire": "2027-01-15T08:00:00Z"`) || !strings.Contains(b.String(), `"next_fire": "-"`) {
		t.Errorf("json:\n%s", b.String())
	}
}
