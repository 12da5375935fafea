package daemon

import (
	"context"
	"strings"
	"testing"
)

// An out-of-range --background-nice is a startup error naming the flag.
func TestRunRefusesBadBackgroundNice(t *testing.T) {
	for _, nice := range []int{-1, 20} {
		cfg := DefaultConfig()
		cfg.BackgroundNice = nice
		var out strings.Builder
		if code := Run(context.Background(), cfg, &out); code != 1 || !strings.Contains(out.String(), "--background-nice") {
			t.Errorf("--background-nice %d: exit %d, log %q", nice, code, out.String())
		}
	}
}
