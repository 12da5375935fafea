package fuzz

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/schema"
)

var (
	decodeErrs   = []error{schema.ErrEmptyBlob, schema.ErrBlobTooBig, schema.ErrBlobDecode}
	validateErrs = []error{schema.ErrNoQueues, schema.ErrBadPort, schema.ErrReservedName, schema.ErrDuplicate, schema.ErrBadStamps, schema.ErrBadName}
)

// FuzzDecodeClusterConfig: DecodeClusterConfig and Validate never panic and
// fail only with their sentinels; a decoded config re-encodes to a blob that
// decodes to an equal config, encodes to the same bytes and validates the
// same way. The one exception is a blob of explicit default values only
// (e.g. 08 00): it decodes, but re-encodes to zero bytes, which
// DecodeClusterConfig refuses as empty; such a config has no queues, so
// Validate must refuse it anyway.
func FuzzDecodeClusterConfig(f *testing.F) {
	for _, c := range []*schema.ClusterConfig{
		{Port: 7400, Queues: []*schema.Queue{{Id: 1, Name: "default"}}},
		{ConfigGeneration: 2, ClusterName: "c", Port: 1024, Queues: []*schema.Queue{{Id: 1, Name: "a"}, {Id: 2, Name: "a"}}},
		{Port: 80, Queues: []*schema.Queue{{Name: schema.ReservedName}}, Hosts: []*schema.Host{{Name: "h", ResourceIds: []uint32{1, 2, 3}}}},
	} {
		b, err := schema.Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x00})
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := schema.DecodeClusterConfig(b)
		if err != nil {
			if !isOneOf(err, decodeErrs) {
				t.Fatalf("DecodeClusterConfig: error %v wraps no sentinel", err)
			}
			if c != nil {
				t.Fatalf("DecodeClusterConfig returned a config with error %v", err)
			}
			return
		}
		verr := schema.Validate(c)
		if verr != nil && !isOneOf(verr, validateErrs) {
			t.Fatalf("Validate: error %v wraps no sentinel", verr)
		}
		if rerr := schema.CheckReservedNames(c); rerr != nil && !errors.Is(rerr, schema.ErrReservedName) {
			t.Fatalf("CheckReservedNames: %v", rerr)
		}
		enc, err := schema.Encode(c)
		if err != nil {
			t.Fatalf("Encode(decoded config): %v", err)
		}
		c2, err := schema.DecodeClusterConfig(enc)
		if len(enc) > schema.MaxBlobSize {
			// Re-encoding can grow a blob (e.g. a negative int32 sent as a
			// 5-byte varint re-encodes as 10 bytes).
			if !errors.Is(err, schema.ErrBlobTooBig) {
				t.Fatalf("re-encoded %d bytes: %v", len(enc), err)
			}
			return
		}
		if len(enc) == 0 {
			if !errors.Is(err, schema.ErrEmptyBlob) || !errors.Is(verr, schema.ErrNoQueues) {
				t.Fatalf("all-default config: re-decode %v, Validate %v", err, verr)
			}
			return
		}
		if err != nil {
			t.Fatalf("DecodeClusterConfig(Encode(c)): %v", err)
		}
		if !proto.Equal(c, c2) {
			t.Fatalf("decode/encode/decode changed the config:\n%v\n%v", c, c2)
		}
		enc2, err := schema.Encode(c2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("Encode is not a fixed point: %x vs %x (%v)", enc, enc2, err)
		}
		if verr2 := schema.Validate(c2); (verr == nil) != (verr2 == nil) || verr != nil && verr.Error() != verr2.Error() {
			t.Fatalf("Validate changed across re-encoding: %v vs %v", verr, verr2)
		}
	})
}
