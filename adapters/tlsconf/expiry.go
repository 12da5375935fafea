// Package tlsconf holds the controller's TLS configuration helpers.
package tlsconf

import (
	"crypto/x509"
	"fmt"
	"time"
)

// CertWarnDays is CERT_WARN_DAYS (seed 002 §11.1): a controller whose own
// certificate expires within this many days logs a WARN at startup.
const CertWarnDays = 30

// asn1TimeLayout renders a time as OpenSSL's ASN1_TIME_print does
// ("Jan  2 15:04:05 2006 GMT"), the asn1_time_str of the seed's message.
const asn1TimeLayout = "Jan _2 15:04:05 2006 GMT"

const day = 24 * time.Hour

// ExpiryWarning is the startup certificate check of seed 002 §11.1: it
// reports warn when cert expires within warnDays days of now (or has
// already expired), with msg in the seed's WARN wording. days_remaining is
// the number of whole days left, as OpenSSL's ASN1_TIME_diff counts them.
// An expired certificate is always reported, whatever warnDays; warnDays
// <= 0 disables only the advance warning. A nil cert yields no warning.
func ExpiryWarning(cert *x509.Certificate, now time.Time, warnDays int) (msg string, warn bool) {
	if cert == nil {
		return "", false
	}
	when := cert.NotAfter.UTC().Format(asn1TimeLayout)
	left := cert.NotAfter.Sub(now)
	if left <= 0 {
		ago := int(now.Sub(cert.NotAfter) / day) // saturates, never negative
		return fmt.Sprintf("Controller certificate expired %d days ago (%s) — renew it now: "+
			"an expired certificate cannot complete the TLS handshake, so this controller "+
			"is excluded from HA election and config fetch", ago, when), true
	}
	if warnDays <= 0 || left/day >= time.Duration(warnDays) { // whole days: no overflow
		return "", false
	}
	return fmt.Sprintf("Controller certificate expires in %d days (%s) — renew before expiry "+
		"to avoid HA election exclusion", int(left/day), when), true
}

// Expired reports whether cert is past its NotAfter at now: the daemon
// logs ExpiryWarning's message at ERROR then (no handshake can succeed),
// at WARN while it only expires soon.
func Expired(cert *x509.Certificate, now time.Time) bool {
	return cert != nil && now.After(cert.NotAfter)
}
