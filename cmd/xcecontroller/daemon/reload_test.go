package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/transport"
)

// reloadFixture: a transport for n0 whose files are in dir, and the
// reloader of those files with an observed logger.
type reloadFixture struct {
	dir           string
	caCert, caKey []byte
	tr            *transport.Transport
	rl            *reloader
	logs          *observer.ObservedLogs
}

func newReloadFixture(t *testing.T) *reloadFixture {
	t.Helper()
	f := &reloadFixture{dir: t.TempDir()}
	var err error
	if f.caCert, f.caKey, err = tlsconf.GenerateCA("test CA", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "ca.crt"), f.caCert, 0o600); err != nil {
		t.Fatal(err)
	}
	f.writeCert(t, "n0", time.Hour)
	cfg := Config{Cert: filepath.Join(f.dir, "n0.crt"), Key: filepath.Join(f.dir, "n0.key"), CA: filepath.Join(f.dir, "ca.crt"),
		LogLevelFile: filepath.Join(f.dir, "level")}
	mat, err := tlsconf.Load(cfg.Cert, cfg.Key, cfg.CA)
	if err != nil {
		t.Fatal(err)
	}
	f.tr, err = transport.New(transport.Config{Self: 0, Peers: []transport.Peer{{Name: "n0", Addr: "127.0.0.1:1"}}, TLS: mat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.tr.Close() })
	core, logs := observer.New(zapcore.DebugLevel)
	f.logs = logs
	f.rl = &reloader{cfg: cfg, tr: f.tr, level: zap.NewAtomicLevelAt(zapcore.InfoLevel), log: zap.New(core), now: time.Now}
	return f
}

// writeCert replaces n0.crt and n0.key with a certificate for cn.
func (f *reloadFixture) writeCert(t *testing.T, cn string, validFor time.Duration) {
	t.Helper()
	f.writeCertEKU(t, cn, validFor, true)
}

// writeCertEKU is writeCert with serverAuth only if server (clientAuth
// always).
func (f *reloadFixture) writeCertEKU(t *testing.T, cn string, validFor time.Duration, server bool) {
	t.Helper()
	c, k, err := tlsconf.GenerateCert(f.caCert, f.caKey, cn, []string{"127.0.0.1"}, validFor, true, server)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlsconf.WriteFiles(f.dir, "n0", c, k); err != nil {
		t.Fatal(err)
	}
}

func (f *reloadFixture) lastLog(t *testing.T, key string) observer.LoggedEntry {
	t.Helper()
	es := f.logs.FilterField(zap.String("key", key)).All()
	if len(es) == 0 {
		t.Fatalf("no %s log; logs %v", key, f.logs.All())
	}
	return es[len(es)-1]
}

// SIGHUP's certificate reload: a good new certificate is used; an
// unreadable, mismatched, foreign-named or expired one is an ERROR and
// the old one stays.
func TestReloadTLS(t *testing.T) {
	f := newReloadFixture(t)
	first := f.tr.TLS()
	f.writeCert(t, "n0", 2*time.Hour)
	if err := f.rl.reloadTLS(); err != nil {
		t.Fatal(err)
	}
	got := f.tr.TLS()
	if got == first || got.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) == 0 {
		t.Fatal("the new certificate is not in use")
	}
	if e := f.lastLog(t, "tls.reloaded"); e.Level != zapcore.InfoLevel || !strings.Contains(e.Message, "new connections use them") {
		t.Fatalf("reloaded log %+v", e)
	}
	good := got

	for _, c := range []struct {
		name  string
		spoil func()
		want  string
	}{
		{"garbage certificate", func() {
			if err := os.WriteFile(filepath.Join(f.dir, "n0.crt"), []byte("not PEM"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "certificate and key"},
		{"key of another certificate", func() {
			c, _, err := tlsconf.GenerateCert(f.caCert, f.caKey, "n0", nil, time.Hour, true, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(f.dir, "n0.crt"), c, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "private key does not match"},
		{"another node's name", func() { f.writeCert(t, "n9", time.Hour) }, `own certificate is for "n9"`},
		{"no serverAuth", func() { f.writeCertEKU(t, "n0", time.Hour, false) }, `own certificate "n0" has extended key usages [clientAuth]; a node's certificate needs both serverAuth and clientAuth`},
		{"expired", func() { f.writeCert(t, "n0", time.Millisecond); time.Sleep(5 * time.Millisecond) }, "the new certificate expired 0 days ago"},
		{"missing CA", func() {
			f.writeCert(t, "n0", time.Hour)
			if err := os.Remove(filepath.Join(f.dir, "ca.crt")); err != nil {
				t.Fatal(err)
			}
		}, "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.spoil()
			err := f.rl.reloadTLS()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("reload: %v, want %q", err, c.want)
			}
			if f.tr.TLS() != good {
				t.Fatal("a refused reload replaced the certificate")
			}
			if e := f.lastLog(t, "tls.reload-failed"); e.Level != zapcore.ErrorLevel || !strings.Contains(e.Message, "the old one stays in use") {
				t.Fatalf("failure log %+v", e)
			}
		})
	}
}

// SIGHUP's log level: the file's level is applied; an invalid or missing
// file is an ERROR and the level stays.
func TestReloadLevel(t *testing.T) {
	f := newReloadFixture(t)
	path := f.rl.cfg.LogLevelFile
	if err := f.rl.reloadLevel(); err == nil || f.rl.level.Level() != zapcore.InfoLevel {
		t.Fatalf("missing file: %v, level %v", err, f.rl.level.Level())
	}
	for _, c := range []struct {
		content string
		want    zapcore.Level
		err     string
	}{
		{"debug\n", zapcore.DebugLevel, ""},
		{"  warn ", zapcore.WarnLevel, ""},
		{"loud", zapcore.WarnLevel, `unknown log level "loud"`},
		{strings.Repeat("x", 100), zapcore.WarnLevel, "longer than 64 bytes"},
		{"error", zapcore.ErrorLevel, ""},
	} {
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		err := f.rl.reloadLevel()
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) || f.rl.level.Level() != c.want {
			t.Fatalf("%q: %v, level %v; want %v %q", c.content, err, f.rl.level.Level(), c.want, c.err)
		}
	}
	if e := f.lastLog(t, "log.level-failed"); e.Level != zapcore.ErrorLevel {
		t.Fatalf("failure log %+v", e)
	}
	f.rl.cfg.LogLevelFile = ""
	if err := f.rl.reloadLevel(); err != errNoLevelFile || f.rl.level.Level() != zapcore.ErrorLevel {
		t.Fatalf("without the flag: %v", err)
	}
}
