package clitool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"xce/adapters/daemon"
	"xce/schema"
	"xce/sm"
)

func TestParseHandle(t *testing.T) {
	good := map[string][2]uint64{"12:3": {12, 3}, " 7:1 ": {7, 1}, "18446744073709551615:4294967295": {1<<64 - 1, 1<<32 - 1}}
	for in, want := range good {
		h, err := ParseHandle(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if h.GetId() != want[0] || uint64(h.GetAttempt()) != want[1] {
			t.Fatalf("%q: got %v", in, h)
		}
		if got := FormatHandle(h); got != strings.TrimSpace(in) {
			t.Fatalf("round trip %q -> %q", in, got)
		}
	}
	for _, in := range []string{"", "12", "12:", ":3", "0:1", "1:0", "a:b", "1:4294967296", "-1:2", "1:2:3", "1.5:2"} {
		if h, err := ParseHandle(in); err == nil {
			t.Fatalf("%q accepted as %v", in, h)
		}
	}
}

func TestJobHandleOnlyForProcessing(t *testing.T) {
	j := &schema.SnapshotJob{Id: 9, Claims: 4, Attempts: 1, State: schema.JobState_JOB_STATE_PROCESSING}
	if h := JobHandle(j); h == nil || FormatHandle(h) != "9:4" {
		t.Fatalf("processing job handle: %v (want claims, not attempts)", h)
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
	want := &schema.JobRequest{Kind: schema.JobRequest_ENQUEUE, Queue: "batch", Payload: []byte("x"), Priority: 5, Delay: 30,
		Expires: 3600, Host: "node001", Resource: 1}
	if !proto.Equal(req, want) {
		t.Fatalf("got %v want %v", req, want)
	}
	req, err = BuildSubmit(SubmitOpts{Queue: "batch", RunAt: "2030-01-02T03:04:05Z"})
	if err != nil {
		t.Fatal(err)
	}
	if req.GetRunAt() != time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).Unix() || req.GetDelay() != 0 {
		t.Fatalf("run-at: %v", req)
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
	req, err := BuildAck([]string{"5:2"})
	if err != nil || req.GetKind() != schema.JobRequest_ACK || FormatHandle(req.GetHandle()) != "5:2" || len(req.GetHandles()) != 0 {
		t.Fatalf("ack one: %v %v", req, err)
	}
	req, err = BuildAck([]string{"5:2", "6:1"})
	if err != nil || req.GetKind() != schema.JobRequest_ACK_BATCH || len(req.GetHandles()) != 2 || req.GetHandle() != nil ||
		FormatHandle(req.GetHandles()[1]) != "6:1" {
		t.Fatalf("ack batch: %v %v", req, err)
	}
	if _, err := BuildAck([]string{"5:2", "x"}); err == nil {
		t.Fatal("bad handle in batch accepted")
	}
	if _, err := BuildAck(nil); err == nil {
		t.Fatal("empty ack accepted")
	}

	req, err = BuildClaim("gpu", "node001", 4)
	if err != nil || !proto.Equal(req, &schema.JobRequest{Kind: schema.JobRequest_CLAIM, Queue: "gpu", Host: "node001", Max: 4}) {
		t.Fatalf("claim: %v %v", req, err)
	}
	for _, c := range [][3]any{{"", "h", 1}, {"q", "", 1}, {"q", "h", 0}} {
		if _, err := BuildClaim(c[0].(string), c[1].(string), c[2].(int)); err == nil {
			t.Errorf("claim %v accepted", c)
		}
	}

	req, err = BuildHandleOp(schema.JobRequest_RETRY, "3:1", "disk full")
	if err != nil || !proto.Equal(req, &schema.JobRequest{Kind: schema.JobRequest_RETRY, Handle: &schema.WalHandle{Id: 3, Attempt: 1}, Error: "disk full"}) {
		t.Fatalf("retry: %v %v", req, err)
	}
	if _, err := BuildHandleOp(schema.JobRequest_FAIL, "3", ""); err == nil {
		t.Fatal("fail without attempt accepted")
	}

	req, err = BuildIDOp(schema.JobRequest_REDRIVE, "42")
	if err != nil || !proto.Equal(req, &schema.JobRequest{Kind: schema.JobRequest_REDRIVE, Id: 42}) {
		t.Fatalf("redrive: %v %v", req, err)
	}
	for _, bad := range []string{"0", "-1", "x", "4:1"} {
		if _, err := BuildIDOp(schema.JobRequest_GET, bad); err == nil {
			t.Errorf("id %q accepted", bad)
		}
	}

	req, err = BuildRegister(RegisterOpts{Name: "nightly", Spec: "@every 1d", Queue: "batch", Payload: []byte("p"), Priority: 3, Expires: 2 * time.Hour})
	want := &schema.JobRequest{Kind: schema.JobRequest_REGISTER, Name: "nightly", Spec: "@every 1d", Queue: "batch", Payload: []byte("p"),
		Fire: &schema.WalFireOpts{Priority: 3, ExpiresS: 7200}}
	if err != nil || !proto.Equal(req, want) {
		t.Fatalf("register: %v %v", req, err)
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
		{Id: 5, Queue: "batch", State: schema.JobState_JOB_STATE_PROCESSING, Attempts: 1, Claims: 2, Priority: 7, Host: "node001",
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
	if f := strings.Fields(lines[1]); strings.Join(f, " ") != "5:2 5 batch processing 1/3 7 node001 2026-01-01T00:00:00Z 2026-01-01T00:05:00Z -" {
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
	if len(views) != 2 || views[0].Handle != "5:2" || views[0].Payload != "hello" || views[0].MaxAttempts != 3 ||
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

func TestClassify(t *testing.T) {
	rep := func(status int32, msg string) *schema.ClientReply {
		return &schema.ClientReply{Status: status, Error: msg}
	}
	for _, c := range []struct {
		rep  *schema.ClientReply
		want verdict
	}{
		{rep(sm.StatusOK, ""), vDone},
		{rep(sm.StatusEINVAL, "unknown queue \"x\""), vDone},
		{rep(sm.StatusEAGAIN, "Not primary — redirect to primary"), vNotPrimary},
		{rep(sm.StatusEAGAIN, "primary is recovering its job state; retry"), vNext},
		{rep(sm.StatusEAGAIN, "starting"), vNext},
		{rep(sm.StatusEAGAIN, "stepped down: outcome unknown, retry against the primary"), vUnknown},
		{rep(sm.StatusEAGAIN, "context deadline exceeded"), vUnknown},
	} {
		if got := classify(c.rep); got != c.want {
			t.Errorf("%q: got %d want %d", c.rep.GetError(), got, c.want)
		}
	}
}

// fakeCaller answers per address; calls records the addresses in order.
type fakeCaller struct {
	answer map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error)
	calls  []string
}

func (f *fakeCaller) call(_ context.Context, addr string, req *schema.ClientRequest) (*schema.ClientReply, bool, error) {
	f.calls = append(f.calls, addr)
	a := f.answer[addr]
	if a == nil {
		return nil, false, errors.New("connection refused")
	}
	return a(req.GetJob())
}

func notPrimary(p int32) func(*schema.JobRequest) (*schema.ClientReply, bool, error) {
	return func(*schema.JobRequest) (*schema.ClientReply, bool, error) {
		return &schema.ClientReply{Status: sm.StatusEAGAIN, Error: "Not primary — redirect to primary",
			Body: &schema.ClientReply_JobReply{JobReply: &schema.JobReply{Primary: p}}}, true, nil
	}
}

func okReply(*schema.JobRequest) (*schema.ClientReply, bool, error) {
	return &schema.ClientReply{Body: &schema.ClientReply_JobReply{JobReply: &schema.JobReply{Ok: true}}}, true, nil
}

func TestDoRouting(t *testing.T) {
	peers, _, err := daemon.ParsePeers("a=h:1,b=h:2,c=h:3,d=h:4")
	if err != nil {
		t.Fatal(err)
	}
	ack := &schema.JobRequest{Kind: schema.JobRequest_ACK, Handle: &schema.WalHandle{Id: 1, Attempt: 1}}
	get := &schema.JobRequest{Kind: schema.JobRequest_GET, Id: 1}
	sentFail := func(*schema.JobRequest) (*schema.ClientReply, bool, error) {
		return nil, true, errors.New("i/o timeout")
	}
	unknown := func(*schema.JobRequest) (*schema.ClientReply, bool, error) {
		return &schema.ClientReply{Status: sm.StatusEAGAIN, Error: "stepped down: outcome unknown, retry against the primary"}, true, nil
	}
	cases := []struct {
		name    string
		answer  map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error)
		req     *schema.JobRequest
		calls   string
		peer    string
		wantErr error
	}{
		{"first is primary", map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error){"h:1": okReply}, ack, "h:1", "a", nil},
		{"redirect followed", map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error){"h:1": notPrimary(3), "h:4": okReply}, ack, "h:1 h:4", "d", nil},
		{"down skipped, unknown primary: next", map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error){"h:2": notPrimary(-1), "h:3": okReply}, ack, "h:1 h:2 h:3", "c", nil},
		{"redirect followed once only", map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error){
			"h:1": notPrimary(3), "h:4": notPrimary(2), "h:2": notPrimary(0), "h:3": okReply}, ack, "h:1 h:4 h:2 h:3", "c", nil},
		{"redirect to a down peer, then order", map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error){
			"h:1": notPrimary(2), "h:2": okReply}, ack, "h:1 h:3 h:2", "b", nil},
		{"nobody", map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error){"h:1": notPrimary(-1)}, ack, "h:1 h:2 h:3 h:4", "", ErrNoPrimary},
		{"mutation sent, connection lost: stop", map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error){"h:1": sentFail, "h:2": okReply}, ack, "h:1", "", ErrUnknownOutcome},
		{"read sent, connection lost: next", map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error){"h:1": sentFail, "h:2": okReply}, get, "h:1 h:2", "b", nil},
		{"mutation, outcome unknown reply: stop", map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error){"h:1": unknown, "h:2": okReply}, ack, "h:1", "", ErrUnknownOutcome},
		{"read, outcome unknown reply: next", map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error){"h:1": unknown, "h:2": okReply}, get, "h:1 h:2", "b", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeCaller{answer: c.answer}
			cl := &JobClient{Peers: peers, call: f.call}
			res, err := cl.Do(context.Background(), c.req)
			if got := strings.Join(f.calls, " "); got != c.calls {
				t.Errorf("calls %q want %q", got, c.calls)
			}
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v want %v", err, c.wantErr)
				}
				return
			}
			if err != nil || res.Peer != c.peer || !res.Reply.GetOk() {
				t.Fatalf("res %+v err %v", res, err)
			}
		})
	}

	// A node's refusal of the input stops the search with its text.
	f := &fakeCaller{answer: map[string]func(*schema.JobRequest) (*schema.ClientReply, bool, error){
		"h:1": func(*schema.JobRequest) (*schema.ClientReply, bool, error) {
			return &schema.ClientReply{Status: sm.StatusEINVAL, Error: `unknown queue "nope"`}, true, nil
		}}}
	_, err = (&JobClient{Peers: peers, call: f.call}).Do(context.Background(), ack)
	var ne *NodeError
	if !errors.As(err, &ne) || ne.Peer != "a" || !strings.Contains(err.Error(), `unknown queue "nope"`) || len(f.calls) != 1 {
		t.Fatalf("node error: %v, calls %v", err, f.calls)
	}
}
