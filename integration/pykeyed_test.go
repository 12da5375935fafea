package integration

// Keyed submits through the Python client (python/, from the source
// tree) against three real processes: a repeat with the same key is
// answered deduplicated with the first submit's job, through a standby,
// for a batch too, and after the primary is killed with -9 (the client
// repeats the submit itself through the election); another payload
// under the key is refused with already_exists.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/schema"
)

// pySubmitScript runs the submits of a JSON list (argv[5]) with the
// Python client and prints one JSON line per submit: its ids and
// deduplicated flags, or the exception's class and code, and how many
// times the client waited to repeat it.
const pySubmitScript = `
import json, sys
from xce_worker import Client, OutcomeUnknown, XceError
peers, ca, cert, key, ops = sys.argv[1:6]
cl = Client(peers, ca, cert, key, timeout=5)
waits, sleep = [], cl._sleep
cl._sleep = lambda s: (waits.append(s), sleep(s))
for op in json.loads(ops):
    waits.clear()
    try:
        if "keys" in op:
            r = cl.submit_batch(op["queue"], op["payloads"], idempotency_keys=op["keys"])
            out = {"ids": r.ids, "deduplicated": r.deduplicated}
        else:
            r = cl.submit(op["queue"], op["payload"], idempotency_key=op["key"])
            out = {"ids": [r.id], "deduplicated": [r.deduplicated]}
    except XceError as e:
        out = {"error": type(e).__name__, "code": e.code, "message": str(e)}
    except OutcomeUnknown as e:
        out = {"error": "OutcomeUnknown", "message": str(e)}
    out["repeats"] = len(waits)
    print(json.dumps(out), flush=True)
`

type pySubmit struct {
	Queue    string   `json:"queue"`
	Payload  string   `json:"payload,omitempty"`
	Key      string   `json:"key,omitempty"`
	Payloads []string `json:"payloads,omitempty"`
	Keys     []string `json:"keys,omitempty"`
}

type pyAnswer struct {
	IDs          []uint64 `json:"ids"`
	Deduplicated []bool   `json:"deduplicated"`
	Error        string   `json:"error"`
	Code         string   `json:"code"`
	Message      string   `json:"message"`
	Repeats      int      `json:"repeats"`
}

// runPySubmits runs pySubmitScript on ops through peers, as the admin.
func runPySubmits(t *testing.T, c *clitool.Cluster, peers string, ops ...pySubmit) []pyAnswer {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed for the Python client tests (.ci/run installs it): %v", err)
	}
	src, err := filepath.Abs("../python")
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(c.Dir, "certs")
	cmd := exec.Command(py, "-c", pySubmitScript, peers,
		filepath.Join(certs, "ca.crt"), filepath.Join(certs, "admin.crt"), filepath.Join(certs, "admin.key"), string(js))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the Python submits: %v\n%s%s", err, out, stderr.String())
	}
	var answers []pyAnswer
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var a pyAnswer
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("the Python submits printed %q: %v\n%s", l, err, stderr.String())
		}
		answers = append(answers, a)
	}
	if len(answers) != len(ops) {
		t.Fatalf("the Python submits answered %d of %d\n%s%s", len(answers), len(ops), out, stderr.String())
	}
	return answers
}

func TestPythonKeyedSubmit(t *testing.T) {
	c, _, p := exampleCluster(t)
	cl, err := client.NewFromFlag(c.PeersFlag(), admin(t, c), client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitListing(t, cl, "batch")
	ctx := context.Background()

	sub := pySubmit{Queue: "batch", Payload: "render frame 7", Key: "py-order-7"}
	batch := pySubmit{Queue: "batch", Payloads: []string{"b1", "b2"}, Keys: []string{"py-b1", "py-b2"}}
	other := pySubmit{Queue: "batch", Payload: "another payload", Key: "py-order-7"}

	// Through a standby, which forwards to the primary.
	s := (p + 1) % 3
	got := runPySubmits(t, c, peersOf(c, s, p), sub, sub, batch, batch, other)
	first, firstBatch := got[0], got[2]
	if first.Error != "" || len(first.IDs) != 1 || !slices.Equal(first.Deduplicated, []bool{false}) {
		t.Fatalf("the first keyed submit: %+v", first)
	}
	if firstBatch.Error != "" || len(firstBatch.IDs) != 2 || !slices.Equal(firstBatch.Deduplicated, []bool{false, false}) {
		t.Fatalf("the first keyed batch: %+v", firstBatch)
	}
	if r := got[1]; r.Error != "" || !slices.Equal(r.IDs, first.IDs) || !slices.Equal(r.Deduplicated, []bool{true}) {
		t.Fatalf("the repeat answered %+v; want job %v, deduplicated", r, first.IDs)
	}
	if r := got[3]; r.Error != "" || !slices.Equal(r.IDs, firstBatch.IDs) || !slices.Equal(r.Deduplicated, []bool{true, true}) {
		t.Fatalf("the batch's repeat answered %+v; want jobs %v, deduplicated", r, firstBatch.IDs)
	}
	if r := got[4]; r.Error != "XceError" || r.Code != "already_exists" {
		t.Fatalf("the key with another payload: %+v, want XceError already_exists", r)
	}
	g, err := cl.Get(ctx, &schema.GetRequest{Id: first.IDs[0]})
	if err != nil || len(g.GetJobs()) != 1 || string(g.GetJobs()[0].GetPayload()) != "render frame 7" {
		t.Fatalf("job %d reads %v, %v", first.IDs[0], g, err)
	}
	list, err := cl.List(ctx, &schema.ListRequest{Queue: "batch"})
	if err != nil || len(list.GetJobs()) != 3 {
		t.Fatalf("queue batch holds %d jobs (%v), want 3: a repeat enqueued a job", len(list.GetJobs()), err)
	}

	// The primary killed: the Python client repeats the keyed submit
	// through the election until a new primary answers it.
	stop(t, c, p, syscall.SIGKILL)
	t0 := time.Now()
	got = runPySubmits(t, c, c.PeersFlag(), sub)
	t.Logf("the repeat after the primary's kill was answered in %v, sent %d times", time.Since(t0).Round(time.Millisecond), got[0].Repeats+1)
	if r := got[0]; r.Error != "" || !slices.Equal(r.IDs, first.IDs) || !slices.Equal(r.Deduplicated, []bool{true}) {
		t.Fatalf("after the primary was killed the repeat answered %+v; want job %v, deduplicated", r, first.IDs)
	}
}
