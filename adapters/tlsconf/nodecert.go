package tlsconf

import (
	"crypto/x509"
	"strings"
)

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

// EKUNames lists cert's extended key usages for an error message, e.g.
// "[clientAuth]"; "[none]" when it has none.
func EKUNames(cert *x509.Certificate) string {
	var names []string
	for _, u := range cert.ExtKeyUsage {
		switch u {
		case x509.ExtKeyUsageServerAuth:
			names = append(names, "serverAuth")
		case x509.ExtKeyUsageClientAuth:
			names = append(names, "clientAuth")
		case x509.ExtKeyUsageAny:
			names = append(names, "any")
		default:
			names = append(names, "other")
		}
	}
	if len(names) == 0 {
		names = []string{"none"}
	}
	return "[" + strings.Join(names, ", ") + "]"
}
