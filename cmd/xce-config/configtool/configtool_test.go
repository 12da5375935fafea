package configtool

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/adapters/authz"
	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/confyaml"
	"github.com/xce-hpc/xce/sm"
)

const sample = "../../../examples/cluster.yaml"

// run executes xce-config with args and returns its stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := NewCommand(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEncodeSample(t *testing.T) {
	blob, err := EncodeFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	c, err := schema.DecodeClusterConfig(blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(c); err != nil {
		t.Fatal(err)
	}
	if c.GetConfigGeneration() != 1 || len(c.GetQueues()) != 2 || c.GetClusterName() != "dev" {
		t.Fatalf("decoded %v", c)
	}
	again, err := EncodeFile(sample)
	if err != nil || !bytes.Equal(blob, again) {
		t.Fatalf("encode is not stable: %v", err)
	}

	// The command: a file with the tag and SHA-256 printed.
	out := filepath.Join(t.TempDir(), "cluster.bin")
	msg, err := run(t, "encode", "--config", sample, "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("written blob differs: %v", err)
	}
	sum := sha256.Sum256(blob)
	if !strings.Contains(msg, sm.TagHex(sm.Tag(sum))) || !strings.Contains(msg, hex.EncodeToString(sum[:])) {
		t.Fatalf("encode output %q lacks tag or sha256", msg)
	}
	// To stdout.
	msg, err = run(t, "encode", "--config", sample)
	if err != nil || msg != string(blob) {
		t.Fatalf("encode to stdout: %v", err)
	}
}

const goodYAML = `cluster_name: c
port: 7600
queues:
  - id: 1
    name: batch
    visibility_timeout_s: 30
    max_attempts: 3
    backoff_base_s: 2
    dead_letter_retention_s: 60
hosts:
  - name: h1
resources:
  - id: 1
    name: gpu
    count: 2
`

func TestEncodeErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := EncodeFile(writeFile(t, dir, "good.yaml", goodYAML)); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	dupQueue := goodYAML[:strings.Index(goodYAML, "hosts:")] + "  - id: 1\n    name: other\n    visibility_timeout_s: 1\n    max_attempts: 1\n    backoff_base_s: 0\n    dead_letter_retention_s: 0\n" + goodYAML[strings.Index(goodYAML, "hosts:"):]
	cases := []struct {
		name, yaml string
		sentinel   error  // nil: only ErrYAML
		want       string // substring of the message (the line, usually)
	}{
		{"no queues", "cluster_name: c\nport: 7600\nqueues: []\n", schema.ErrNoQueues, "line 3:"},
		{"queues missing", "cluster_name: c\nport: 7600\n", schema.ErrNoQueues, ""},
		{"port too low", strings.Replace(goodYAML, "port: 7600", "port: 1023", 1), schema.ErrBadPort, "line 2:"},
		{"port too high", strings.Replace(goodYAML, "port: 7600", "port: 65536", 1), schema.ErrBadPort, "line 2:"},
		{"reserved queue", strings.Replace(goodYAML, "name: batch", "name: lost_and_found", 1), schema.ErrReservedName, "line 5:"},
		{"reserved host", strings.Replace(goodYAML, "name: h1", "name: lost_and_found", 1), schema.ErrReservedName, "line 11:"},
		{"duplicate queue name", strings.Replace(dupQueue, "name: other", "name: batch", 1), schema.ErrDuplicate, "line 11:"},
		{"duplicate queue id", dupQueue, schema.ErrDuplicate, "id 1 already used"},
		{"duplicate host", strings.Replace(goodYAML, "  - name: h1\n", "  - name: h1\n  - name: h1\n", 1), schema.ErrDuplicate, "line 12:"},
		{"duplicate resource id", goodYAML + "  - id: 1\n    name: fpga\n    count: 1\n", schema.ErrDuplicate, "line 16:"},
		// The name rule (issue 20 finding 6), with the entry's line.
		{"slash in a queue name", strings.Replace(goodYAML, "name: batch", "name: a/b", 1), schema.ErrBadName, `line 5: queues[0]: name "a/b": byte 0x2f '/' at offset 1 is not allowed`},
		{"NUL in a host name", strings.Replace(goodYAML, "name: h1", `name: "h\0"`, 1), schema.ErrBadName, `name "h\x00": byte 0x00 at offset 1`},
		{"escape in a resource name", strings.Replace(goodYAML, "name: gpu", `name: "\e[2Jgpu"`, 1), schema.ErrBadName, `resources[0]: name "\x1b[2Jgpu": byte 0x1b at offset 0`},
		{"unknown key", goodYAML + "colour: blue\n", nil, "colour"},
		{"wrong type", strings.Replace(goodYAML, "max_attempts: 3", "max_attempts: three", 1), nil, "line 7"},
		{"empty document", "", nil, "empty document"},
		{"two documents", goodYAML + "---\n" + goodYAML, nil, "more than one YAML document"},
		{"not YAML", "queues: [\n", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, dir, strings.ReplaceAll(c.name, " ", "_")+".yaml", c.yaml)
			blob, err := EncodeFile(path)
			if err == nil {
				t.Fatalf("accepted, blob of %d bytes", len(blob))
			}
			if !errors.Is(err, confyaml.ErrYAML) {
				t.Fatalf("not an ErrYAML: %v", err)
			}
			if c.sentinel != nil && !errors.Is(err, c.sentinel) {
				t.Fatalf("want %v, got %v", c.sentinel, err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("message %q lacks %q or the file name", err, c.want)
			}
			// The command fails the same way and writes nothing.
			out := filepath.Join(dir, "out.bin")
			if _, err := run(t, "encode", "--config", path, "--out", out); err == nil {
				t.Fatal("command accepted")
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("blob written for a bad config: %v", err)
			}
		})
	}
	if _, err := EncodeFile(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("missing file accepted")
	}
}

// installed installs the sample config for node n0 under a temp work dir
// and returns the node dir and the blob.
func installed(t *testing.T) (string, []byte) {
	t.Helper()
	blob, err := EncodeFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if _, err := run(t, "install", "--workdir", work, "--name", "n0", "--config", sample); err != nil {
		t.Fatalf("install: %v", err)
	}
	return filepath.Join(work, "n0"), blob
}

func TestInstallThenVerify(t *testing.T) {
	base, blob := installed(t)
	sum := sha256.Sum256(blob)
	name := sm.VersionName(sum)
	ptr, err := os.ReadFile(filepath.Join(base, "conf", "current"))
	if err != nil {
		t.Fatal(err)
	}
	if string(ptr) != name+"\n" {
		t.Fatalf("conf/current holds %q, want %q", ptr, name+"\n")
	}
	saved, err := os.ReadFile(filepath.Join(base, "conf", name))
	if err != nil || !bytes.Equal(saved, blob) {
		t.Fatalf("versioned file: %v", err)
	}
	for _, p := range []string{base, filepath.Join(base, "conf")} {
		info, err := Inspect(p, time.Hour, time.Now())
		if err != nil {
			t.Fatalf("Inspect(%s): %v", p, err)
		}
		if info.Pointer != name || info.SHA256 != hex.EncodeToString(sum[:]) || info.Tag != sm.Tag(sum) ||
			info.Generation != 1 || info.Size != len(blob) || info.Stale {
			t.Fatalf("Inspect(%s) = %+v", p, info)
		}
		out, err := run(t, "verify", p)
		if err != nil {
			t.Fatalf("verify %s: %v", p, err)
		}
		if !strings.HasPrefix(out, "ok: conf/current -> "+name) || !strings.Contains(out, hex.EncodeToString(sum[:])) {
			t.Fatalf("verify output %q", out)
		}
	}
	// Staleness is judged against the file's mtime.
	if info, err := Inspect(base, time.Minute, time.Now().Add(time.Hour)); err != nil || !info.Stale {
		t.Fatalf("an hour later with a one-minute timeout: %+v %v", info, err)
	}
	// Installing the same config again is harmless and keeps the pointer.
	if err := Install(base, "n0", 2, blob); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "verify", base); err != nil {
		t.Fatalf("verify after reinstall: %v", err)
	}
	// A blob file is not a conf/ directory: verify says so.
	bin := filepath.Join(t.TempDir(), "cluster.bin")
	if err := os.WriteFile(bin, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "verify", bin); !errors.Is(err, ErrVerify) {
		t.Fatalf("verify of a blob file: %v", err)
	}
}

func TestVerifyFailures(t *testing.T) {
	cases := []struct {
		name    string
		breakIt func(t *testing.T, conf, name string)
		want    string
	}{
		{"corrupt pointer", func(t *testing.T, conf, _ string) {
			writeFile(t, conf, "current", "garbage\n")
		}, "does not start with 'cluster.bin.'"},
		{"bad hex suffix", func(t *testing.T, conf, _ string) {
			writeFile(t, conf, "current", "cluster.bin.XYZ\n")
		}, "not 12 hex chars"},
		{"path separator", func(t *testing.T, conf, name string) {
			writeFile(t, conf, "current", "../conf/"+name+"\n")
		}, "path separator"},
		{"empty pointer", func(t *testing.T, conf, _ string) {
			writeFile(t, conf, "current", "")
		}, "empty"},
		{"missing pointer", func(t *testing.T, conf, _ string) {
			if err := os.Remove(filepath.Join(conf, "current")); err != nil {
				t.Fatal(err)
			}
		}, "conf/current does not exist"},
		{"pointer to a missing file", func(t *testing.T, conf, _ string) {
			writeFile(t, conf, "current", "cluster.bin.0123456789ab\n")
		}, "no such file"},
		{"flipped byte", func(t *testing.T, conf, name string) {
			p := filepath.Join(conf, name)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x01
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "does not match its SHA-256"},
		{"truncated file", func(t *testing.T, conf, name string) {
			if err := os.Truncate(filepath.Join(conf, name), 0); err != nil {
				t.Fatal(err)
			}
		}, "is empty"}, // the daemon's words (§10.6), not a hash mismatch
		// Where verify used to say "ok" and the daemon FATALs (issue 8
		// defect 5): it now runs the daemon's own load checks.
		{"pointer with bytes after its line", func(t *testing.T, conf, name string) {
			if err := os.WriteFile(filepath.Join(conf, "current"), append(sm.PointerContents(name), make([]byte, 1000)...), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "longer than"},
		{"reserved queue name", func(t *testing.T, conf, _ string) {
			c := &schema.ClusterConfig{ConfigGeneration: 1, Port: 7000, Queues: []*schema.Queue{{Id: 1, Name: schema.ReservedName, VisibilityTimeoutS: 30, MaxAttempts: 3}}}
			pointAt(t, conf, c)
		}, "Reserved name"},
		{"a queue name with a NUL", func(t *testing.T, conf, _ string) {
			c := &schema.ClusterConfig{ConfigGeneration: 1, Port: 7000, Queues: []*schema.Queue{{Id: 1, Name: "a\x00b", VisibilityTimeoutS: 30, MaxAttempts: 3}}}
			pointAt(t, conf, c)
		}, `queues[0]: name "a\x00b": byte 0x00 at offset 1 is not allowed`},
		// A symlinked pointer (issue 20 finding 9): the pointer is this
		// program's own file, written by rename; a link there was made by
		// hand and is refused, as the daemon refuses it.
		{"pointer is a symlink", func(t *testing.T, conf, name string) {
			p := filepath.Join(conf, "current")
			writeFile(t, conf, "current.real", string(sm.PointerContents(name)))
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("current.real", p); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"pointer is a FIFO", func(t *testing.T, conf, _ string) {
			p := filepath.Join(conf, "current")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base, blob := installed(t)
			name := sm.VersionName(sha256.Sum256(blob))
			c.breakIt(t, filepath.Join(base, "conf"), name)
			out, err := run(t, "verify", base)
			if !errors.Is(err, ErrVerify) {
				t.Fatalf("verify: err %v, output %q", err, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("verify error %q lacks %q", err, c.want)
			}
			if strings.Contains(out, "ok:") {
				t.Fatalf("verify printed ok: %q", out)
			}
			if _, err := run(t, "show", base); err == nil {
				t.Fatal("show accepted a broken conf/")
			}
		})
	}
}

// pointAt writes c as a versioned file in conf and points conf/current
// at it, as a node's save would, but with no check of c.
func pointAt(t *testing.T, conf string, c *schema.ClusterConfig) {
	t.Helper()
	blob, err := schema.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	name := sm.VersionName(sha256.Sum256(blob))
	if err := os.WriteFile(filepath.Join(conf, name), blob, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "current"), sm.PointerContents(name), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestShow(t *testing.T) {
	base, blob := installed(t)
	sum := sha256.Sum256(blob)
	out, err := run(t, "show", base)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# conf/current -> " + sm.VersionName(sum),
		"# sha256: " + hex.EncodeToString(sum[:]),
		"# tag: " + sm.TagHex(sm.Tag(sum)),
		"# generation: 1",
		"# stale: false",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("show output lacks %q:\n%s", want, out)
		}
	}
	// The YAML part parses back to the same config.
	c, err := confyaml.Parse("show", []byte(out))
	if err != nil {
		t.Fatalf("show's YAML does not parse: %v\n%s", err, out)
	}
	want, err := schema.DecodeClusterConfig(blob)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(c, want) {
		t.Fatalf("show's YAML is another config:\n%v\n%v", c, want)
	}

	// A blob file: no pointer line, the same hash.
	bin := filepath.Join(t.TempDir(), "cluster.bin")
	if err := os.WriteFile(bin, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "show", bin)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "conf/current") || !strings.Contains(out, "# sha256: "+hex.EncodeToString(sum[:])) {
		t.Fatalf("show of a blob file:\n%s", out)
	}
	// A garbage blob file is an error.
	if err := os.WriteFile(bin, []byte{0xff, 0xff, 0xff}, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "show", bin); err == nil || !strings.Contains(err.Error(), "not a valid ClusterConfig") {
		t.Fatalf("show of garbage: %v", err)
	}
}

func TestInstallRefusesGarbage(t *testing.T) {
	base, blob := installed(t)
	conf := filepath.Join(base, "conf")
	before, err := os.ReadFile(filepath.Join(conf, "current"))
	if err != nil {
		t.Fatal(err)
	}
	listing := func() []string {
		es, err := os.ReadDir(conf)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}
	files := listing()

	reserved, err := schema.Encode(&schema.ClusterConfig{Port: 7600, Queues: []*schema.Queue{{Id: 1, Name: schema.ReservedName, MaxAttempts: 1, VisibilityTimeoutS: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	badName, err := schema.Encode(&schema.ClusterConfig{Port: 7600, Queues: []*schema.Queue{{Id: 1, Name: "batch\x00", MaxAttempts: 1, VisibilityTimeoutS: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"garbage":  {0xff, 0xff, 0xff, 0xff},
		"empty":    {},
		"oversize": bytes.Repeat([]byte{0}, schema.MaxBlobSize+1),
		"reserved": reserved,
		"bad name": badName,
	} {
		t.Run(name, func(t *testing.T) {
			err := Install(base, "n0", 2, bad)
			if !errors.Is(err, ErrInstall) {
				t.Fatalf("Install: %v", err)
			}
			// Through the command, from a --blob file.
			p := filepath.Join(t.TempDir(), "bad.bin")
			if err := os.WriteFile(p, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			// The error names the file given (issue 20 finding 10: it said
			// "Config file ''").
			if _, err := run(t, "install", "--workdir", filepath.Dir(base), "--name", "n0", "--blob", p); !errors.Is(err, ErrInstall) ||
				!strings.Contains(err.Error(), "--blob "+p+": ") || strings.Contains(err.Error(), "''") {
				t.Fatalf("install --blob: %v", err)
			}
			after, err := os.ReadFile(filepath.Join(conf, "current"))
			if err != nil || !bytes.Equal(before, after) {
				t.Fatalf("conf/current changed: %q -> %q (%v)", before, after, err)
			}
			if got := listing(); strings.Join(got, ",") != strings.Join(files, ",") {
				t.Fatalf("conf/ changed: %v -> %v", files, got)
			}
			if _, err := run(t, "verify", base); err != nil {
				t.Fatalf("verify after the refused install: %v", err)
			}
		})
	}
	_ = blob
}

func TestInstallRequiresFlags(t *testing.T) {
	if _, err := run(t, "install", "--name", "n0", "--config", sample); err == nil {
		t.Fatal("install without --workdir accepted")
	}
	if _, err := run(t, "install", "--workdir", t.TempDir(), "--config", sample); err == nil {
		t.Fatal("install without --name accepted")
	}
}

func TestCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	out, err := run(t, "certs", "--dir", dir, "--node", "n0", "--node", "n1", "--days", "10")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "2 node (peer) certificates, admin.crt (admin: start the nodes with --admin-cn admin) and worker.crt (worker)") {
		t.Fatalf("certs output %q", out)
	}
	// One certificate of each role, as the daemon's policy sees them.
	policy, err := authz.NewPolicy([]string{"n0", "n1"}, []string{AdminCN}, nil)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]authz.Role{"n0": authz.RolePeer, "n1": authz.RolePeer, "admin": authz.RoleAdmin, "worker": authz.RoleWorker}
	ca := filepath.Join(dir, "ca.crt")
	for _, n := range []string{"n0", "n1", "admin", "worker"} {
		m, err := tlsconf.Load(filepath.Join(dir, n+".crt"), filepath.Join(dir, n+".key"), ca)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if m.Name() != n {
			t.Fatalf("%s: certificate CN %q", n, m.Name())
		}
		if r := policy.RoleOf(m.Name()); r != roles[n] {
			t.Fatalf("%s: role %v, want %v", n, r, roles[n])
		}
		if left := time.Until(m.Leaf.NotAfter); left < 9*24*time.Hour || left > 11*24*time.Hour {
			t.Fatalf("%s: expires in %v, want about 10 days", n, left)
		}
		if _, warn := tlsconf.ExpiryWarning(m.Leaf, time.Now(), tlsconf.CertWarnDays); !warn {
			t.Fatalf("%s: a 10-day certificate gives no expiry warning", n)
		}
		server := slices.Contains(m.Leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		if !slices.Contains(m.Leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) || server != (n != "admin" && n != "worker") {
			t.Fatalf("%s: key usages %v", n, m.Leaf.ExtKeyUsage)
		}
		st, err := os.Stat(filepath.Join(dir, n+".key"))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s.key mode: %v %v", n, st.Mode(), err)
		}
	}
	if _, err := tlsconf.Load(filepath.Join(dir, "n0.crt"), filepath.Join(dir, "n1.key"), ca); err == nil {
		t.Fatal("mismatched key accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); err != nil {
		t.Fatalf("ca.key: %v", err)
	}
}
