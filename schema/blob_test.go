package schema

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
)

func validConfig() *ClusterConfig {
	return &ClusterConfig{
		ConfigGeneration: 3,
		ClusterName:      "prod",
		Port:             7400,
		Queues: []*Queue{
			{Id: 1, Name: "default", VisibilityTimeoutS: 30, MaxAttempts: 5, BackoffBaseS: 2, DeadLetterRetentionS: 86400},
			{Id: 2, Name: "batch", Priority: -1, VisibilityTimeoutS: 60, MaxAttempts: 1},
		},
		Hosts: []*Host{
			{Name: "node-a", Address: "10.0.0.1:7401", ResourceIds: []uint32{1, 2}},
			{Name: "node-b", Address: "10.0.0.2:7401"},
		},
		Resources: []*Resource{
			{Id: 1, Name: "gpu", Count: 2},
			{Id: 2, Name: "ssd", Count: 1},
		},
	}
}

func mustEncode(t *testing.T, c *ClusterConfig) []byte {
	t.Helper()
	b, err := Encode(c)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return b
}

func TestDecodeClusterConfig(t *testing.T) {
	valid := mustEncode(t, validConfig())
	// Valid encodings padded with an unknown bytes field to exactly 1 MiB
	// (accepted) and one byte more (refused on size alone).
	atMax, big := padTo(t, valid, MaxBlobSize), padTo(t, valid, MaxBlobSize+1)

	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"nil", nil, ErrEmptyBlob},
		{"empty", []byte{}, ErrEmptyBlob},
		{"over 1 MiB", big, ErrBlobTooBig},
		{"over 1 MiB of zeros", make([]byte, MaxBlobSize+1), ErrBlobTooBig},
		{"garbage", []byte{0xff, 0xff, 0xff, 0xff}, ErrBlobDecode},
		{"garbage text", []byte("cluster_name: prod\n"), ErrBlobDecode},
		{"truncated", valid[:len(valid)-1], ErrBlobDecode},
		{"stray end-group tag", []byte{0x0c}, ErrBlobDecode},
		{"queue length past end", []byte{0x22, 0x05, 0x08}, ErrBlobDecode},
		// protobuf keeps a known field with the wrong wire type as unknown.
		{"port with wrong wire type", []byte{0x1a, 0x01, 0x00}, nil},
		{"invalid utf-8 name", []byte{0x12, 0x02, 0xff, 0xfe}, ErrBlobDecode},
		{"valid", valid, nil},
		{"valid at exactly 1 MiB", atMax, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DecodeClusterConfig(tc.b)
			if !errors.Is(err, tc.want) {
				t.Fatalf("DecodeClusterConfig = %v, want %v", err, tc.want)
			}
			if err != nil {
				if c != nil {
					t.Fatalf("non-nil config with error %v", err)
				}
				return
			}
			if c == nil {
				t.Fatal("nil config without error")
			}
		})
	}

	c, err := DecodeClusterConfig(valid)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(c, validConfig()) {
		t.Fatalf("decoded %v, want %v", c, validConfig())
	}
	if err := Validate(c); err != nil {
		t.Fatalf("Validate(decoded valid): %v", err)
	}
	again := mustEncode(t, c)
	if !bytes.Equal(again, valid) {
		t.Fatalf("Encode(Decode(b)) != b for a deterministic encoding")
	}
}

// padTo appends unknown field 99 (bytes, with a 3-byte length varint) to
// b so the result is exactly total bytes.
func padTo(t *testing.T, b []byte, total int) []byte {
	t.Helper()
	pad := total - len(b) - 5
	if pad < 1<<14 || pad >= 1<<21 {
		t.Fatalf("padTo: pad %d does not fit a 3-byte varint", pad)
	}
	out := append(bytes.Clone(b), 0x9a, 0x06, byte(pad)|0x80, byte(pad>>7)|0x80, byte(pad>>14))
	out = append(out, make([]byte, pad)...)
	if len(out) != total {
		t.Fatalf("padTo: got %d bytes, want %d", len(out), total)
	}
	return out
}

func TestValidate(t *testing.T) {
	mod := func(f func(c *ClusterConfig)) *ClusterConfig { c := validConfig(); f(c); return c }
	tests := []struct {
		name string
		c    *ClusterConfig
		want error
	}{
		{"valid", validConfig(), nil},
		{"nil config", nil, ErrNoQueues},
		{"no queues", mod(func(c *ClusterConfig) { c.Queues = nil }), ErrNoQueues},
		{"port 0", mod(func(c *ClusterConfig) { c.Port = 0 }), ErrBadPort},
		{"port 1023", mod(func(c *ClusterConfig) { c.Port = 1023 }), ErrBadPort},
		{"port 1024", mod(func(c *ClusterConfig) { c.Port = 1024 }), nil},
		{"port 65535", mod(func(c *ClusterConfig) { c.Port = 65535 }), nil},
		{"port 65536", mod(func(c *ClusterConfig) { c.Port = 65536 }), ErrBadPort},
		{"reserved queue name", mod(func(c *ClusterConfig) { c.Queues[1].Name = ReservedName }), ErrReservedName},
		{"reserved host name", mod(func(c *ClusterConfig) { c.Hosts[1].Name = ReservedName }), ErrReservedName},
		{"reserved-like queue name", mod(func(c *ClusterConfig) { c.Queues[1].Name = "lost_and_found2" }), nil},
		{"max_attempts 0", mod(func(c *ClusterConfig) { c.Queues[1].MaxAttempts = 0 }), ErrBadStamps},
		{"visibility_timeout_s 0", mod(func(c *ClusterConfig) { c.Queues[0].VisibilityTimeoutS = 0 }), ErrBadStamps},
		{"idempotency window 0: the default", mod(func(c *ClusterConfig) { c.Queues[0].IdempotencyWindowS = 0 }), nil},
		{"idempotency window 299", mod(func(c *ClusterConfig) { c.Queues[0].IdempotencyWindowS = 299 }), ErrBadWindow},
		{"idempotency window 300", mod(func(c *ClusterConfig) { c.Queues[0].IdempotencyWindowS = 300 }), nil},
		{"idempotency window a week", mod(func(c *ClusterConfig) { c.Queues[0].IdempotencyWindowS = 604800 }), nil},
		{"idempotency window over a week", mod(func(c *ClusterConfig) { c.Queues[0].IdempotencyWindowS = 604801 }), ErrBadWindow},
		{"duplicate queue name", mod(func(c *ClusterConfig) { c.Queues[1].Name = c.Queues[0].Name }), ErrDuplicate},
		{"duplicate queue id", mod(func(c *ClusterConfig) { c.Queues[1].Id = c.Queues[0].Id }), ErrDuplicate},
		{"duplicate host name", mod(func(c *ClusterConfig) { c.Hosts[1].Name = c.Hosts[0].Name }), ErrDuplicate},
		{"duplicate resource id", mod(func(c *ClusterConfig) { c.Resources[1].Id = c.Resources[0].Id }), ErrDuplicate},
		{"duplicate resource name, distinct ids", mod(func(c *ClusterConfig) { c.Resources[1].Name = c.Resources[0].Name }), nil},
		{"host and queue share a name", mod(func(c *ClusterConfig) { c.Hosts[0].Name = c.Queues[0].Name }), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.c)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
			if tc.want == nil {
				return
			}
			// Every refusal is the sentinel (possibly wrapped) and survives
			// an encode/decode of the config.
			if tc.c == nil {
				return
			}
			c, err := DecodeClusterConfig(mustEncodeOrPad(t, tc.c))
			if err != nil {
				t.Fatalf("DecodeClusterConfig: %v", err)
			}
			if err := Validate(c); !errors.Is(err, tc.want) {
				t.Fatalf("Validate(decoded) = %v, want %v", err, tc.want)
			}
		})
	}
}

// mustEncodeOrPad encodes c; an all-default config encodes to no bytes,
// which DecodeClusterConfig refuses as empty, so such a config gets an
// explicit zero config_generation field instead.
func mustEncodeOrPad(t *testing.T, c *ClusterConfig) []byte {
	b := mustEncode(t, c)
	if len(b) == 0 {
		return []byte{0x08, 0x00}
	}
	return b
}

func TestCheckReservedNames(t *testing.T) {
	tests := []struct {
		name string
		c    *ClusterConfig
		want error
	}{
		{"nil", nil, nil},
		{"valid", validConfig(), nil},
		// CheckReservedNames alone does not require queues or a port.
		{"only a reserved host", &ClusterConfig{Hosts: []*Host{{Name: ReservedName}}}, ErrReservedName},
		{"only a reserved queue", &ClusterConfig{Queues: []*Queue{{Name: ReservedName}}}, ErrReservedName},
		{"case differs", &ClusterConfig{Queues: []*Queue{{Name: "Lost_And_Found"}}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckReservedNames(tc.c); !errors.Is(err, tc.want) {
				t.Fatalf("CheckReservedNames = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestEncodeDeterministic(t *testing.T) {
	a, b := mustEncode(t, validConfig()), mustEncode(t, validConfig())
	if !bytes.Equal(a, b) {
		t.Fatal("two encodings of the same config differ")
	}
}
