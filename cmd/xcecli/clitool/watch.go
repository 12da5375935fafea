package clitool

import (
	"context"
	"fmt"
	"io"
	"time"

	"golang.org/x/term"
)

// clearScreen moves the cursor home and clears the terminal (ANSI), so a
// refreshing table is redrawn in place.
const clearScreen = "\x1b[H\x1b[2J"

// frameRule begins each refresh when the output is not a terminal (a pipe,
// a file): escape codes there would only garble a log or a grep, so the
// refreshes follow each other, each under this line.
const frameRule = "----\n"

// isTerminal reports whether w is a terminal. A variable, so that a test
// can stand in for one.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// refresh draws frame every interval until ctx ends (the last view stays
// on the screen) or, with count > 0, count frames have been drawn; a
// frame's error ends it. `status --watch` and `top` both refresh so.
func refresh(ctx context.Context, interval time.Duration, count int, frame func(at time.Time) error) error {
	if interval <= 0 || count < 0 {
		return fmt.Errorf("refresh every %v, %d times: the interval must be positive and the count not negative", interval, count)
	}
	for n := 1; ; n++ {
		if err := frame(time.Now()); err != nil {
			return err
		}
		if count > 0 && n >= count {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // interrupted: the view stays on the screen
		case <-time.After(interval):
		}
	}
}

// frameTitle begins one refresh of a table: on a terminal the screen
// cleared, elsewhere frameRule; then the title with the time of the
// refresh.
func frameTitle(w io.Writer, title string, at time.Time) error {
	start := frameRule
	if isTerminal(w) {
		start = clearScreen
	}
	_, err := fmt.Fprintf(w, "%s%s at %s\n", start, title, at.Format(time.RFC3339))
	return err
}
