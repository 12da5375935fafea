package clitool

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/api"
	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/transport"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xce-config/configtool"
	"github.com/xce-hpc/xce/schema"
)

// `xcecli status` shows a node's own certificate: EXPIRED when the node's
// handshake presents an expired one (the node cannot answer then), and
// "expires in N days" from a node's status reply when it expires soon.
func TestStatusShowsOwnCertificate(t *testing.T) {
	dir := t.TempDir()
	if err := configtool.DevCerts(dir, nil, nil, 365*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	caCert, caKey := read("ca.crt"), read("ca.key")
	node := func(name string, validFor time.Duration) *tlsconf.Material {
		c, k, err := tlsconf.GenerateCert(caCert, caKey, name, []string{"127.0.0.1"}, validFor, true, true)
		if err != nil {
			t.Fatal(err)
		}
		m, err := tlsconf.FromPEM(c, k, caCert)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	expired, soon := node("n0", time.Millisecond), node("n1", 10*24*time.Hour+time.Hour)
	var addrs []string
	var lns []net.Listener // held until both are picked: a port closed at once may be picked again
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	peers := []transport.Peer{{Name: "n0", Addr: addrs[0]}, {Name: "n1", Addr: addrs[1]}}
	for i, m := range []*tlsconf.Material{expired, soon} {
		_, h := api.Handler(api.Config{Self: i, Peers: []client.Peer{{Name: "n0", Addr: addrs[0]}, {Name: "n1", Addr: addrs[1]}},
			Door: func(context.Context, api.Caller, *wire.Request) *wire.Reply {
				return &wire.Reply{StatusReply: &schema.StatusReply{
					Name: peers[i].Name, Role: "standby", CertNotAfter: m.Leaf.NotAfter.Unix()}}
			}})
		tr, err := transport.New(transport.Config{Self: i, Peers: peers, TLS: m, HTTP: h})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tr.Listen(ctx) }()
		t.Cleanup(func() { cancel(); <-done; tr.Close() })
	}
	time.Sleep(20 * time.Millisecond) // n0's certificate is now past its NotAfter
	adminMat, err := tlsconf.Load(filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key"), filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	flag := "n0=" + addrs[0] + ",n1=" + addrs[1]
	var rows []PeerStatus
	deadline := time.Now().Add(3 * time.Second)
	for {
		if rows, err = Statuses(context.Background(), flag, adminMat, time.Second); err != nil {
			t.Fatal(err)
		}
		if rows[1].Up || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rows[0].Up || !rows[0].CertExpired || rows[0].CertNotAfter == nil || !rows[0].CertNotAfter.Equal(expired.Leaf.NotAfter) {
		t.Fatalf("expired node's row %+v", rows[0])
	}
	if !rows[1].Up || rows[1].CertExpired || rows[1].CertNotAfter == nil || rows[1].CertNotAfter.Unix() != soon.Leaf.NotAfter.Unix() {
		t.Fatalf("valid node's row %+v", rows[1])
	}
	var out bytes.Buffer
	if err := printStatus(&out, rows, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"n0: its certificate EXPIRED at " + expired.Leaf.NotAfter.UTC().Format(time.RFC3339) + ": no peer or client can complete a handshake with it",
		"n1: its certificate expires in 10 days (",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("status table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := printStatus(&out, rows, "json"); err != nil || !strings.Contains(out.String(), `"cert_expired": true`) {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
}
