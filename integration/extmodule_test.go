package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
)

// siteMain is a program of another module that uses the public client as
// docs/client-api.md shows: a client from a --peers string and a worker
// certificate, a submit, and a get of the new job.
const siteMain = `package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
)

func main() {
	peers := flag.String("peers", "", "")
	cert := flag.String("cert", "", "")
	key := flag.String("key", "", "")
	ca := flag.String("ca", "", "")
	queue := flag.String("queue", "", "")
	flag.Parse()
	if err := run(*peers, *cert, *key, *ca, *queue); err != nil {
		fmt.Fprintln(os.Stderr, "site:", err)
		os.Exit(1)
	}
}

func run(peers, cert, key, ca, queue string) error {
	mat, err := tlsconf.Load(cert, key, ca)
	if err != nil {
		return err
	}
	cl, err := client.NewFromFlag(peers, mat, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := context.Background()
	rep, err := cl.Submit(ctx, &schema.SubmitRequest{Queue: queue, Payload: []byte("hello")})
	switch {
	case errors.Is(err, client.ErrOutcomeUnknown), errors.Is(err, client.ErrNoPrimary):
		return fmt.Errorf("submit: %w", err)
	case err != nil:
		return err
	}
	id := rep.GetJobs()[0].GetId()
	got, err := cl.Get(ctx, &schema.GetRequest{Id: id})
	if err != nil {
		return err
	}
	j := got.GetJobs()[0]
	fmt.Printf("job %d %s %s %q\n", j.GetId(), j.GetQueue(), j.GetState(), j.GetPayload())
	return nil
}
`

// A module outside the repository (example.com/site, the repository put
// in by a replace directive, as a site's own code would pin a release)
// imports the client, builds with `go mod tidy` and `go build`, and its
// program submits a job to a real cluster and reads it back. The import
// fails to compile if client were an internal package or go.mod named
// another module path.
func TestOutsideModuleUsesClient(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := fmt.Sprintf("module example.com/site\n\ngo 1.26.0\n\nrequire github.com/xce-hpc/xce v0.0.0\n\nreplace github.com/xce-hpc/xce => %s\n", root)
	// The repository's go.sum holds the sums of every module the client
	// needs: with it, tidy needs no checksum database.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(siteMain)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gocmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// GOPROXY and GOMODCACHE are this process's: the modules come from
		// the same cache as the repository's own build.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
	}
	gocmd("mod", "tidy")
	gocmd("build", "-o", "site", ".")
	tidied, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*github\.com/xce-hpc/xce v0\.0\.0$|^require github\.com/xce-hpc/xce v0\.0\.0$`).Match(tidied) {
		t.Fatalf("go mod tidy dropped the requirement:\n%s", tidied)
	}

	c := newCluster(t, 3, fastTimings...)
	blob := configBlob(t, "site", 1, 0)
	for i := range c.Names {
		install(t, c, i, blob)
	}
	start(t, c, 0, 1, 2)
	converge(t, c, -1, 30*time.Second)
	certs := filepath.Join(c.Dir, "certs")
	out, err := exec.Command(filepath.Join(dir, "site"), "--peers", c.PeersFlag(),
		"--cert", filepath.Join(certs, configtool.WorkerCN+".crt"), "--key", filepath.Join(certs, configtool.WorkerCN+".key"),
		"--ca", filepath.Join(certs, "ca.crt"), "--queue", "q000001-").CombinedOutput()
	if err != nil {
		t.Fatalf("the site's program: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`^job [1-9][0-9]* q000001- JOB_STATE_PENDING "hello"\n$`).Match(out) {
		t.Fatalf("the site's program printed %q, want its job read back pending", out)
	}
}
