package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"
)

// selfSigned makes a self-signed ECDSA P-256 certificate valid until
// notAfter, parsed back from its DER as the controller would load it.
func selfSigned(t *testing.T, serial int64, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "n0.xce.test"},
		DNSNames:     []string{"n0.xce.test"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestCertExpiryWarning is seed 002 §14.1 test_cert_expiry_warning: a
// certificate expiring within CERT_WARN_DAYS logs a WARN, one far in the
// future does not, and an expired one warns that it has expired (§11.1).
func TestCertExpiryWarning(t *testing.T) {
	if CertWarnDays != 30 {
		t.Errorf("CertWarnDays = %d, want the seed's default 30", CertWarnDays)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, c := range []struct {
		name     string
		left     time.Duration // NotAfter - now
		warnDays int
		warn     bool
		contains []string
	}{
		{"expires-in-10-days", 10 * day, CertWarnDays, true, []string{
			"Controller certificate expires in 10 days (Mar 11 12:00:00 2026 GMT)",
			"renew before expiry to avoid HA election exclusion"}},
		{"expires-in-365-days", 365 * day, CertWarnDays, false, nil},
		{"already-expired", -3 * day, CertWarnDays, true, []string{"expired 3 days ago", "Feb 26 12:00:00 2026 GMT"}},
		{"expired-one-second-ago", -time.Second, CertWarnDays, true, []string{"expired 0 days ago"}},
		{"exactly-30-days", 30 * day, CertWarnDays, false, nil},
		{"just-under-30-days", 30*day - time.Second, CertWarnDays, true, []string{"expires in 29 days"}},
		{"under-a-day", 5 * time.Hour, CertWarnDays, true, []string{"expires in 0 days"}},
		{"advance-warning-disabled", 10 * day, 0, false, nil},
		{"expired-even-when-disabled", -day, 0, true, []string{"expired 1 days ago"}},
		{"huge-warn-days", 365 * day, 1 << 30, true, []string{"expires in 365 days"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cert := selfSigned(t, 1, now.Add(-400*day), now.Add(c.left))
			msg, warn := ExpiryWarning(cert, now, c.warnDays)
			if warn != c.warn {
				t.Fatalf("warn = %v (msg %q), want %v", warn, msg, c.warn)
			}
			if !warn && msg != "" {
				t.Errorf("no warning but msg %q", msg)
			}
			for _, s := range c.contains {
				if !strings.Contains(msg, s) {
					t.Errorf("msg %q does not contain %q", msg, s)
				}
			}
			if warn && c.left <= 0 && strings.Contains(msg, "expires in") {
				t.Errorf("expired certificate reported as expiring: %q", msg)
			}
		})
	}
	if msg, warn := ExpiryWarning(nil, now, CertWarnDays); warn || msg != "" {
		t.Errorf("nil cert: %q, %v", msg, warn)
	}
}

func TestExpired(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		notAfter time.Time
		want     bool
	}{{now.Add(-time.Second), true}, {now.Add(time.Hour), false}, {now, false}} {
		if got := Expired(&x509.Certificate{NotAfter: c.notAfter}, now); got != c.want {
			t.Errorf("Expired(NotAfter %v) = %v, want %v", c.notAfter, got, c.want)
		}
	}
	if Expired(nil, now) {
		t.Error("a nil certificate counted as expired")
	}
}
