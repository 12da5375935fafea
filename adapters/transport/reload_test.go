package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"xce/schema"
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
	a := start(t, 0, peers, pk.mats["n0"], func(c *Config) {
		c.Client = func(string, *schema.ClientRequest) *schema.ClientReply {
			return &schema.ClientReply{Body: &schema.ClientReply_StatusReply{StatusReply: &schema.StatusReply{Name: "n0"}}}
		}
	})
	addr := peers[0].Addr
	if !eventually(3*time.Second, func() bool {
		got, err := serverLeaf(addr, pk.mats["operator"].ClientConfig())
		return err == nil && bytes.Equal(got, pk.mats["n0"].Leaf.Raw)
	}) {
		t.Fatal("the old certificate is not served before the rotation")
	}
	// An established client connection survives the rotation.
	ctx := context.Background()
	kept, err := DialClient(ctx, addr, pk.mats["operator"], time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()

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
	if _, err := DialClient(ctx, addr, rot.mats["operator"], time.Second); err != nil {
		t.Fatalf("client of the new CA: %v", err)
	}
	if c, err := DialClient(ctx, addr, pk.mats["operator"], time.Second); err == nil {
		_, err = c.Status(ctx) // TLS 1.3: a refused client certificate shows at the first read
		c.Close()
		if err == nil {
			t.Fatal("a client of the old CA was accepted after the rotation")
		}
	}
	if st, err := kept.Status(ctx); err != nil || st.GetName() != "n0" {
		t.Fatalf("the connection made before the rotation: %v, %v", st, err)
	}
}
