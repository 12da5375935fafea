package integration

// Cron schedules and a worker's retry delay against three real
// processes: a cron schedule registered through the API is listed with
// its next fire time, survives a kill -9 of the primary (the new primary
// lists it with the same fire time and fires it once per minute), and a
// job retried with a 2 s delay is not claimable before it.

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/tzdb"
)

// schedulesByName lists the schedules, retrying while the primary
// recovers or a new one is elected.
func schedulesByName(t *testing.T, cl *client.Client) map[string]*schema.ScheduleInfo {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var rep *schema.ListSchedulesResponse
		if rep, err = cl.ListSchedules(context.Background(), &schema.ListSchedulesRequest{}); err == nil {
			out := map[string]*schema.ScheduleInfo{}
			for _, s := range rep.GetSchedules() {
				out[s.GetName()] = s
			}
			return out
		}
	}
	t.Fatalf("no primary lists the schedules: %v", err)
	return nil
}

func TestCronScheduleSurvivesFailover(t *testing.T) {
	c, _, p := exampleCluster(t)
	cl, err := client.NewFromFlag(c.PeersFlag(), admin(t, c), client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	waitListing(t, cl, "gpu")

	// Bad specs are refused, naming the spec.
	for _, spec := range []string{"0 3 * *", "CRON_TZ=Mars/Olympus 0 3 * * *", "0 0 30 2 *"} {
		_, err := cl.RegisterSchedule(ctx, &schema.RegisterScheduleRequest{Name: "bad", Spec: spec, Queue: "gpu"})
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), spec) {
			t.Fatalf("register %q: %v, want invalid_argument naming the spec", spec, err)
		}
	}
	nightly, err := cl.RegisterSchedule(ctx, &schema.RegisterScheduleRequest{Name: "nightly", Spec: "CRON_TZ=Europe/Berlin 0 3 * * *", Queue: "gpu", Payload: []byte("cron-nightly")})
	if err != nil {
		t.Fatal(err)
	}
	minutely, err := cl.RegisterSchedule(ctx, &schema.RegisterScheduleRequest{Name: "minutely", Spec: "* * * * *", Queue: "gpu", Payload: []byte("cron-minutely")})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := tzdb.Lookup("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	berlin, err := time.LoadLocationFromTZData("Europe/Berlin", rules)
	if err != nil {
		t.Fatal(err)
	}
	// The next 03:00 in Berlin after the registration.
	reg := time.Unix(nightly.GetAt(), 0).In(berlin)
	want := time.Date(reg.Year(), reg.Month(), reg.Day(), 3, 0, 0, 0, berlin)
	if !want.After(reg) {
		want = time.Date(reg.Year(), reg.Month(), reg.Day()+1, 3, 0, 0, 0, berlin)
	}
	firstMinute := (minutely.GetAt()/60 + 1) * 60
	s := schedulesByName(t, cl)
	if n := s["nightly"]; n == nil || n.GetNextFire() != want.Unix() || n.GetSpec() != "CRON_TZ=Europe/Berlin 0 3 * * *" || n.GetQueue() != "gpu" {
		t.Fatalf("nightly listed as %v, want next fire %v", n, want)
	}
	if m := s["minutely"]; m == nil || m.GetNextFire() < firstMinute || m.GetNextFire()%60 != 0 {
		t.Fatalf("minutely listed as %v, want a whole minute from %d", m, firstMinute)
	}
	if _, bad := s["bad"]; bad {
		t.Fatal("a refused registration is listed")
	}

	// kill -9 of the primary: the new one has both schedules from the log.
	if code := stop(t, c, p, syscall.SIGKILL); code != -1 {
		t.Fatalf("%s exit code %d after SIGKILL, want -1", c.Names[p], code)
	}
	after := schedulesByName(t, cl)
	if np, ok := cl.Primary(); !ok || np == p {
		t.Fatalf("listed by %d (known %v), not by a new primary", np, ok)
	}
	if n := after["nightly"]; n == nil || n.GetNextFire() != want.Unix() {
		t.Fatalf("after the failover nightly is %v, want next fire %v", n, want)
	}
	if m := after["minutely"]; m == nil || m.GetNextFire() < firstMinute || m.GetNextFire()%60 != 0 {
		t.Fatalf("after the failover minutely is %v", m)
	}

	// The new primary fires the minutely schedule (at most about a
	// minute away), once per minute passed: no slot fired twice.
	var fired int
	for deadline := time.Now().Add(75 * time.Second); ; time.Sleep(time.Second) {
		rep, err := cl.List(ctx, &schema.ListRequest{Queue: "gpu"})
		if err == nil {
			fired = 0
			for _, j := range rep.GetJobs() {
				switch string(j.GetPayload()) {
				case "cron-minutely":
					fired++
				case "cron-nightly":
					t.Fatalf("the nightly schedule fired at %v", time.Now())
				}
			}
		}
		if fired > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no minutely fire within 75 s of the failover (last list: %v)", err)
		}
	}
	if slots := int((time.Now().Unix()-firstMinute)/60) + 1; fired > slots {
		t.Fatalf("%d minutely jobs for %d minute slots since the registration", fired, slots)
	}
	if m := schedulesByName(t, cl)["minutely"]; m.GetNextFire() <= firstMinute {
		t.Fatalf("after its fire minutely still waits for %d", m.GetNextFire())
	}
}

func TestRetryWithWorkerDelay(t *testing.T) {
	c, _, _ := exampleCluster(t)
	cl, err := client.NewFromFlag(c.PeersFlag(), admin(t, c), client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	waitListing(t, cl, "batch")
	sub, err := cl.Submit(ctx, &schema.SubmitRequest{Queue: "batch", Payload: []byte("retry-later")})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(wait uint32) []*schema.SnapshotJob {
		t.Helper()
		rep, err := cl.Claim(ctx, &schema.ClaimRequest{Queue: "batch", Host: "node001", Max: 1, WaitMs: wait})
		if err != nil {
			t.Fatal(err)
		}
		return rep.GetJobs()
	}
	got := claim(0)
	if len(got) != 1 || got[0].GetId() != sub.GetIds()[0] {
		t.Fatalf("first claim: %v", got)
	}
	h := handlesOf(got)[0]
	// A delay out of bounds is invalid_argument naming the field.
	for _, d := range []int64{-1, 86401} {
		_, err := cl.Retry(ctx, &schema.RetryRequest{Handle: h, Error: "x", Delay: d})
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "delay") {
			t.Fatalf("retry with delay %d: %v, want invalid_argument naming the delay", d, err)
		}
	}
	rep, err := cl.RetryAfter(ctx, h, "scratch disk full", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Not claimable before the record's time + 2 s (whole seconds, as
	// every job time): every claim that returns before then finds nothing.
	ready := time.Unix(rep.GetAt()+2, 0)
	j, err := cl.Get(ctx, &schema.GetRequest{Id: h.GetId()})
	if err != nil || j.GetJobs()[0].GetRunAt() != rep.GetAt()+2 || j.GetJobs()[0].GetLastError() != "scratch disk full" {
		t.Fatalf("after the retry: %v %v, want run_at %d", j, err, rep.GetAt()+2)
	}
	checks := 0
	for _, at := range []time.Time{time.Now(), time.Now().Add(time.Second)} {
		time.Sleep(time.Until(at))
		jobs := claim(0)
		if !time.Now().Before(ready) {
			break // the claim may have seen the ready time
		}
		checks++
		if len(jobs) != 0 {
			t.Fatalf("claimed %v at %v, before the worker's delay ends at %v", jobs, time.Now(), ready)
		}
	}
	if checks == 0 {
		t.Fatalf("no claim returned before %v: the machine is too slow to check the delay", ready)
	}
	// After it, a long poll gets the job.
	time.Sleep(time.Until(ready))
	if again := claim(5000); len(again) != 1 || again[0].GetId() != h.GetId() || again[0].GetAttempts() != 2 {
		t.Fatalf("claim after the delay: %v", again)
	}
	t.Logf("%d claims before the delay ended found nothing; claimed after it", checks)
}
