package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionFlag builds every binary as `make binaries` does and runs
// `--version`: each names itself and, built from a git checkout, the
// checkout's revision (the build info the toolchain stamps).
func TestVersionFlag(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	rev := ""
	if out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		rev = strings.TrimSpace(string(out))
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-buildvcs=auto", "-o", dir+"/", "./cmd/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range []string{"xcecontroller", "xcecli", "xce-config", "xcesim"} {
		out, err := exec.Command(filepath.Join(dir, name), "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", name, err, out)
		}
		line := strings.TrimSpace(string(out))
		if !strings.HasPrefix(line, name+" ") || strings.Contains(line, "\n") {
			t.Errorf("%s --version printed %q, want one line starting with its name", name, line)
		}
		if rev != "" && !strings.Contains(line, "revision "+rev) {
			t.Errorf("%s --version printed %q, want the checkout's revision %s", name, line, rev)
		}
		if rev == "" && !strings.Contains(line, "(devel)") {
			t.Errorf("%s --version printed %q outside a checkout, want (devel)", name, line)
		}
	}
}
