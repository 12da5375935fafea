// Package buildinfo names the build a binary came from: the module
// version and the VCS revision the Go toolchain stamps into every binary
// built from a checkout, so that `--version` and the xce_build_info metric
// say exactly what runs.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Version overrides the module version when set at link time
// (-ldflags "-X github.com/xce-hpc/xce/buildinfo.Version=v1.2.3"): a
// build inside the repository's own module reports "(devel)".
var Version string

// Info is what a binary knows of its build.
type Info struct {
	Version   string // module version, "(devel)" for a local build
	Revision  string // VCS revision, "" when not built from a checkout
	Time      string // the revision's commit time (RFC 3339), "" if unknown
	Modified  bool   // the checkout had uncommitted changes
	GoVersion string
}

// Read returns this binary's build info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: orDevel(Version)}
	}
	return fromBuildInfo(bi, Version)
}

// fromBuildInfo is Read's pure part: the override wins over the module
// version, and the vcs.* settings fill the rest.
func fromBuildInfo(bi *debug.BuildInfo, override string) Info {
	in := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if override != "" {
		in.Version = override
	}
	in.Version = orDevel(in.Version)
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

func orDevel(v string) string {
	if v == "" {
		return "(devel)"
	}
	return v
}

// String is the one line `--version` prints after the binary's name:
// "v1.2.3 (revision 0123abc…, 2026-12-03T10:00:00Z, modified, go1.26.0)".
func (in Info) String() string {
	var parts []string
	if in.Revision != "" {
		parts = append(parts, "revision "+in.Revision)
	}
	if in.Time != "" {
		parts = append(parts, in.Time)
	}
	if in.Modified {
		parts = append(parts, "modified")
	}
	if in.GoVersion != "" {
		parts = append(parts, in.GoVersion)
	}
	if len(parts) == 0 {
		return in.Version
	}
	return in.Version + " (" + strings.Join(parts, ", ") + ")"
}

// Template is the cobra version template every binary uses:
// "NAME VERSION-LINE".
const Template = "{{.Name}} {{.Version}}\n"
