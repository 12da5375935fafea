package wire

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"xce/schema"
	"xce/sm"
)

func jobReq(j *schema.JobRequest) *Request { return &Request{Job: j} }

func upgradeReq(blob, sum []byte) *Request {
	return &Request{Upgrade: &schema.UpgradeConfigRequest{Bytes: blob, Sha256: sum}}
}

// CheckRequest passes what is within the limits, the limits themselves
// included, and refuses, naming the field, anything past them.
func TestCheckRequest(t *testing.T) {
	sum := bytes.Repeat([]byte{0xab}, SHA256Size)
	long := strings.Repeat("q", MaxNameLen+1)
	good := []struct {
		name string
		r    *Request
	}{
		{"status", &Request{Status: &schema.StatusRequest{}}},
		{"config", &Request{Config: true}},
		{"submit", jobReq(&schema.JobRequest{Kind: schema.JobRequest_ENQUEUE, Queue: "q", Payload: []byte("x")})},
		{"max payload", jobReq(&schema.JobRequest{Kind: schema.JobRequest_ENQUEUE, Queue: "q", Payload: make([]byte, sm.MaxJobPayload)})},
		{"max handles", jobReq(&schema.JobRequest{Kind: schema.JobRequest_ACK_BATCH, Handles: make([]*schema.WalHandle, MaxJobHandles)})},
		{"claim with max acks", jobReq(&schema.JobRequest{Kind: schema.JobRequest_CLAIM, Max: 16, Handles: make([]*schema.WalHandle, MaxJobHandles)})},
		{"max name", jobReq(&schema.JobRequest{Kind: schema.JobRequest_LIST, Queue: long[:schema.MaxNameBytes]})},
		{"upgrade blob and sha256", upgradeReq([]byte("blob"), sum)},
		{"upgrade both empty (the primary refuses them)", upgradeReq(nil, nil)},
		{"upgrade max blob", upgradeReq(make([]byte, sm.MaxConfigSize), sum)},
	}
	for _, tc := range good {
		if err := CheckRequest(tc.r); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	bad := []struct {
		name string
		r    *Request
		want string
	}{
		{"nil", nil, "nil request"},
		{"no op", &Request{}, "no op"},
		{"two ops", &Request{Status: &schema.StatusRequest{}, Config: true}, "2 ops in one request"},
		{"kind unspecified", jobReq(&schema.JobRequest{}), "kind 0 unknown"},
		{"kind past the last", jobReq(&schema.JobRequest{Kind: schema.JobRequest_LOST_AND_FOUND_DRAIN + 1}), "unknown"},
		{"payload over the limit", jobReq(&schema.JobRequest{Kind: schema.JobRequest_ENQUEUE, Payload: make([]byte, sm.MaxJobPayload+1)}), "payload"},
		{"too many payloads", jobReq(&schema.JobRequest{Kind: schema.JobRequest_ENQUEUE_BATCH, Payloads: make([][]byte, MaxJobHandles+1)}), "payloads"},
		{"too many handles", jobReq(&schema.JobRequest{Kind: schema.JobRequest_ACK_BATCH, Handles: make([]*schema.WalHandle, MaxJobHandles+1)}), "handles"},
		{"claim with too many acks", jobReq(&schema.JobRequest{Kind: schema.JobRequest_CLAIM, Max: 16, Handles: make([]*schema.WalHandle, MaxJobHandles+1)}), "handles"},
		{"error text too long", jobReq(&schema.JobRequest{Kind: schema.JobRequest_FAIL, Error: strings.Repeat("e", MaxErrorLen+1)}), "error text"},
		{"queue name too long", jobReq(&schema.JobRequest{Kind: schema.JobRequest_LIST, Queue: long}), "queue \"qqqq"},
		{"host name too long", jobReq(&schema.JobRequest{Kind: schema.JobRequest_CLAIM, Host: long}), "host \"qqqq"},
		// The name rule (issue 20 finding 6), in every name a request carries.
		{"NUL in a queue name", jobReq(&schema.JobRequest{Kind: schema.JobRequest_ENQUEUE, Queue: "batch\x00"}), `queue "batch\x00": byte 0x00 at offset 5 is not allowed`},
		{"escape in a host name", jobReq(&schema.JobRequest{Kind: schema.JobRequest_CLAIM, Queue: "batch", Host: "\x1b[2Jnode"}), `host "\x1b[2Jnode": byte 0x1b at offset 0`},
		{"slash in a schedule name", jobReq(&schema.JobRequest{Kind: schema.JobRequest_REGISTER, Name: "../etc", Queue: "batch"}), `name "../etc": byte 0x2e '.' at offset 0`},
		{"slash in a queue name", jobReq(&schema.JobRequest{Kind: schema.JobRequest_LIST, Queue: "a/b"}), `byte 0x2f '/' at offset 1`},
		{"upgrade blob over MaxConfigSize", upgradeReq(make([]byte, sm.MaxConfigSize+1), sum), "config blob"},
		{"sha256 of 31 bytes", upgradeReq([]byte("blob"), sum[:31]), "sha256 of 31"},
		{"sha256 of 33 bytes", upgradeReq([]byte("blob"), append(sum, 0)), "sha256 of 33"},
	}
	for _, tc := range bad {
		err := CheckRequest(tc.r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// sm sizes a JSON reply by the strings a job may carry (sm.MaxJobStrings):
// a queue, pin and host name and a last error, as bounded here.
func TestJobStringsWithinSMBound(t *testing.T) {
	if n := 3*MaxNameLen + MaxErrorLen; n > sm.MaxJobStrings {
		t.Fatalf("a job may carry %d bytes of strings, sm bounds its replies for %d", n, sm.MaxJobStrings)
	}
}

// The internal form is Go (Request, Reply), not a protobuf envelope
// around the bodies (issue 21 item 4: the client envelope goes).
func TestNoClientEnvelope(t *testing.T) {
	for _, name := range []protoreflect.FullName{"xce.schema.ClientRequest", "xce.schema.ClientReply", "xce.schema.ConfigRequest"} {
		if _, err := protoregistry.GlobalFiles.FindDescriptorByName(name); err == nil {
			t.Errorf("%s is still a message", name)
		}
	}
}
