package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Material is a node's TLS identity: its certificate and key, the parsed
// leaf, and the cluster CA that every peer and client must chain to.
type Material struct {
	Cert tls.Certificate   // certificate chain and private key
	Leaf *x509.Certificate // Cert's leaf, parsed
	CAs  *x509.CertPool    // the cluster CA(s)
}

// Load reads a PEM certificate (chain) and key and the PEM CA bundle.
// It fails if the key does not match the certificate, if caFile holds no
// certificate, or if the leaf is not signed by one of the CA certificates
// (a misprovisioned node fails at startup, not at its first handshake).
// Expiry is not checked here: see ExpiryWarning.
func Load(certFile, keyFile, caFile string) (*Material, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: %w", err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: %w", err)
	}
	m, err := FromPEM(certPEM, keyPEM, caPEM)
	if err != nil {
		return nil, fmt.Errorf("%w (cert %s, key %s, CA %s)", err, certFile, keyFile, caFile)
	}
	return m, nil
}

// FromPEM is Load on PEM bytes already in memory.
func FromPEM(certPEM, keyPEM, caPEM []byte) (*Material, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: certificate and key: %w", err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tlsconf: certificate: %w", err)
		}
		cert.Leaf = leaf
	}
	var cas []*x509.Certificate
	for rest := caPEM; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: CA certificate: %w", err)
		}
		cas = append(cas, c)
	}
	if len(cas) == 0 {
		return nil, errors.New("tlsconf: no CA certificate in the CA bundle")
	}
	pool := x509.NewCertPool()
	signed := false
	for _, c := range cas {
		pool.AddCert(c)
		if leaf.CheckSignatureFrom(c) == nil {
			signed = true
		}
	}
	// A chain file may carry intermediates: then the last one must be
	// signed by the CA.
	if !signed && len(cert.Certificate) > 1 {
		if top, err := x509.ParseCertificate(cert.Certificate[len(cert.Certificate)-1]); err == nil {
			for _, c := range cas {
				if top.CheckSignatureFrom(c) == nil {
					signed = true
				}
			}
		}
	}
	if !signed {
		return nil, fmt.Errorf("tlsconf: certificate %q is not signed by the cluster CA", SanitizeCN(leaf.Subject.CommonName))
	}
	return &Material{Cert: cert, Leaf: leaf, CAs: pool}, nil
}

// Name is the common name of the node's own certificate.
func (m *Material) Name() string { return m.Leaf.Subject.CommonName }

// ServerConfig is the listener's configuration: TLS 1.3 only, and every
// dialer must present a certificate that chains to the cluster CA and is
// valid for client authentication. Which names may do what is decided
// after the handshake (see PeerCN).
func (m *Material) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{m.Cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    m.CAs,
	}
}

// ClientConfig is the dialer's configuration for reaching any controller:
// TLS 1.3 only, our certificate offered for mutual authentication, and the
// server's certificate verified against the cluster CA (chain, validity,
// server-auth usage). Host names are not checked — peers are dialled by
// address — so any CA-signed server is accepted; use ClientConfigFor to
// pin the server's name.
func (m *Material) ClientConfig() *tls.Config { return m.clientConfig("") }

// ClientConfigFor is ClientConfig that also requires the server
// certificate's common name to be peerName (the name in --peers of the
// peer being dialled).
func (m *Material) ClientConfigFor(peerName string) *tls.Config { return m.clientConfig(peerName) }

func (m *Material) clientConfig(want string) *tls.Config {
	cas, cert := m.CAs, m.Cert
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Always offer our certificate, even when the server's list of
		// acceptable CAs does not name our issuer (Go's default would then
		// send none): the server's log then says "unknown authority"
		// rather than a misleading "no certificate".
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &cert, nil
		},
		// Hostname verification is replaced by VerifyConnection below,
		// which still verifies the chain: this is not "insecure".
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyServer(cs, cas, want)
		},
	}
}

func verifyServer(cs tls.ConnectionState, cas *x509.CertPool, want string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tlsconf: server presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         cas,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return fmt.Errorf("tlsconf: server certificate %q: %w", SanitizeCN(leaf.Subject.CommonName), err)
	}
	if want != "" && leaf.Subject.CommonName != want {
		return fmt.Errorf("tlsconf: server certificate is for %q, want %q", SanitizeCN(leaf.Subject.CommonName), SanitizeCN(want))
	}
	return nil
}

// PeerCN is the common name of the verified certificate the other side
// presented, or "" if it presented none. It is raw: sanitise it with
// SanitizeCN before logging.
func PeerCN(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].Subject.CommonName
}

// MaxLoggedCN bounds SanitizeCN's result (characters).
const MaxLoggedCN = 64

// SanitizeCN makes a name from a certificate safe to log: every byte
// outside printable ASCII becomes '?', and the result is cut to
// MaxLoggedCN characters ("..." marks a cut).
func SanitizeCN(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if b.Len() == MaxLoggedCN {
			return b.String()[:MaxLoggedCN-3] + "..."
		}
		if c := s[i]; c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}
