package integration

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// distVersion is the VERSION the test gives `make dist`, to find it again
// in the archive names and in --version.
const distVersion = "v0.0.0-disttest"

// TestMakeDist runs `make dist` into a temp directory and checks what an
// operator downloads: SHA256SUMS names exactly the two archives and their
// digests match; each archive holds the four binaries, LICENSE, README.md
// and the examples under one top directory; the binaries are static ELF
// files for their architecture (amd64: x86-64, arm64: AArch64) without
// the build machine's paths; the host's xcecontroller runs and names the
// version.
func TestMakeDist(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dist := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "dist", "DIST="+dist, "VERSION="+distVersion)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}

	arches := []string{"amd64", "arm64"}
	sums := readSums(t, filepath.Join(dist, "SHA256SUMS"))
	var want []string
	for _, a := range arches {
		want = append(want, "xce-"+distVersion+"-linux-"+a+".tar.gz")
	}
	var got []string
	for name := range sums {
		got = append(got, name)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("SHA256SUMS names %q, want %q", got, want)
	}
	ents, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(want)+1 {
		t.Errorf("%s holds %d files, want the %d archives and SHA256SUMS", dist, len(ents), len(want))
	}
	for name, sum := range sums {
		b, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if d := sha256.Sum256(b); hex.EncodeToString(d[:]) != sum {
			t.Errorf("%s: sha256 %x, SHA256SUMS says %s", name, d, sum)
		}
	}

	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	binaries := []string{"xce-config", "xcecli", "xcecontroller", "xcesim"}
	for _, arch := range arches {
		top := "xce-" + distVersion + "-linux-" + arch
		dir := t.TempDir()
		files := untar(t, filepath.Join(dist, top+".tar.gz"), dir)
		wantFiles := []string{top + "/LICENSE", top + "/README.md",
			top + "/examples/Containerfile", top + "/examples/cluster.yaml", top + "/examples/worker.py", top + "/examples/xcecontroller.service"}
		for _, b := range binaries {
			wantFiles = append(wantFiles, top+"/"+b)
		}
		slices.Sort(wantFiles)
		if !slices.Equal(files, wantFiles) {
			t.Errorf("%s holds\n%q\nwant\n%q", top, files, wantFiles)
		}
		for _, b := range binaries {
			path := filepath.Join(dir, top, b)
			checkStaticELF(t, path, machine[arch], root)
		}
		if arch != runtime.GOARCH || runtime.GOOS != "linux" {
			continue
		}
		out, err := exec.Command(filepath.Join(dir, top, "xcecontroller"), "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "xcecontroller "+distVersion+" ") {
			t.Errorf("the archive's xcecontroller --version: %v: %q, want it to name %s", err, out, distVersion)
		}
	}
}

// readSums parses a sha256sum file ("<64 hex>  <name>" per line) into
// name -> digest; a malformed line fails the test.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("%s: line %q is not sha256sum's \"<digest>  <name>\"", path, sc.Text())
		}
		sums[m[2]] = m[1]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sums
}

// untar extracts a .tar.gz into dir and returns its regular files' names,
// sorted; every entry must be owned by root and sit below one directory.
func untar(t *testing.T, archive, dir string) []string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", archive, err)
	}
	tr := tar.NewReader(zr)
	var files []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		if h.Uid != 0 || h.Gid != 0 || !filepath.IsLocal(h.Name) {
			t.Fatalf("%s: entry %q owned by %d:%d (want 0:0, a path inside the archive)", archive, h.Name, h.Uid, h.Gid)
		}
		path := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			files = append(files, h.Name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: entry %q of type %c, want files and directories only", archive, h.Name, h.Typeflag)
		}
	}
	slices.Sort(files)
	return files
}

// checkStaticELF: path is an executable ELF for machine, with no
// interpreter (statically linked: CGO_ENABLED=0) and without the build
// checkout's path in it (-trimpath).
func checkStaticELF(t *testing.T, path string, machine elf.Machine, root string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&0o111 == 0 {
		t.Errorf("%s: mode %v, not executable", path, st.Mode())
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	if f.Machine != machine || f.Type != elf.ET_EXEC {
		t.Errorf("%s: ELF %v %v, want %v ET_EXEC", path, f.Machine, f.Type, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: dynamically linked (%v), want a static binary", path, p.Type)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(root+"/")) {
		t.Errorf("%s holds the build checkout's path %s: built without -trimpath", path, root)
	}
}

// The systemd unit of docs/operations.md is examples/xcecontroller.service
// byte for byte, a Type=notify unit whose ExecStart runs xcecontroller
// with flags the daemon has.
func TestSystemdUnitMatchesDocs(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(filepath.Join(root, "examples", "xcecontroller.service"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "\n## The systemd unit\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "## The systemd unit" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	_, block, ok := strings.Cut(sec, "```ini\n")
	if !ok {
		t.Fatal("the systemd unit section has no ```ini block")
	}
	block, _, ok = strings.Cut(block, "```\n")
	if !ok {
		t.Fatal("the ```ini block of the systemd unit section does not end")
	}
	if block != string(unit) {
		t.Fatalf("docs/operations.md's unit and examples/xcecontroller.service differ:\n--- docs\n%s\n--- file\n%s", block, unit)
	}
	// The [Service] keys, continuation lines joined.
	keys := map[string]string{}
	text := strings.ReplaceAll(string(unit), "\\\n", " ")
	for _, l := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			keys[k] = v
		}
	}
	if keys["Type"] != "notify" || keys["NotifyAccess"] != "main" || !strings.Contains(keys["RestrictAddressFamilies"], "AF_UNIX") {
		t.Errorf("Type=%q NotifyAccess=%q RestrictAddressFamilies=%q: want notify, main and AF_UNIX (the READY=1 socket)",
			keys["Type"], keys["NotifyAccess"], keys["RestrictAddressFamilies"])
	}
	exec := strings.Fields(keys["ExecStart"])
	if len(exec) == 0 || exec[0] != "/usr/local/bin/xcecontroller" {
		t.Fatalf("ExecStart=%q does not run /usr/local/bin/xcecontroller", keys["ExecStart"])
	}
	flags := daemonFlags(t)
	for _, a := range exec[1:] {
		if name, ok := strings.CutPrefix(a, "--"); ok && !flags[name] {
			t.Errorf("ExecStart passes --%s, which xcecontroller does not have", name)
		}
	}
}

// daemonFlags are xcecontroller's flag names, as its --help lists them.
func daemonFlags(t *testing.T) map[string]bool {
	t.Helper()
	out := daemonHelp(t)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(out, -1) {
		flags[m[1]] = true
	}
	if !flags["peers"] || !flags["workdir"] {
		t.Fatalf("no --peers or --workdir found in xcecontroller --help:\n%s", out)
	}
	return flags
}

// instruction is one line of a Containerfile: its keyword, upper case, and
// its arguments, continuation lines joined.
type instruction struct {
	cmd  string
	args []string
	line int
}

// parseContainerfile reads the instructions of a Containerfile: comments
// and blank lines skipped, backslash continuations joined, an exec-form
// (JSON array) argument split into its strings.
func parseContainerfile(t *testing.T, path string) []instruction {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur string
	start := 0
	for i, l := range strings.Split(string(b), "\n") {
		if cur == "" && (strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#")) {
			continue
		}
		if cur == "" {
			start = i + 1
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur += s + " "
			continue
		}
		cur += l
		cmd, rest, _ := strings.Cut(strings.TrimSpace(cur), " ")
		rest = strings.TrimSpace(rest)
		var args []string
		if strings.HasPrefix(rest, "[") {
			for _, m := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(rest, -1) {
				args = append(args, m[1])
			}
		} else {
			args = strings.Fields(rest)
		}
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: args, line: start})
		cur = ""
	}
	if cur != "" {
		t.Fatalf("%s ends inside a continued line", path)
	}
	return out
}

// examples/Containerfile (not built here: no container runtime) is a
// two-stage build whose pieces fit the repository: the builder is the
// go.mod's Go release, its go build targets are main packages of this
// module, what the runtime stage copies from the builder is what that go
// build writes, its other COPY sources exist, and the image runs
// xcecontroller as a non-root user with the default --workdir as a volume
// and the examples' ports exposed.
func TestContainerfileFitsTheBuild(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ins := parseContainerfile(t, filepath.Join(root, "examples", "Containerfile"))
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}

	var froms []instruction
	stage := 0 // instructions before the first FROM are refused
	built := map[string]bool{}
	var installed []string
	last := map[string]instruction{}
	for _, in := range ins {
		switch in.cmd {
		case "FROM":
			froms = append(froms, in)
			stage = len(froms)
		case "ARG":
			if stage == 0 {
				continue // a global build argument
			}
		}
		if stage == 0 {
			t.Fatalf("line %d: %s before the first FROM", in.line, in.cmd)
		}
		last[in.cmd] = in
		switch {
		case in.cmd == "RUN" && stage == 1 && slices.Contains(in.args, "build"):
			// CGO_ENABLED=0 go build ...: the environment may come first
			i := slices.Index(in.args, "build")
			if i == 0 || in.args[i-1] != "go" {
				continue
			}
			outDir := ""
			for k := i + 1; k < len(in.args); k++ {
				a := in.args[k]
				switch {
				case a == "-o" && k+1 < len(in.args):
					outDir = in.args[k+1]
					k++
				case a == "-ldflags" && k+1 < len(in.args):
					// a quoted value of several words: skip to its closing quote
					for k++; k < len(in.args) && !strings.HasSuffix(in.args[k], `"`); k++ {
					}
				case strings.HasPrefix(a, "./"):
					name := checkMainPackage(t, root, a)
					if !strings.HasSuffix(outDir, "/") {
						t.Fatalf("line %d: go build -o %q: want a directory (ending in /) for several packages", in.line, outDir)
					}
					built[outDir+name] = true
				}
			}
		case in.cmd == "COPY":
			from := ""
			args := in.args
			for len(args) > 0 && strings.HasPrefix(args[0], "--") {
				if v, ok := strings.CutPrefix(args[0], "--from="); ok {
					from = v
				}
				args = args[1:]
			}
			if len(args) < 2 {
				t.Fatalf("line %d: COPY %q: want sources and a destination", in.line, in.args)
			}
			srcs, dst := args[:len(args)-1], args[len(args)-1]
			for _, s := range srcs {
				switch {
				case from != "" && !built[s]:
					t.Errorf("line %d: COPY --from=%s %s: the builder's go build does not write it (it writes %v)", in.line, from, s, built)
				case from == "":
					if _, err := os.Stat(filepath.Join(root, s)); err != nil {
						t.Errorf("line %d: COPY %s: not in the repository (%v)", in.line, s, err)
					}
				}
				if from != "" && stage == len(froms) {
					installed = append(installed, filepath.Join(dst, filepath.Base(s)))
				}
			}
		}
	}

	if len(froms) != 2 {
		t.Fatalf("%d stages, want 2 (a builder and the runtime image)", len(froms))
	}
	b := froms[0].args
	if len(b) != 3 || b[0] != "golang:"+string(goLine[1]) || !strings.EqualFold(b[1], "AS") {
		t.Errorf("builder FROM %q: want golang:%s AS <name> (go.mod's Go release)", b, goLine[1])
	} else {
		for _, in := range ins {
			if in.cmd == "COPY" && strings.HasPrefix(in.args[0], "--from=") && in.args[0] != "--from="+b[2] {
				t.Errorf("line %d: COPY %s, but the builder stage is named %s", in.line, in.args[0], b[2])
			}
		}
	}
	if strings.HasPrefix(froms[1].args[0], "golang") {
		t.Errorf("the runtime image is %s, a Go toolchain image", froms[1].args[0])
	}
	if len(built) < 3 {
		t.Errorf("the builder builds %v, want xcecontroller, xcecli and xce-config", built)
	}
	u, ok := last["USER"]
	if !ok || len(u.args) != 1 || u.args[0] == "root" || u.args[0] == "0" || strings.HasPrefix(u.args[0], "0:") || strings.HasPrefix(u.args[0], "root:") {
		t.Errorf("USER %v: want a non-root user", u.args)
	}
	workdir := regexp.MustCompile(`--workdir string\s+work directory.*\(default "([^"]+)"\)`).FindStringSubmatch(daemonHelp(t))
	if workdir == nil {
		t.Fatal("no --workdir default in xcecontroller --help")
	}
	if v := last["VOLUME"]; !slices.Contains(v.args, workdir[1]) {
		t.Errorf("VOLUME %v: want the daemon's default --workdir %s", v.args, workdir[1])
	}
	if e := last["EXPOSE"]; !slices.Contains(e.args, "9990") || !slices.Contains(e.args, "9601") {
		t.Errorf("EXPOSE %v: want 9990 (the examples' peer port) and 9601 (their metrics port)", e.args)
	}
	ep := last["ENTRYPOINT"]
	if len(ep.args) != 1 || filepath.Base(ep.args[0]) != "xcecontroller" || !slices.Contains(installed, ep.args[0]) {
		t.Errorf("ENTRYPOINT %q: want the xcecontroller the runtime stage copies in (%v)", ep.args, installed)
	}
}

// checkMainPackage: pkg (./cmd/x) is a main package of the module; its
// binary's name is returned.
func checkMainPackage(t *testing.T, root, pkg string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.Name}} {{.ImportPath}}", pkg)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build target %s: %v\n%s", pkg, err, out)
	}
	name, path, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if name != "main" || !strings.HasPrefix(path, "github.com/xce-hpc/xce/") {
		t.Fatalf("go build target %s is package %s (%s), want a main package of the module", pkg, name, path)
	}
	return filepath.Base(path)
}

func daemonHelp(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "xcecontroller"), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("xcecontroller --help: %v\n%s", err, out)
	}
	return string(out)
}
