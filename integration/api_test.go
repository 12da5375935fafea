package integration

// The client API from outside Go's client package: Connect's JSON over
// HTTP with the admin certificate, as curl sends it (README.md,
// docs/client-api.md), against a standby and the primary of three real
// processes.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
)

// apiJob is the JSON of a job in an answer (the fields checked here).
type apiJob struct {
	ID      string `json:"id"`
	Queue   string `json:"queue"`
	Payload string `json:"payload"`
}

type apiAnswer struct {
	Jobs    []apiJob `json:"jobs"`
	Code    string   `json:"code"`
	Message string   `json:"message"`
}

func TestAPIOverHTTPJSON(t *testing.T) {
	c, rows, p := exampleCluster(t)
	s := (p + 1) % 3
	mat := admin(t, c)
	tc := mat.ClientConfig() // verifies the node's certificate against the cluster CA
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	post := func(node int, method, body string) (int, http.Header, apiAnswer) {
		t.Helper()
		url := fmt.Sprintf("https://127.0.0.1:%d/xce.v1.Xce/%s", c.Port(node), method)
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			rep, err := cl.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatalf("%s %s: %v", c.Names[node], method, err)
			}
			b, _ := io.ReadAll(rep.Body)
			rep.Body.Close()
			var a apiAnswer
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatalf("%s %s: HTTP %d, body %q: %v", c.Names[node], method, rep.StatusCode, b, err)
			}
			// The primary may still be recovering right after the election.
			if a.Code == "unavailable" && time.Now().Before(deadline) {
				continue
			}
			return rep.StatusCode, rep.Header, a
		}
	}

	// Submit through the standby (forwarded) and the primary, list through
	// both: the same jobs.
	code, hdr, a := post(s, "Submit", `{"queue":"batch","payload":"ZnJvbSB0aGUgc3RhbmRieQ=="}`)
	// A submit's reply is the new job without its payload.
	if code != http.StatusOK || len(a.Jobs) != 1 || a.Jobs[0].ID == "" || a.Jobs[0].Payload != "" {
		t.Fatalf("submit through standby %s: HTTP %d %+v", c.Names[s], code, a)
	}
	if got := hdr.Get(client.PrimaryHeader); got != rows[p].Name {
		t.Fatalf("submit through standby %s: %s %q, want the primary %s", c.Names[s], client.PrimaryHeader, got, rows[p].Name)
	}
	fromStandby := a.Jobs[0].ID
	code, _, a = post(p, "Submit", `{"queue":"batch","payload":"ZnJvbSB0aGUgcHJpbWFyeQ=="}`)
	if code != http.StatusOK || len(a.Jobs) != 1 {
		t.Fatalf("submit through primary %s: HTTP %d %+v", c.Names[p], code, a)
	}
	fromPrimary := a.Jobs[0].ID
	for _, node := range []int{s, p} {
		code, _, a = post(node, "List", `{"queue":"batch"}`)
		ids := map[string]string{} // id -> payload
		for _, j := range a.Jobs {
			ids[j.ID] = j.Payload
		}
		if code != http.StatusOK || ids[fromStandby] != "ZnJvbSB0aGUgc3RhbmRieQ==" || ids[fromPrimary] != "ZnJvbSB0aGUgcHJpbWFyeQ==" {
			t.Fatalf("list through %s: HTTP %d %+v, want jobs %s and %s", c.Names[node], code, a, fromStandby, fromPrimary)
		}
	}
	// Errors are Connect's: a bad request is invalid_argument (HTTP 400),
	// a refused handle failed_precondition, a missing job not_found.
	if code, _, a = post(s, "Submit", `{"queue":"nope"}`); code != http.StatusBadRequest || a.Code != "invalid_argument" || !strings.Contains(a.Message, "nope") {
		t.Fatalf("submit to an unknown queue: HTTP %d %+v", code, a)
	}
	if code, _, a = post(p, "Ack", `{"handle":{"id":"999999","attempt":1}}`); a.Code != "failed_precondition" {
		t.Fatalf("ack of a handle never claimed: HTTP %d %+v", code, a)
	}
	if code, _, a = post(s, "Get", `{"id":"999999"}`); a.Code != "not_found" {
		t.Fatalf("get of a missing job: HTTP %d %+v", code, a)
	}

	// curl, exactly as README.md shows it (there for `make run`'s cluster,
	// here with this cluster's directory and ports), against the standby
	// and the primary.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range clitool.NewCluster(".dev", "", 3, 7601).CurlCommands(2) {
		if !bytes.Contains(readme, []byte(l)) {
			t.Fatalf("README.md does not show the curl line\n%s", l)
		}
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Logf("no curl on this machine: the curl lines were checked against README.md only (%v)", err)
		return
	}
	for _, node := range []int{s, p} {
		lines := c.CurlCommands(node)
		var out [2]apiAnswer
		for k, l := range lines {
			b, err := exec.Command("sh", "-c", l).Output()
			if err != nil {
				t.Fatalf("%s: %v\n%s", l, err, b)
			}
			if err := json.Unmarshal(b, &out[k]); err != nil || out[k].Code != "" {
				t.Fatalf("%s: %q: %v", l, b, err)
			}
		}
		if len(out[0].Jobs) != 1 || out[0].Jobs[0].ID == "" {
			t.Fatalf("curl submit through %s: %+v", c.Names[node], out[0])
		}
		found := false
		for _, j := range out[1].Jobs {
			found = found || j.ID == out[0].Jobs[0].ID && j.Payload == "aGVsbG8="
		}
		if !found {
			t.Fatalf("curl list through %s lacks job %s: %+v", c.Names[node], out[0].Jobs[0].ID, out[1])
		}
	}
}
