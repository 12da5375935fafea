package fuzz

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"xce/adapters/confyaml"
	"xce/adapters/wire"
	"xce/schema"
)

// The doors (issue 8 build 7): what a client, a connecting node or an
// operator's YAML can hand the daemon or its tools.

// FuzzClientRequest: DecodeClientRequest never panics and fails only with
// its sentinels; what it accepts re-encodes, and decodes back equal (an
// op this build does not know decodes with a nil op and re-encodes as
// such).
func FuzzClientRequest(f *testing.F) {
	for _, r := range []*schema.ClientRequest{
		{Id: 1, Op: &schema.ClientRequest_Status{Status: &schema.StatusRequest{}}},
		{Id: 2, Op: &schema.ClientRequest_Job{Job: &schema.JobRequest{Kind: schema.JobRequest_ENQUEUE, Queue: "batch", Payload: []byte("x")}}},
		{Id: 3, Op: &schema.ClientRequest_Job{Job: &schema.JobRequest{Kind: schema.JobRequest_ACK, Handle: &schema.WalHandle{Id: 7, Attempt: 1, ClaimTerm: 2, ClaimLsn: 9}}}},
		{Id: 4, Op: &schema.ClientRequest_Job{Job: &schema.JobRequest{Kind: schema.JobRequest_LIST, Queue: "batch", AfterId: 12}}},
	} {
		b, err := wire.EncodeClientRequest(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x01, 0x1a, 0x02, 0x08, 0x63})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := wire.DecodeClientRequest(b)
		if err != nil {
			if !isOneOf(err, frameErrs) {
				t.Fatalf("DecodeClientRequest: error %v wraps no sentinel", err)
			}
			return
		}
		enc, err := wire.EncodeClientRequest(r)
		if err != nil {
			if errors.Is(err, wire.ErrBadMsg) && r.GetOp() == nil {
				return // an unknown op: the server answers StatusUnsupported
			}
			t.Fatalf("EncodeClientRequest(decoded %v): %v", r, err)
		}
		r2, err := wire.DecodeClientRequest(enc)
		if err != nil || !proto.Equal(r, r2) {
			t.Fatalf("round trip: %v, %v vs %v", err, r, r2)
		}
	})
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
