package tlsconf

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// backdate is how far before "now" generated certificates become valid,
// so that a peer whose clock is a little behind still accepts them.
const backdate = 5 * time.Minute

// GenerateCA creates a self-signed ECDSA P-256 certificate authority named
// cn, valid from now (minus a few minutes) for validFor. It may sign leaf
// certificates only (path length 0).
func GenerateCA(cn string, validFor time.Duration) (certPEM, keyPEM []byte, err error) {
	if cn == "" {
		return nil, nil, errors.New("tlsconf: CA common name is empty")
	}
	if validFor <= 0 {
		return nil, nil, fmt.Errorf("tlsconf: CA validity %v is not positive", validFor)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconf: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconf: create CA certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// GenerateCert creates an ECDSA P-256 leaf certificate named cn, signed by
// the CA, valid from now (minus a few minutes) for validFor (cut to the
// CA's own expiry). hosts are put in the subject alternative names (IP
// addresses or DNS names). client and server select the extended key
// usages: a controller needs both (it dials its peers and accepts them), an
// operator tool or a worker only client.
func GenerateCert(caCertPEM, caKeyPEM []byte, cn string, hosts []string, validFor time.Duration, client, server bool) (certPEM, keyPEM []byte, err error) {
	if cn == "" {
		return nil, nil, errors.New("tlsconf: certificate common name is empty")
	}
	if validFor <= 0 {
		return nil, nil, fmt.Errorf("tlsconf: certificate validity %v is not positive", validFor)
	}
	if !client && !server {
		return nil, nil, errors.New("tlsconf: certificate for neither client nor server use")
	}
	ca, err := parseCertPEM(caCertPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconf: CA certificate: %w", err)
	}
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, fmt.Errorf("tlsconf: certificate %q is not a certificate authority", SanitizeCN(ca.Subject.CommonName))
	}
	caKey, err := parseKeyPEM(caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconf: CA key: %w", err)
	}
	if pub, ok := caKey.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(ca.PublicKey) {
		return nil, nil, errors.New("tlsconf: CA key does not match the CA certificate")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconf: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	notAfter := now.Add(validFor)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	for _, h := range hosts {
		switch ip := net.ParseIP(h); {
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		case h != "":
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsconf: create certificate %q: %w", SanitizeCN(cn), err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("tlsconf: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // positive, as RFC 5280 asks
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// parseCertPEM returns the first CERTIFICATE block of b.
func parseCertPEM(b []byte) (*x509.Certificate, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no PEM CERTIFICATE block")
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}

// parseKeyPEM returns the first private key of b (PKCS#8, SEC 1 EC or
// PKCS#1 RSA).
func parseKeyPEM(b []byte) (crypto.Signer, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no PEM private key block")
		}
		switch blk.Type {
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
			if err != nil {
				return nil, err
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("unsupported key type %T", k)
			}
			return s, nil
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(blk.Bytes)
		case "RSA PRIVATE KEY":
			return x509.ParsePKCS1PrivateKey(blk.Bytes)
		}
	}
}

// WriteFiles writes certPEM to dir/name.crt (mode 0644) and keyPEM to
// dir/name.key (mode 0600), creating dir (0755) if needed. Each file is
// written to a temporary name, fsynced, renamed into place, and the
// directory is fsynced, so a crash leaves either the old file or the new
// one, never a torn one.
func WriteFiles(dir, name string, certPEM, keyPEM []byte) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("tlsconf: invalid file name %q", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tlsconf: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, name+".key"), keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, name+".crt"), certPEM, 0o644); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("tlsconf: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("tlsconf: fsync %s: %w", dir, err)
	}
	return nil
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("tlsconf: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("tlsconf: write %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil { // before any byte of a key is written
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tlsconf: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tlsconf: %w", err)
	}
	return nil
}
