package wire

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

func jobReq(j *sm.JobRequest) *Request { return &Request{Job: j} }

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
		{"submit", jobReq(&sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q", Payload: []byte("x")})},
		{"max payload", jobReq(&sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q", Payload: make([]byte, sm.MaxJobPayload)})},
		{"max handles", jobReq(&sm.JobRequest{Kind: sm.JobAckBatch, Handles: make([]queue.Handle, MaxJobHandles)})},
		{"claim with max acks", jobReq(&sm.JobRequest{Kind: sm.JobClaim, Max: 16, Handles: make([]queue.Handle, MaxJobHandles)})},
		{"claim with the longest wait", jobReq(&sm.JobRequest{Kind: sm.JobClaim, Max: 1, Wait: sm.MaxClaimWait})},
		{"max name", jobReq(&sm.JobRequest{Kind: sm.JobList, Queue: long[:schema.MaxNameBytes]})},
		{"upgrade blob and sha256", upgradeReq([]byte("blob"), sum)},
		{"upgrade both empty (the primary refuses them)", upgradeReq(nil, nil)},
		{"upgrade max blob", upgradeReq(make([]byte, sm.MaxConfigSize), sum)},
		{"switchover, the primary's pick", &Request{Switchover: &sm.Switchover{To: -1}}},
		{"switchover to a member", &Request{Switchover: &sm.Switchover{To: 2}}},
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
		{"kind unspecified", jobReq(&sm.JobRequest{}), "kind 0 unknown"},
		{"kind past the last", jobReq(&sm.JobRequest{Kind: sm.JobListSchedules + 1}), "unknown"},
		{"payload over the limit", jobReq(&sm.JobRequest{Kind: sm.JobEnqueue, Payload: make([]byte, sm.MaxJobPayload+1)}), "payload"},
		{"too many payloads", jobReq(&sm.JobRequest{Kind: sm.JobEnqueueBatch, Payloads: make([][]byte, MaxJobHandles+1)}), "payloads"},
		{"too many handles", jobReq(&sm.JobRequest{Kind: sm.JobAckBatch, Handles: make([]queue.Handle, MaxJobHandles+1)}), "handles"},
		{"claim with too many acks", jobReq(&sm.JobRequest{Kind: sm.JobClaim, Max: 16, Handles: make([]queue.Handle, MaxJobHandles+1)}), "handles"},
		{"claim wait past the bound", jobReq(&sm.JobRequest{Kind: sm.JobClaim, Max: 1, Wait: sm.MaxClaimWait + time.Millisecond}),
			fmt.Sprintf("claim wait of %d ms exceeds %d", (sm.MaxClaimWait + time.Millisecond).Milliseconds(), sm.MaxClaimWait.Milliseconds())},
		{"negative claim wait", jobReq(&sm.JobRequest{Kind: sm.JobClaim, Max: 1, Wait: -time.Second}), "claim wait of -1s is negative"},
		{"a wait on a submit", jobReq(&sm.JobRequest{Kind: sm.JobEnqueue, Queue: "q", Wait: time.Second}), "a wait on a ENQUEUE: only a claim waits"},
		{"a wait on an ack batch", jobReq(&sm.JobRequest{Kind: sm.JobAckBatch, Wait: time.Second}), "a wait on a ACK_BATCH: only a claim waits"},
		{"error text too long", jobReq(&sm.JobRequest{Kind: sm.JobFail, Error: strings.Repeat("e", MaxErrorLen+1)}), "error text"},
		{"queue name too long", jobReq(&sm.JobRequest{Kind: sm.JobList, Queue: long}), "queue \"qqqq"},
		{"host name too long", jobReq(&sm.JobRequest{Kind: sm.JobClaim, Host: long}), "host \"qqqq"},
		// The name rule (issue 20 finding 6), in every name a request carries.
		{"NUL in a queue name", jobReq(&sm.JobRequest{Kind: sm.JobEnqueue, Queue: "batch\x00"}), `queue "batch\x00": byte 0x00 at offset 5 is not allowed`},
		{"escape in a host name", jobReq(&sm.JobRequest{Kind: sm.JobClaim, Queue: "batch", Host: "\x1b[2Jnode"}), `host "\x1b[2Jnode": byte 0x1b at offset 0`},
		{"slash in a schedule name", jobReq(&sm.JobRequest{Kind: sm.JobRegister, Name: "../etc", Queue: "batch"}), `name "../etc": byte 0x2e '.' at offset 0`},
		{"slash in a queue name", jobReq(&sm.JobRequest{Kind: sm.JobList, Queue: "a/b"}), `byte 0x2f '/' at offset 1`},
		{"upgrade blob over MaxConfigSize", upgradeReq(make([]byte, sm.MaxConfigSize+1), sum), "config blob"},
		{"sha256 of 31 bytes", upgradeReq([]byte("blob"), sum[:31]), "sha256 of 31"},
		{"sha256 of 33 bytes", upgradeReq([]byte("blob"), append(sum, 0)), "sha256 of 33"},
		{"switchover target below -1", &Request{Switchover: &sm.Switchover{To: -2}}, "switchover target -2"},
		{"switchover and status", &Request{Switchover: &sm.Switchover{To: -1}, Status: &schema.StatusRequest{}}, "2 ops in one request"},
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
// around the bodies (issue 21 item 4: the client envelope goes), and a job
// operation's bodies are the node's own sm.JobRequest and sm.Reply, not
// messages of their own.
func TestNoClientEnvelope(t *testing.T) {
	for _, name := range []protoreflect.FullName{"xce.schema.ClientRequest", "xce.schema.ClientReply", "xce.schema.ConfigRequest",
		"xce.schema.JobRequest", "xce.schema.JobReply"} {
		if _, err := protoregistry.GlobalFiles.FindDescriptorByName(name); err == nil {
			t.Errorf("%s is still a message", name)
		}
	}
}
