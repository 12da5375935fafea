package transport

import (
	"bytes"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"
)

// serverLeaf is the certificate the server at addr presents to a client
// of mat, or the handshake's error.
func serverLeaf(addr string, cfg *tls.Config) ([]byte, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Raw, nil
}

// SetTLS (the SIGHUP rotation): new connections get the new certificate
// and CA at once, without a restart; a certificate for another name is
// refused and the old material stays.
func TestSetTLSRotates(t *testing.T) {
	pk, _ := certs(t)
	rot, err := newPKI("rotated CA", nil, "n0", "n1", "operator")
	if err != nil {
		t.Fatal(err)
	}
	peers := peersOf(freeAddrs(t, 2))
	a := start(t, 0, peers, pk.mats["n0"], func(c *Config) { c.HTTP = cnHandler })
	addr := peers[0].Addr
	if !eventually(3*time.Second, func() bool {
		got, err := serverLeaf(addr, pk.mats["operator"].ClientConfig())
		return err == nil && bytes.Equal(got, pk.mats["n0"].Leaf.Raw)
	}) {
		t.Fatal("the old certificate is not served before the rotation")
	}
	// An established client connection survives the rotation.
	kept := apiConnected(t, addr, pk.mats["operator"])

	if err := a.tr.SetTLS(rot.mats["n1"]); err == nil || !strings.Contains(err.Error(), `own certificate is for "n1"`) {
		t.Fatalf("SetTLS of another node's certificate: %v", err)
	}
	if a.tr.TLS() != pk.mats["n0"] {
		t.Fatal("a refused SetTLS replaced the material")
	}
	if err := a.tr.SetTLS(rot.mats["n0"]); err != nil {
		t.Fatal(err)
	}
	got, err := serverLeaf(addr, rot.mats["operator"].ClientConfig())
	if err != nil || !bytes.Equal(got, rot.mats["n0"].Leaf.Raw) {
		t.Fatalf("after the rotation a client of the new CA gets %v (err %v), want the new certificate", got != nil, err)
	}
	if _, err := apiGet(apiClient(t, rot.mats["operator"], "h2"), addr); err != nil {
		t.Fatalf("client of the new CA: %v", err)
	}
	if got, err := apiGet(apiClient(t, pk.mats["operator"], "h2"), addr); err == nil {
		t.Fatalf("a client of the old CA was accepted after the rotation: %q", got)
	}
	if got, err := apiGet(kept, addr); err != nil || got != "operator HTTP/2.0" {
		t.Fatalf("the connection made before the rotation: %q, %v", got, err)
	}
}
