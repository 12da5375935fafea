package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// jsonCodec is connect's JSON codec, but strict: a request with a field
// the message does not have is refused (invalid_argument, the error names
// the field), where connect's own drops it, so that a misspelt field
// ({"paylaod": ...}) is not a request without it. Replies are written as
// connect's are (protojson) but with every field, zero ones included: a
// pending job's state is its enum's zero value, and a reply without it
// would leave a JSON client to know that a missing "state" means
// JOB_STATE_PENDING. Zero values are never longer than the extremes the
// reply budgets assume (queue.JSONSizeBound; TestJobSizeBounds).
type jsonCodec struct{ name string }

// jsonCodecs replace connect's under the names it registers them by (the
// Content-Type's subtype: application/json, application/grpc+json, ...).
func jsonCodecs() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(jsonCodec{"json"}),
		connect.WithCodec(jsonCodec{"json; charset=utf-8"}),
	}
}

func (c jsonCodec) Name() string { return c.name }

func (jsonCodec) IsBinary() bool { return false }

func (c jsonCodec) Marshal(m any) ([]byte, error) { return c.MarshalAppend(nil, m) }

func (jsonCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("json codec: %T is not a protobuf message", m)
	}
	return replyJSON.MarshalAppend(dst, pm)
}

// replyJSON is how replies are written.
var replyJSON = protojson.MarshalOptions{EmitDefaultValues: true}

// MarshalStable is Marshal without protojson's random spaces.
func (c jsonCodec) MarshalStable(m any) ([]byte, error) {
	b, err := c.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func (jsonCodec) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("json codec: %T is not a protobuf message", m)
	}
	if len(b) == 0 {
		return errors.New("an empty body is not a JSON object (send {})")
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(b, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

// isJSON: a request of Content-Type ct is in JSON (application/json, or
// the +json variants of connect streams, gRPC and gRPC-Web).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(strings.Split(ct, ";")[0]))
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
