package integration

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The exit codes of the real xcecli and xce-config processes
// (docs/operations.md, "Exit codes"): 2 for each kind of usage error,
// with the command's --help named on stderr; 1 for a failure at run time;
// 0 for help and a group given alone.
func TestCLIExitCodes(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	for _, c := range []struct {
		bin  string
		args []string
		code int
		text string // on stderr (code 0: on stdout)
	}{
		{"xcecli", []string{"--help"}, 0, "Available Commands"},
		{"xcecli", []string{"job"}, 0, "Available Commands"},
		{"xcecli", []string{"statsu"}, 2, `unknown command "statsu" for "xcecli" (did you mean status?)`},
		{"xcecli", []string{"job", "clam"}, 2, `unknown command "clam" for "xcecli job"`},
		{"xcecli", []string{"status", "--bogus"}, 2, "unknown flag: --bogus"},
		{"xcecli", []string{"status", "--timeout", "soon"}, 2, `invalid argument "soon" for "--timeout"`},
		{"xcecli", []string{"status", "-o", "yaml"}, 2, `--output "yaml": want table or json`},
		{"xcecli", []string{"status", "--watch", "0s"}, 2, "--watch 0s: the interval must be positive"},
		{"xcecli", []string{"job", "get"}, 2, "accepts 1 arg(s), received 0"},
		{"xcecli", []string{"job", "get", "seven"}, 2, `job id "seven": want a positive integer`},
		{"xcecli", []string{"job", "claim", "--queue", "batch"}, 2, `required flag(s) "host" not set`},
		{"xcecli", []string{"job", "claim", "--queue", "batch", "--host", "h", "--max", "0"}, 2, "--max 0: must be at least 1"},
		{"xcecli", []string{"job", "ack", "1:2"}, 2, "want ID:ATTEMPT:TERM.LSN"},
		{"xcecli", []string{"top", "--interval", "0s"}, 2, "the interval must be positive"},
		{"xcecli", []string{"status", "--peers", "n0=127.0.0.1:1", "--cert", missing, "--key", missing, "--ca", missing}, 1, missing},
		{"xcecli", []string{"status", "--peers", "n0=127.0.0.1:1", "--key", missing, "--ca", missing}, 2, "--cert is required (or set $XCE_CERT)"},
		{"xce-config", []string{"--help"}, 0, "Available Commands"},
		{"xce-config", []string{"instal"}, 2, `unknown command "instal" for "xce-config" (did you mean install?)`},
		{"xce-config", []string{"install", "--name", "n0"}, 2, `required flag(s) "workdir" not set`},
		{"xce-config", []string{"encode", "--bogus"}, 2, "unknown flag: --bogus"},
		{"xce-config", []string{"encode", "extra"}, 2, `unknown command "extra" for "xce-config encode"`},
		{"xce-config", []string{"certs", "--days", "many"}, 2, `invalid argument "many" for "--days"`},
		{"xce-config", []string{"show"}, 2, "accepts 1 arg(s), received 0"},
		{"xce-config", []string{"encode", "--config", missing}, 1, missing},
		{"xce-config", []string{"verify", missing}, 1, missing},
	} {
		cmd := exec.Command(filepath.Join(binDir, c.bin), c.args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s %q: %v", c.bin, c.args, err)
		}
		where := stderr.String()
		if c.code == 0 {
			where = stdout.String()
		}
		if code != c.code || !strings.Contains(where, c.text) {
			t.Errorf("%s %q: exit %d, want %d with %q\nstdout: %s\nstderr: %s", c.bin, c.args, code, c.code, c.text, stdout.String(), stderr.String())
			continue
		}
		if hint := "Run '" + c.bin; (c.code == 2) != strings.Contains(stderr.String(), hint) {
			t.Errorf("%s %q: exit %d, stderr %q: a usage error, and only one, names the command's --help", c.bin, c.args, code, stderr.String())
		}
	}
}
