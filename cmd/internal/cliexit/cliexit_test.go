package cliexit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var errRefused = errors.New("refused by the cluster")

// tree is a small command line shaped like xcecli's: a root, a group with
// leaves that take arguments, flags of every kind and a required one.
func tree(out io.Writer) *cobra.Command {
	root := &cobra.Command{Use: "tool", SilenceUsage: true, SilenceErrors: true}
	root.SetOut(out)
	root.SetErr(out)
	var n int
	var d string
	var fail, failUsage bool
	get := &cobra.Command{Use: "get ID", Args: cobra.ExactArgs(1), RunE: func(*cobra.Command, []string) error {
		switch {
		case fail:
			return fmt.Errorf("get: %w", errRefused)
		case failUsage:
			return Usage(errors.New("--n 0: must be positive"))
		}
		return nil
	}}
	get.Flags().IntVar(&n, "n", 1, "a number")
	get.Flags().BoolVar(&fail, "fail", false, "fail at run time")
	get.Flags().BoolVar(&failUsage, "fail-usage", false, "fail as RunE's own flag check does")
	put := &cobra.Command{Use: "put", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
	put.Flags().StringVar(&d, "dest", "", "where")
	_ = put.MarkFlagRequired("dest")
	pre := 0
	hooked := &cobra.Command{Use: "hooked", PreRun: func(*cobra.Command, []string) { pre++ }, RunE: func(*cobra.Command, []string) error {
		if pre != 1 {
			return fmt.Errorf("PreRun ran %d times", pre)
		}
		return nil
	}}
	group := &cobra.Command{Use: "job"}
	group.AddCommand(get, put, hooked)
	root.AddCommand(group)
	Setup(root)
	return root
}

// Each way to call a command wrong exits 2, a failure at run time 1,
// success and help 0; the error text is cobra's or the command's own.
func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		text string // in the error, or in the output for code 0
	}{
		{[]string{"job", "get", "7"}, 0, ""},
		{[]string{"job", "hooked"}, 0, ""},
		{[]string{"job", "put", "--dest", "x"}, 0, ""},
		{[]string{}, 0, "Available Commands"},
		{[]string{"job"}, 0, "Available Commands"},
		{[]string{"job", "get", "--help"}, 0, "a number"},
		{[]string{"job", "get", "7", "--fail"}, 1, "refused by the cluster"},
		{[]string{"job", "get", "7", "--fail-usage"}, 2, "must be positive"},
		{[]string{"job", "get", "7", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"job", "get"}, 2, "accepts 1 arg(s), received 0"},
		{[]string{"job", "get", "1", "2"}, 2, "accepts 1 arg(s), received 2"},
		{[]string{"job", "get", "7", "--n", "many"}, 2, `invalid argument "many" for "--n"`},
		{[]string{"job", "get", "7", "--n"}, 2, "flag needs an argument"},
		{[]string{"job", "put"}, 2, `required flag(s) "dest" not set`},
		{[]string{"job", "put", "extra", "--dest", "x"}, 2, `unknown command "extra"`},
		{[]string{"jbo"}, 2, `unknown command "jbo" for "tool" (did you mean job?)`},
		{[]string{"job", "gte"}, 2, `unknown command "gte" for "tool job" (did you mean get?)`},
	} {
		var out bytes.Buffer
		root := tree(&out)
		root.SetArgs(c.args)
		_, err := root.ExecuteC()
		if got := Code(err); got != c.code {
			t.Errorf("tool %q: exit %d (%v), want %d", c.args, got, err, c.code)
			continue
		}
		switch {
		case c.code == 0 && !strings.Contains(out.String(), c.text):
			t.Errorf("tool %q: output %q lacks %q", c.args, out.String(), c.text)
		case c.code != 0 && !strings.Contains(err.Error(), c.text):
			t.Errorf("tool %q: error %q lacks %q", c.args, err, c.text)
		}
	}
}

// Usage keeps the error's chain, marks it once and leaves nil alone;
// Exit prints the error and, for a usage error, where help is.
func TestUsageAndExit(t *testing.T) {
	if Usage(nil) != nil || Code(nil) != 0 {
		t.Fatal("nil is not a usage error")
	}
	err := Usage(fmt.Errorf("--ack: %w", errRefused))
	if !errors.Is(err, errRefused) || !errors.Is(err, ErrUsage) || Code(err) != 2 || err.Error() != "--ack: refused by the cluster" {
		t.Fatalf("Usage: %v (is refused %v, is usage %v)", err, errors.Is(err, errRefused), errors.Is(err, ErrUsage))
	}
	if Usage(err) != err {
		t.Fatal("a usage error wrapped twice")
	}
	if Code(fmt.Errorf("wrapped: %w", err)) != 2 || Code(errRefused) != 1 {
		t.Fatal("Code does not follow the chain")
	}
	root := tree(io.Discard)
	root.SetArgs([]string{"job", "get"})
	cmd, err := root.ExecuteC()
	var stderr bytes.Buffer
	if code := Exit(&stderr, "tool", cmd, err); code != 2 || stderr.String() != "tool: accepts 1 arg(s), received 0\nRun 'tool job get --help' for usage.\n" {
		t.Fatalf("Exit: %d %q", code, stderr.String())
	}
	stderr.Reset()
	if code := Exit(&stderr, "tool", cmd, errRefused); code != 1 || stderr.String() != "tool: refused by the cluster\n" {
		t.Fatalf("Exit of a failure: %d %q", code, stderr.String())
	}
	stderr.Reset()
	if code := Exit(&stderr, "tool", cmd, nil); code != 0 || stderr.Len() != 0 {
		t.Fatalf("Exit of success: %d %q", code, stderr.String())
	}
}
