package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type ca struct{ cert, key []byte }

func newCA(t *testing.T, cn string) ca {
	t.Helper()
	c, k, err := GenerateCA(cn, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca{c, k}
}

// material issues a certificate from c and loads it with trust in trust.
func (c ca) material(t *testing.T, cn string, client, server bool, trust ca) *Material {
	t.Helper()
	certPEM, keyPEM, err := GenerateCert(c.cert, c.key, cn, []string{"127.0.0.1", "localhost"}, time.Hour, client, server)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(c.cert, trust.cert) {
		m, err := FromPEM(certPEM, keyPEM, trust.cert)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// A foreign certificate: FromPEM refuses it, so build by hand.
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(trust.cert)
	m := &Material{Cert: cert, Leaf: cert.Leaf, CAs: pool}
	return m
}

func TestGenerateAndLoad(t *testing.T) {
	root := newCA(t, "xce test CA")
	certPEM, keyPEM, err := GenerateCert(root.cert, root.key, "n0", []string{"10.0.0.1", "n0.example", "::1"}, time.Hour, true, true)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pki")
	if err := WriteFiles(dir, "n0", certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(dir, "ca", root.cert, root.key); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"n0.key": 0o600, "ca.key": 0o600, "n0.crt": 0o644} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", name, fi.Mode().Perm(), want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 4 {
		t.Errorf("dir holds %d entries, want 4 (no temp files left)", len(ents))
	}
	m, err := Load(filepath.Join(dir, "n0.crt"), filepath.Join(dir, "n0.key"), filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "n0" || m.Leaf.Subject.CommonName != "n0" {
		t.Errorf("name %q", m.Name())
	}
	if len(m.Leaf.IPAddresses) != 2 || len(m.Leaf.DNSNames) != 1 || m.Leaf.DNSNames[0] != "n0.example" {
		t.Errorf("SANs: %v %v", m.Leaf.IPAddresses, m.Leaf.DNSNames)
	}
	if got := m.Leaf.PublicKeyAlgorithm; got != x509.ECDSA {
		t.Errorf("key algorithm %v", got)
	}
	if _, err := m.Leaf.Verify(x509.VerifyOptions{Roots: m.CAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("leaf does not verify for both usages: %v", err)
	}

	// Load refuses a certificate from another CA, a wrong key, no CA.
	other := newCA(t, "other CA")
	if err := os.WriteFile(filepath.Join(dir, "other.crt"), other.cert, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(filepath.Join(dir, "n0.crt"), filepath.Join(dir, "n0.key"), filepath.Join(dir, "other.crt")); err == nil || !strings.Contains(err.Error(), "not signed by the cluster CA") {
		t.Errorf("foreign CA: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "n0.crt"), filepath.Join(dir, "ca.key"), filepath.Join(dir, "ca.crt")); err == nil {
		t.Error("mismatched key accepted")
	}
	if _, err := Load(filepath.Join(dir, "n0.crt"), filepath.Join(dir, "n0.key"), filepath.Join(dir, "n0.key")); err == nil {
		t.Error("CA bundle without certificate accepted")
	}
	if _, err := Load(filepath.Join(dir, "missing.crt"), filepath.Join(dir, "n0.key"), filepath.Join(dir, "ca.crt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestGenerateRefuses(t *testing.T) {
	root := newCA(t, "ca")
	leafCert, leafKey, err := GenerateCert(root.cert, root.key, "n0", nil, time.Hour, true, true)
	if err != nil {
		t.Fatal(err)
	}
	other := newCA(t, "other")
	cases := []struct {
		name string
		fn   func() error
	}{
		{"CA empty cn", func() error { _, _, err := GenerateCA("", time.Hour); return err }},
		{"CA zero validity", func() error { _, _, err := GenerateCA("x", 0); return err }},
		{"empty cn", func() error {
			_, _, err := GenerateCert(root.cert, root.key, "", nil, time.Hour, true, true)
			return err
		}},
		{"no usage", func() error {
			_, _, err := GenerateCert(root.cert, root.key, "x", nil, time.Hour, false, false)
			return err
		}},
		{"negative validity", func() error {
			_, _, err := GenerateCert(root.cert, root.key, "x", nil, -time.Hour, true, false)
			return err
		}},
		{"leaf as CA", func() error {
			_, _, err := GenerateCert(leafCert, leafKey, "x", nil, time.Hour, true, false)
			return err
		}},
		{"key of another CA", func() error {
			_, _, err := GenerateCert(root.cert, other.key, "x", nil, time.Hour, true, false)
			return err
		}},
		{"garbage CA", func() error {
			_, _, err := GenerateCert([]byte("nope"), root.key, "x", nil, time.Hour, true, false)
			return err
		}},
		{"write bad name", func() error { return WriteFiles(t.TempDir(), "../x", leafCert, leafKey) }},
	}
	for _, tc := range cases {
		if err := tc.fn(); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	// Validity is cut to the CA's.
	c, _, err := GenerateCert(root.cert, root.key, "long", nil, 1000*24*time.Hour, true, false)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := parseCertPEM(c)
	caCert, _ := parseCertPEM(root.cert)
	if leaf.NotAfter.After(caCert.NotAfter) {
		t.Errorf("leaf outlives its CA: %v > %v", leaf.NotAfter, caCert.NotAfter)
	}
}

// handshake runs a TLS handshake over a loopback pipe and returns each
// side's error, including the first read after the handshake (in TLS 1.3
// the client learns that the server refused its certificate only then).
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		s := tls.Server(c, server)
		if err := s.Handshake(); err != nil {
			done <- err
			return
		}
		_, err = s.Write([]byte("x"))
		done <- err
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
	c := tls.Client(raw, client)
	clientErr = c.Handshake()
	if clientErr == nil {
		_, clientErr = io.ReadFull(c, make([]byte, 1))
	}
	raw.Close()
	return <-done, clientErr
}

func TestMutualTLS(t *testing.T) {
	root := newCA(t, "cluster")
	evil := newCA(t, "evil")
	n0 := root.material(t, "n0", true, true, root)
	n1 := root.material(t, "n1", true, true, root)
	op := root.material(t, "operator", true, false, root)

	t.Run("peers", func(t *testing.T) {
		s, c := handshake(t, n0.ServerConfig(), n1.ClientConfigFor("n0"))
		if s != nil || c != nil {
			t.Fatalf("server %v, client %v", s, c)
		}
	})
	t.Run("PeerCN", func(t *testing.T) {
		var got string
		cfg := n0.ServerConfig()
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { got = PeerCN(cs); return nil }
		if s, c := handshake(t, cfg, n1.ClientConfig()); s != nil || c != nil {
			t.Fatalf("server %v, client %v", s, c)
		}
		if got != "n1" {
			t.Fatalf("PeerCN = %q", got)
		}
		if PeerCN(tls.ConnectionState{}) != "" {
			t.Fatal("PeerCN without certificate")
		}
	})
	t.Run("client-only cert may dial", func(t *testing.T) {
		if s, c := handshake(t, n0.ServerConfig(), op.ClientConfig()); s != nil || c != nil {
			t.Fatalf("server %v, client %v", s, c)
		}
	})
	t.Run("client-only cert cannot serve", func(t *testing.T) {
		if _, c := handshake(t, op.ServerConfig(), n0.ClientConfig()); c == nil {
			t.Fatal("client accepted a server without server-auth usage")
		}
	})
	t.Run("wrong server name", func(t *testing.T) {
		_, c := handshake(t, n0.ServerConfig(), n1.ClientConfigFor("n2"))
		if c == nil || !strings.Contains(c.Error(), `want "n2"`) {
			t.Fatalf("client err %v", c)
		}
	})
	t.Run("foreign client cert refused", func(t *testing.T) {
		mallory := evil.material(t, "n1", true, true, root) // trusts the real CA
		s, c := handshake(t, n0.ServerConfig(), mallory.ClientConfigFor("n0"))
		if s == nil || c == nil {
			t.Fatalf("server %v, client %v", s, c)
		}
		if !strings.Contains(s.Error(), "unknown authority") {
			t.Fatalf("server err %v", s)
		}
	})
	t.Run("foreign server cert refused", func(t *testing.T) {
		mallory := evil.material(t, "n0", true, true, root)
		s, c := handshake(t, mallory.ServerConfig(), n1.ClientConfigFor("n0"))
		if c == nil || s == nil {
			t.Fatalf("server %v, client %v", s, c)
		}
		if !strings.Contains(c.Error(), "unknown authority") {
			t.Fatalf("client err %v", c)
		}
	})
	t.Run("no client cert refused", func(t *testing.T) {
		cfg := n1.ClientConfig()
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }
		if s, _ := handshake(t, n0.ServerConfig(), cfg); s == nil {
			t.Fatal("server accepted a client without certificate")
		}
	})
	t.Run("TLS 1.2 client refused", func(t *testing.T) {
		cfg := n1.ClientConfig()
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		s, c := handshake(t, n0.ServerConfig(), cfg)
		if s == nil || c == nil {
			t.Fatalf("server %v, client %v", s, c)
		}
	})
	t.Run("TLS 1.2 server refused", func(t *testing.T) {
		cfg := n0.ServerConfig()
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		s, c := handshake(t, cfg, n1.ClientConfig())
		if s == nil || c == nil {
			t.Fatalf("server %v, client %v", s, c)
		}
	})
	if v := n0.ServerConfig().MinVersion; v != tls.VersionTLS13 {
		t.Errorf("server MinVersion %x", v)
	}
	if v := n0.ClientConfig().MinVersion; v != tls.VersionTLS13 {
		t.Errorf("client MinVersion %x", v)
	}
}

func TestSanitizeCN(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"n0.example":               "n0.example",
		"a\nb\x1b[31m":             "a?b?[31m",
		"né":                       "n??",
		strings.Repeat("x", 64):    strings.Repeat("x", 64),
		strings.Repeat("y", 65):    strings.Repeat("y", 61) + "...",
		strings.Repeat("\x00", 99): strings.Repeat("?", 61) + "...",
	} {
		if got := SanitizeCN(in); got != want {
			t.Errorf("SanitizeCN(%q) = %q, want %q", in, got, want)
		}
	}
}
