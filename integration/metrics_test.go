package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/schema"
)

// Metrics and health on three real processes with --metrics-addr:
// /readyz is 503 on a node that does not serve (a lone node of three
// cannot be elected), 200 on the primary and on its in-sync standbys, and
// flips on failover; /metrics shows the role and term and follows the
// load (queue depth after enqueues and claims, requests by op and code);
// every metric the Grafana dashboard queries is in a running primary's
// /metrics, and the dashboard and docs/operations.md cover every xce_
// metric it serves.
func TestMetricsAndHealth(t *testing.T) {
	c := newCluster(t, 3, fastTimings...)
	c.MetricsPorts = freePorts(t, 3)
	install(t, c, 0, configBlob(t, "metrics", 2, 0))
	const queue = "q000001-"

	// n0 alone: a candidate that cannot win (quorum mode), not ready.
	start(t, c, 0)
	code, why := waitReadyz(t, c, 0, func(code int, body string) bool { return strings.Contains(body, "candidate") })
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(why, "not ready: candidate: ") || strings.Count(why, "\n") != 1 {
		t.Errorf("lone n0: /readyz %d %q, want 503 with a one-line reason", code, why)
	}
	if m := scrape(t, c, 0); m[`xce_role{role="candidate"}`] != 1 || m["xce_ready"] != 0 {
		t.Errorf("lone n0: role candidate %v, ready %v; want 1, 0", m[`xce_role{role="candidate"}`], m["xce_ready"])
	}
	if code, body := httpGet(t, c, 0, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("lone n0: /healthz %d %q, want 200 (the process and its loop are fine)", code, body)
	}

	start(t, c, 1, 2)
	_, p := converge(t, c, -1, 30*time.Second)
	for i := range c.Names {
		code, body := waitReadyz(t, c, i, func(code int, _ string) bool { return code == http.StatusOK })
		role := "standby"
		if i == p {
			role = "primary"
		}
		if code != http.StatusOK || !strings.HasPrefix(body, "ready: "+role+": ") {
			t.Errorf("%s: /readyz %d %q, want 200 as %s", c.Names[i], code, body, role)
		}
	}
	m := scrape(t, c, p)
	term := m["xce_term"]
	if m[`xce_role{role="primary"}`] != 1 || term < 1 {
		t.Errorf("primary %s: role primary %v, term %v", c.Names[p], m[`xce_role{role="primary"}`], term)
	}
	if got := m[`xce_queue_depth{queue="`+queue+`",state="pending"}`]; got != 0 {
		t.Errorf("pending before any enqueue: %v", got)
	}

	mat := admin(t, c)
	const jobs, claimed = 20, 5
	for k := range jobs {
		if rep := jobAt(t, c, mat, p, &schema.SubmitRequest{Queue: queue, Payload: []byte(fmt.Sprint("job-", k))}); len(rep.GetJobs()) != 1 {
			t.Fatalf("enqueue %d: %v", k, rep)
		}
	}
	if rep := jobAt(t, c, mat, p, &schema.ClaimRequest{Queue: queue, Host: "node001", Max: claimed}); len(rep.GetJobs()) != claimed {
		t.Fatalf("claim: %d jobs, want %d", len(rep.GetJobs()), claimed)
	}
	// A standby refuses the list ("not primary", counted as a redirect
	// there, not an error) and forwards it to the primary, which answers
	// it with no refusal on the way: the forwarding node's confirmation of
	// its new connection is a status the primary allows a peer (issue 20
	// finding 11).
	standby := (p + 1) % 3
	if rep := jobAt(t, c, mat, standby, &schema.ListRequest{Queue: queue}); len(rep.GetJobs()) != jobs {
		t.Fatalf("list on standby %s: %d jobs, want the primary's %d", c.Names[standby], len(rep.GetJobs()), jobs)
	}
	m = scrape(t, c, p)
	for series, want := range map[string]float64{
		`xce_queue_depth{queue="` + queue + `",state="pending"}`:    jobs - claimed,
		`xce_queue_depth{queue="` + queue + `",state="processing"}`: claimed,
		`xce_queue_depth{queue="` + queue + `",state="dead"}`:       0,
		`xce_requests_total{code="OK",op="job_enqueue"}`:            jobs,
		`xce_requests_total{code="OK",op="job_claim"}`:              1,
		`xce_requests_total{code="OK",op="job_list"}`:               1, // forwarded by the standby
		`xce_claim_duration_seconds_count`:                          1,
		`xce_lost_and_found_jobs`:                                   0,
		`xce_acked_without_standby_total`:                           0,
		`xce_config_stale`:                                          0,
		`xce_connections{kind="peer"}`:                              2,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("primary: %s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if m["xce_wal_records_since_checkpoint"] < jobs+1 {
		t.Errorf("primary: %v WAL records since checkpoint after %d enqueues and a claim", m["xce_wal_records_since_checkpoint"], jobs)
	}
	for i := range c.Names {
		if _, ok := m[`xce_replication_lag_records{standby="`+c.Names[i]+`"}`]; ok != (i != p) {
			t.Errorf("primary: replication lag of %s present %v", c.Names[i], ok)
		}
	}
	if m[`xce_fsync_duration_seconds_count{target="file"}`] < 1 || m[`xce_fsync_duration_seconds_count{target="dir"}`] < 1 {
		t.Errorf("primary: fsync counts file %v dir %v", m[`xce_fsync_duration_seconds_count{target="file"}`], m[`xce_fsync_duration_seconds_count{target="dir"}`])
	}
	if ms := scrape(t, c, standby); ms[`xce_requests_total{code="redirect",op="job_list"}`] != 1 || ms[`xce_role{role="standby"}`] != 1 {
		t.Errorf("standby %s: redirected lists %v, role standby %v", c.Names[standby], ms[`xce_requests_total{code="redirect",op="job_list"}`], ms[`xce_role{role="standby"}`])
	}
	for series, v := range m {
		if strings.HasPrefix(series, "xce_requests_total{") && !strings.Contains(series, `code="OK"`) && v > 0 {
			t.Errorf("primary: %s = %v on a healthy cluster", series, v)
		}
	}
	if l := findLine(logSince(c, p, 0), "authz."); l != "" {
		t.Errorf("primary: %q on a healthy cluster", l)
	}
	checkDashboardAndDocs(t, c, p)
	checkQueueCounters(t, c, mat, p, "q000002-")

	// Failover: a survivor's /readyz flips from "ready: standby" to
	// "ready: primary" (the unready moments between, while it elects and
	// recovers, are logged: too short to be sure to see from outside), and
	// the new primary serves the replicated queue in a later term; the old
	// primary, restarted, is a ready standby of the new one.
	stop(t, c, p, syscall.SIGKILL)
	killed := time.Now()
	var others []int
	for i := range c.Names {
		if i != p {
			others = append(others, i)
		}
	}
	answers := map[int][]string{} // each survivor's distinct /readyz answers, in order
	np := -1
	for deadline := time.Now().Add(30 * time.Second); np < 0; time.Sleep(10 * time.Millisecond) {
		ready := 0
		for _, i := range others {
			code, body := httpGet(t, c, i, "/readyz")
			if a := answers[i]; len(a) == 0 || a[len(a)-1] != body {
				answers[i] = append(a, body)
			}
			if code == http.StatusOK {
				ready++
			}
		}
		for _, i := range others {
			if a := answers[i]; ready == len(others) && strings.HasPrefix(a[len(a)-1], "ready: primary: ") {
				np = i
			}
		}
		if np < 0 && time.Now().After(deadline) {
			t.Fatalf("no survivor became a ready primary within 30 s; /readyz answers: %v", answers)
		}
	}
	t.Logf("failover: %s a ready primary %v after the kill; /readyz answers: %v", c.Names[np], time.Since(killed).Round(time.Millisecond), answers)
	if a := answers[np]; !strings.HasPrefix(a[0], "ready: standby: in sync with "+c.Names[p]) {
		t.Errorf("new primary %s: first /readyz answer after the kill %q, want ready as %s's standby", c.Names[np], a[0], c.Names[p])
	}
	for _, a := range answers {
		for _, body := range a {
			if !strings.HasPrefix(body, "ready: ") && !strings.HasPrefix(body, "not ready: ") || strings.Count(body, "\n") != 1 {
				t.Errorf("/readyz answer %q is not one line of ready or not ready", body)
			}
		}
	}
	m = scrape(t, c, np)
	// The new primary counts from zero (its replay of the log counts
	// nothing) and has the jobs' ready times back from the log.
	for _, op := range []string{"enqueued", "claimed", "acked", "retried", "dead"} {
		series := `xce_queue_jobs_` + op + `_total{queue="q000002-"}`
		if got, ok := m[series]; !ok || got != 0 {
			t.Errorf("new primary %s: %s = %v (present %v), want 0", c.Names[np], series, got, ok)
		}
	}
	if got, ok := m[`xce_queue_oldest_pending_age_seconds{queue="`+queue+`"}`]; !ok || got < 1 {
		t.Errorf("new primary %s: oldest pending age of %s = %v (present %v), want the replicated jobs' (>= 1 s)", c.Names[np], queue, got, ok)
	}
	if m[`xce_role{role="primary"}`] != 1 || m["xce_term"] <= term || m[`xce_queue_depth{queue="`+queue+`",state="pending"}`] != jobs-claimed {
		t.Errorf("new primary %s: role primary %v, term %v (was %v), pending %v (want %d)", c.Names[np], m[`xce_role{role="primary"}`], m["xce_term"], term, m[`xce_queue_depth{queue="`+queue+`",state="pending"}`], jobs-claimed)
	}
	start(t, c, p)
	if code, body := waitReadyz(t, c, p, func(code int, _ string) bool { return code == http.StatusOK }); code != http.StatusOK || body != "ready: standby: in sync with "+c.Names[np]+"\n" {
		t.Errorf("restarted %s: /readyz %d %q, want ready as %s's standby", c.Names[p], code, body, c.Names[np])
	}
}

// checkQueueCounters runs a known workload on queue, which holds no job,
// on the primary p: submit 5, claim 3, ack 2, retry 1, then claim 1 more
// (a job never claimed: the retried one waits out its 10 s backoff) and
// fail it. The throughput counters move by exactly that, the oldest
// pending job's age grows from its submit, and a stale ack and a submit
// to an unknown queue are counted by the gRPC codes the client got.
func checkQueueCounters(t *testing.T, c *clitool.Cluster, mat *tlsconf.Material, p int, queue string) {
	t.Helper()
	series := func(op string) string { return `xce_queue_jobs_` + op + `_total{queue="` + queue + `"}` }
	ops := []string{"enqueued", "claimed", "acked", "retried", "dead"}
	before := scrape(t, c, p)
	for _, op := range ops {
		if v, ok := before[series(op)]; !ok || v != 0 {
			t.Fatalf("primary: %s = %v (present %v) before the workload, want 0", series(op), v, ok)
		}
	}
	submitted := time.Now()
	for k := range 5 {
		if rep := jobAt(t, c, mat, p, &schema.SubmitRequest{Queue: queue, Payload: []byte(fmt.Sprint("w-", k))}); len(rep.GetJobs()) != 1 {
			t.Fatalf("submit %d: %v", k, rep)
		}
	}
	got := jobAt(t, c, mat, p, &schema.ClaimRequest{Queue: queue, Host: "node001", Max: 3}).GetJobs()
	if len(got) != 3 {
		t.Fatalf("claim: %d jobs, want 3", len(got))
	}
	for _, j := range got[:2] {
		jobAt(t, c, mat, p, &schema.AckRequest{Handle: clitool.JobHandle(j)})
	}
	jobAt(t, c, mat, p, &schema.RetryRequest{Handle: clitool.JobHandle(got[2]), Error: "again"})
	last := jobAt(t, c, mat, p, &schema.ClaimRequest{Queue: queue, Host: "node001", Max: 1}).GetJobs()
	if len(last) != 1 {
		t.Fatalf("second claim: %d jobs, want 1", len(last))
	}
	jobAt(t, c, mat, p, &schema.FailRequest{Handle: clitool.JobHandle(last[0]), Error: "broken"})
	m := scrape(t, c, p)
	for op, want := range map[string]float64{"enqueued": 5, "claimed": 4, "acked": 2, "retried": 1, "dead": 1} {
		if got := m[series(op)] - before[series(op)]; got != want {
			t.Errorf("primary: %s moved by %v, want %v", series(op), got, want)
		}
	}
	for k, want := range map[string]float64{"pending": 2, "processing": 0, "dead": 1} {
		if got := m[`xce_queue_depth{queue="`+queue+`",state="`+k+`"}`]; got != want {
			t.Errorf("primary: %s %s = %v, want %v", queue, k, got, want)
		}
	}
	// One pending job was never claimed: its age grows from its submit
	// (ready times are whole seconds, hence the slack of one).
	age := `xce_queue_oldest_pending_age_seconds{queue="` + queue + `"}`
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		v, ok := scrape(t, c, p)[age]
		waited := time.Since(submitted).Seconds()
		if !ok || v < 0 || v > waited+1 {
			t.Fatalf("primary: %s = %v (present %v) %.1f s after the submits", age, v, ok, waited)
		}
		if v >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("primary: %s still %v after %.1f s", age, v, waited)
		}
	}
	// The same ack again: the API answers FailedPrecondition; a submit
	// to an unknown queue, InvalidArgument. The metric says the same.
	for _, c2 := range []struct {
		jr   proto.Message
		code connect.Code
	}{
		{&schema.AckRequest{Handle: clitool.JobHandle(got[0])}, connect.CodeFailedPrecondition},
		{&schema.SubmitRequest{Queue: "nosuch", Payload: []byte("x")}, connect.CodeInvalidArgument},
	} {
		if err := jobErrAt(t, c, mat, p, c2.jr); connect.CodeOf(err) != c2.code {
			t.Errorf("%s: error %v, want code %v", clitool.KindOf(c2.jr), err, c2.code)
		}
	}
	m = scrape(t, c, p)
	for s, want := range map[string]float64{
		`xce_requests_total{code="FailedPrecondition",op="job_ack"}`:  1,
		`xce_requests_total{code="InvalidArgument",op="job_enqueue"}`: 1,
		`xce_requests_total{code="OK",op="job_ack"}`:                  2,
		`xce_requests_total{code="OK",op="job_retry"}`:                1,
		`xce_requests_total{code="OK",op="job_fail"}`:                 1,
	} {
		if got := m[s]; got != want {
			t.Errorf("primary: %s = %v, want %v", s, got, want)
		}
	}
}

// jobErrAt sends one job request to node i and returns its error (nil if
// it succeeded).
func jobErrAt(t testing.TB, c *clitool.Cluster, mat *tlsconf.Material, i int, jr proto.Message) error {
	t.Helper()
	d, err := newDoer(peersOf(c, i), mat, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, err = d.Do(context.Background(), jr)
	return err
}

// checkDashboardAndDocs: every series name the dashboard's queries name
// is in node i's /metrics, and every xce_ metric family there is queried
// by the dashboard and listed in docs/operations.md.
func checkDashboardAndDocs(t *testing.T, c *clitool.Cluster, i int) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "docs", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
			FieldConfig struct {
				Defaults struct {
					Unit string `json:"unit"`
				} `json:"defaults"`
				Overrides []struct {
					Matcher struct {
						ID      string `json:"id"`
						Options string `json:"options"`
					} `json:"matcher"`
					Properties []struct {
						ID    string `json:"id"`
						Value any    `json:"value"`
					} `json:"properties"`
				} `json:"overrides"`
			} `json:"fieldConfig"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	_, text := httpGet(t, c, i, "/metrics")
	series := map[string]bool{} // names of the series served
	families := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if name := strings.Fields(f)[0]; strings.HasPrefix(name, "xce_") {
				families[name] = true
			}
			continue
		}
		if name := seriesName.FindString(line); name != "" {
			series[name] = true
		}
	}
	queried := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			// A histogram's _count alone (no division: not a mean) is a
			// count or a rate, never a duration: its unit is not seconds.
			if strings.Contains(tg.Expr, "_count") && !strings.Contains(tg.Expr, "/") {
				unit := p.FieldConfig.Defaults.Unit
				for _, o := range p.FieldConfig.Overrides {
					if o.Matcher.ID == "byFrameRefID" && o.Matcher.Options == tg.RefID {
						for _, pr := range o.Properties {
							if u, ok := pr.Value.(string); ok && pr.ID == "unit" {
								unit = u
							}
						}
					}
				}
				if unit == "s" {
					t.Errorf("dashboard panel %q shows the count %s in seconds", p.Title, tg.Expr)
				}
			}
			for _, name := range metricName.FindAllString(tg.Expr, -1) {
				queried[name] = true
				if !series[name] {
					t.Errorf("dashboard panel %q queries %s, which %s's /metrics does not serve", p.Title, name, c.Names[i])
				}
			}
		}
	}
	docs, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for f := range families {
			if !yield(f) {
				return
			}
		}
	})
	if len(names) < 15 {
		t.Errorf("/metrics serves only %d xce_ families: %v", len(names), names)
	}
	for _, f := range names {
		if !queried[f] && !queried[f+"_bucket"] && !queried[f+"_count"] && !queried[f+"_sum"] {
			t.Errorf("the dashboard queries no series of %s", f)
		}
		if !strings.Contains(string(docs), "`"+f+"`") {
			t.Errorf("docs/operations.md does not list %s", f)
		}
	}
}

var (
	seriesName = regexp.MustCompile(`^xce_[a-z_]+`)
	metricName = regexp.MustCompile(`xce_[a-z_]+`)
)

// httpGet asks node i's metrics endpoint for path.
func httpGet(t testing.TB, c *clitool.Cluster, i int, path string) (int, string) {
	t.Helper()
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + c.MetricsAddr(i) + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", c.Names[i], path, err)
	}
	return resp.StatusCode, string(b)
}

// waitReadyz polls node i's /readyz until done holds (or 20 s pass) and
// returns the last answer.
func waitReadyz(t *testing.T, c *clitool.Cluster, i int, done func(code int, body string) bool) (int, string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := httpGet(t, c, i, "/readyz")
		if done(code, body) || time.Now().After(deadline) {
			return code, body
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scrape reads node i's /metrics: each xce_ series as printed (name and
// labels) to its value.
func scrape(t testing.TB, c *clitool.Cluster, i int) map[string]float64 {
	t.Helper()
	code, text := httpGet(t, c, i, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("%s /metrics: %d %s", c.Names[i], code, text)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "xce_") {
			continue
		}
		k := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[k+1:], 64)
		if k < 0 || err != nil {
			t.Fatalf("%s /metrics: bad line %q", c.Names[i], line)
		}
		out[line[:k]] = v
	}
	return out
}

// jobAt sends one job request to node i alone (a standby forwards it to
// the primary it follows) and returns the answer; it retries only while
// nobody took it (the node down or starting, no primary known), never a
// request that was answered or may have been applied.
func jobAt(t testing.TB, c *clitool.Cluster, mat *tlsconf.Material, i int, jr proto.Message) *schema.JobResponse {
	t.Helper()
	d, err := newDoer(peersOf(c, i), mat, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var last error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		res, err := d.Do(context.Background(), jr)
		if errors.Is(err, client.ErrNoPrimary) {
			last = err
			continue
		}
		if err != nil {
			t.Fatalf("%s: %s: %v", c.Names[i], clitool.KindOf(jr), err)
		}
		return res.Reply
	}
	t.Fatalf("%s: %s: nobody took it: %v", c.Names[i], clitool.KindOf(jr), last)
	return nil
}
