// Command goworker is an xce worker built on client.Runner: it long-polls
// a queue, runs a shell command per job with the payload on its stdin
// (its stdout and stderr are the worker's), acks the job when the
// command exits 0 and hands it back with Retry and the command's last
// stderr line when it does not. Exit status 100 dead-letters the job
// (Fail) instead. SIGINT or SIGTERM stops claiming and lets the running
// commands finish within --drain; the ones still running then are killed
// and their jobs handed back.
//
//	go run ./examples/goworker --peers n0=127.0.0.1:7601,n1=127.0.0.1:7602,n2=127.0.0.1:7603 \
//	  --ca .dev/certs/ca.crt --cert .dev/certs/admin.crt --key .dev/certs/admin.key \
//	  --queue batch --host node001 --command 'sh -c "cat; echo"'
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
)

// failStatus is the command's exit status that dead-letters its job.
const failStatus = 100

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "goworker:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("goworker", flag.ContinueOnError)
	peers := fs.String("peers", "", "the cluster's nodes, name=host:port,... as given to the controllers")
	ca := fs.String("ca", "", "the cluster CA certificate (PEM)")
	cert := fs.String("cert", "", "this worker's certificate (PEM)")
	key := fs.String("key", "", "this worker's key (PEM)")
	queue := fs.String("queue", "", "the queue to work")
	host := fs.String("host", "", "this worker's host name in the cluster config")
	command := fs.String("command", "", "shell command run per job (sh -c), the payload on its stdin")
	concurrency := fs.Int("concurrency", 1, "jobs worked at once")
	wait := fs.Duration("wait", client.DefaultRunnerWait, "long-poll wait of an idle claim (at most 20s)")
	drain := fs.Duration("drain", client.DefaultDrainTimeout, "how long a shutdown lets running commands finish")
	verbose := fs.Bool("v", false, "log at debug level")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"--peers", *peers}, {"--ca", *ca}, {"--cert", *cert}, {"--key", *key},
		{"--queue", *queue}, {"--host", *host}, {"--command", *command}} {
		if f.v == "" {
			return fmt.Errorf("%s is required", f.name)
		}
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	mat, err := tlsconf.Load(*cert, *key, *ca)
	if err != nil {
		return err
	}
	// The answer timeout covers a claim's durable write; the long poll's
	// wait is added to it by the client.
	cl, err := client.NewFromFlag(*peers, mat, client.Options{})
	if err != nil {
		return err
	}
	defer cl.Close()
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	r, err := client.NewRunner(cl, client.RunnerOptions{Host: *host, Concurrency: *concurrency, Wait: *wait, DrainTimeout: *drain, Logger: log})
	if err != nil {
		return err
	}
	if err := r.Handle(*queue, shell(*command)); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return r.Run(ctx)
}

// shell is a handler running command with the job's payload on its
// stdin; the job's id and attempt are in XCE_JOB_ID and XCE_ATTEMPT.
func shell(command string) client.Handler {
	return func(ctx context.Context, j *client.Job) error {
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		cmd.Stdin = bytes.NewReader(j.Payload)
		cmd.Stdout = os.Stdout
		last := &lastLine{}
		cmd.Stderr = io.MultiWriter(os.Stderr, last)
		cmd.Env = append(os.Environ(), fmt.Sprintf("XCE_JOB_ID=%d", j.ID), fmt.Sprintf("XCE_ATTEMPT=%d", j.Attempt))
		// A killed command's children may hold its pipes: stop waiting
		// for them shortly after the kill.
		cmd.WaitDelay = 2 * time.Second
		err := cmd.Run()
		if err == nil {
			return nil
		}
		why := err.Error()
		if l := last.String(); l != "" {
			why += ": " + l
		}
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == failStatus {
			return client.FailJob(errors.New(why))
		}
		return errors.New(why)
	}
}

// lastLine keeps the last non-empty line written to it (at most
// client.MaxRetryText bytes of it).
type lastLine struct {
	mu   sync.Mutex
	cur  []byte // the line being written
	last string
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range p {
		if b == '\n' {
			if s := strings.TrimSpace(string(l.cur)); s != "" {
				l.last = s
			}
			l.cur = l.cur[:0]
			continue
		}
		if len(l.cur) < client.MaxRetryText {
			l.cur = append(l.cur, b)
		}
	}
	return len(p), nil
}

func (l *lastLine) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := strings.TrimSpace(string(l.cur)); s != "" {
		return s
	}
	return l.last
}
