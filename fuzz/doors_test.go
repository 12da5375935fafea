package fuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/adapters/api"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/confyaml"
	"github.com/xce-hpc/xce/sm"
)

// The doors (issue 8 build 7): what a client, a connecting node or an
// operator's YAML can hand the daemon or its tools.

// FuzzAPIRequest: any body posted to any RPC of the client API (the
// Connect protocol, binary protobuf). The handler never panics; the
// daemon's door sees only requests that pass wire.CheckRequest, the one
// validation of client input; every answer is a Connect error with code
// invalid_argument here: an undecodable body, a failed check, or the
// door's own refusal (it refuses everything).
func FuzzAPIRequest(f *testing.F) {
	seeds := []struct {
		proc int
		msg  proto.Message
	}{
		{0, &schema.SubmitRequest{Queue: "batch", Payload: []byte("x")}},
		{1, &schema.SubmitBatchRequest{Queue: "batch", Payloads: [][]byte{[]byte("a"), []byte("b")}}},
		{2, &schema.ClaimRequest{Queue: "batch", Host: "node001", Max: 4}},
		{3, &schema.AckRequest{Handle: &schema.WalHandle{Id: 7, Attempt: 1, ClaimTerm: 2, ClaimLsn: 9}}},
		{10, &schema.ListRequest{Queue: "batch", AfterId: 12}},
		{21, &schema.UpgradeConfigRequest{Bytes: []byte{1}, Sha256: make([]byte, 32)}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s.msg)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(s.proc), b)
	}
	f.Add(uint8(4), []byte{0x0a, 0xff})
	door := func(_ context.Context, _ api.Caller, req *wire.Request) *wire.Reply {
		if err := wire.CheckRequest(req); err != nil {
			panic(fmt.Sprintf("the door got a request that fails the check: %v", err))
		}
		return &wire.Reply{Status: sm.StatusEINVAL, Error: "fuzz"}
	}
	_, h := api.Handler(api.Config{Door: door, Peers: []client.Peer{{Name: "n0", Addr: "127.0.0.1:1"}}})
	procs := apiProcedures()
	f.Fuzz(func(t *testing.T, proc uint8, body []byte) {
		path := procs[int(proc)%len(procs)]
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/proto")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		var rep struct{ Code, Message string }
		if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil || rep.Code != "invalid_argument" || rep.Message == "" {
			t.Fatalf("%s: HTTP %d %q (%v), want a Connect invalid_argument error", path, w.Code, w.Body.String(), err)
		}
	})
}

// apiProcedures is every unary RPC path of the API service, in schema
// order. A stream (Work) needs HTTP/2 and serves each message as a
// unary call (Work's as Claim), which is fuzzed here.
func apiProcedures() []string {
	sd := schema.File_api_proto.Services().ByName("Xce")
	var out []string
	for i := 0; i < sd.Methods().Len(); i++ {
		m := sd.Methods().Get(i)
		if m.IsStreamingClient() || m.IsStreamingServer() {
			continue
		}
		out = append(out, "/"+string(sd.FullName())+"/"+string(m.Name()))
	}
	return out
}

// FuzzHello: DecodeHello never panics, fails only with its sentinels,
// and what it accepts round-trips.
func FuzzHello(f *testing.F) {
	for _, h := range []*schema.Hello{
		{Kind: schema.Hello_PEER, Name: "n1"},
		{Kind: schema.Hello_CLIENT, Name: "operator"},
	} {
		b, err := wire.EncodeHello(h)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := wire.DecodeHello(b)
		if err != nil {
			if !isOneOf(err, frameErrs) {
				t.Fatalf("DecodeHello: error %v wraps no sentinel", err)
			}
			return
		}
		enc, err := wire.EncodeHello(h)
		if err != nil {
			t.Fatalf("EncodeHello(decoded %v): %v", h, err)
		}
		h2, err := wire.DecodeHello(enc)
		if err != nil || !proto.Equal(h, h2) {
			t.Fatalf("round trip: %v, %v vs %v", err, h, h2)
		}
	})
}

// FuzzYAML: confyaml.Parse never panics and fails only with ErrYAML (plus
// the validation sentinel); a config it accepts renders to YAML that
// parses to the same config, and passes the one validation.
func FuzzYAML(f *testing.F) {
	f.Add([]byte("cluster_name: c\nport: 7600\nqueues:\n  - id: 1\n    name: batch\n    visibility_timeout_s: 30\n    max_attempts: 3\nhosts:\n  - name: h1\n"))
	f.Add([]byte("port: 80\nqueues: []\n"))
	f.Add([]byte("queues: [1, 2\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := confyaml.Parse("fuzz.yaml", b)
		if err != nil {
			if !errors.Is(err, confyaml.ErrYAML) {
				t.Fatalf("Parse: error %v is not ErrYAML", err)
			}
			return
		}
		if err := schema.Validate(c); err != nil {
			t.Fatalf("Parse accepted a config Validate refuses: %v", err)
		}
		y, err := confyaml.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal(parsed): %v", err)
		}
		c2, err := confyaml.Parse("rendered.yaml", y)
		if err != nil || !proto.Equal(c, c2) {
			t.Fatalf("round trip: %v\n%s", err, y)
		}
	})
}
