package tlsconf

import "crypto/x509"

// IsNodeCert reports whether cert was issued for a controller node: for
// both serverAuth and clientAuth (docs/operations.md, "Certificates"). A
// client certificate (clientAuth only) is not a node's, whatever its CN:
// only a node's certificate may forward a call on behalf of another.
func IsNodeCert(cert *x509.Certificate) bool {
	if cert == nil {
		return false
	}
	var server, client bool
	for _, u := range cert.ExtKeyUsage {
		switch u {
		case x509.ExtKeyUsageServerAuth:
			server = true
		case x509.ExtKeyUsageClientAuth:
			client = true
		}
	}
	return server && client
}
