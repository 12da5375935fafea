package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-03T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, c := range []struct {
		name     string
		main     string
		override string
		settings []debug.BuildSetting
		want     string
	}{
		{"local build in a checkout", "(devel)", "", vcs, "(devel) (revision abc123, 2026-12-03T10:00:00Z, modified, go1.26.0)"},
		{"link-time version wins", "(devel)", "v1.2.3", vcs[:2], "v1.2.3 (revision abc123, 2026-12-03T10:00:00Z, go1.26.0)"},
		{"installed module version", "v0.4.0", "", nil, "v0.4.0 (go1.26.0)"},
		{"no version at all", "", "", nil, "(devel) (go1.26.0)"},
		{"clean checkout", "(devel)", "", []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}, "(devel) (revision abc, go1.26.0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: c.main}, Settings: c.settings}
			if got := fromBuildInfo(bi, c.override).String(); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
	if got := (Info{Version: "v1"}).String(); got != "v1" {
		t.Fatalf("bare version: %q", got)
	}
}
