// Package cliexit gives the xce command lines one exit-code rule: 0 when
// the command did what it was asked, 2 for a usage error (an unknown
// command or flag, a missing or extra argument, a flag value that does not
// parse or is out of range), 1 for any other failure. A script can then
// tell "you called me wrong" from "the cluster said no".
package cliexit

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// ErrUsage marks a usage error: errors.Is(err, ErrUsage).
var ErrUsage = errors.New("usage error")

// usageError keeps the original error's text and chain and adds ErrUsage.
type usageError struct{ err error }

func (e usageError) Error() string   { return e.err.Error() }
func (e usageError) Unwrap() []error { return []error{e.err, ErrUsage} }

// Usage marks err as a usage error (nil stays nil).
func Usage(err error) error {
	if err == nil || errors.Is(err, ErrUsage) {
		return err
	}
	return usageError{err}
}

// Code is the exit code of a command's result.
func Code(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	default:
		return 1
	}
}

// Setup makes every usage error cobra itself detects in root's tree a
// usage error: flag parse errors (unknown flag, bad value), argument count
// errors, missing required flags and unknown subcommands. Call it once the
// tree is complete.
//
// A group (a command with subcommands and nothing to run of its own) gets
// a run function: without arguments it prints its help, as cobra does,
// and with one it reports the unknown command, where cobra would print
// the help and exit 0 for any subcommand below the root.
func Setup(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return Usage(err) })
	setup(root)
}

func setup(c *cobra.Command) {
	switch {
	case c.HasSubCommands() && !c.Runnable():
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2 // cobra's own default for its suggestions
		}
		c.Args = cobra.ArbitraryArgs // the unknown command is reported by RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += " (did you mean " + strings.Join(s, " or ") + "?)"
			}
			return Usage(errors.New(msg))
		}
	case c.Args != nil:
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error { return Usage(check(cmd, args)) }
	}
	// cobra checks required flags after PreRunE and returns its error
	// unmarked; checked here first, a missing flag is a usage error.
	pre, preE := c.PreRun, c.PreRunE
	c.PreRun = nil
	c.PreRunE = func(cmd *cobra.Command, args []string) error {
		if err := cmd.ValidateRequiredFlags(); err != nil {
			return Usage(err)
		}
		if err := cmd.ValidateFlagGroups(); err != nil {
			return Usage(err)
		}
		switch {
		case preE != nil:
			return preE(cmd, args)
		case pre != nil:
			pre(cmd, args)
		}
		return nil
	}
	for _, sub := range c.Commands() {
		setup(sub)
	}
}

// Exit prints a failed command's error for the program name and returns
// the exit code: a usage error also points at the command's --help.
func Exit(stderr io.Writer, name string, cmd *cobra.Command, err error) int {
	code := Code(err)
	if err == nil {
		return code
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if code == 2 && cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}
