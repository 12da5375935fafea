package api_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/xce-hpc/xce/schema/schemaconnect"
)

// The API serves gRPC server reflection over its mutual TLS (HTTP/2, a
// bidirectional stream): a reflection client lists the Xce service and
// gets the file that defines it, with the methods grpcurl calls.
func TestReflectionListsTheService(t *testing.T) {
	c := startCluster(t, true)
	tc := c.mats["admin"].ClientConfig()
	tc.NextProtos = []string{"h2"}
	var protos http.Protocols
	protos.SetHTTP2(true)
	tr := &http.Transport{TLSClientConfig: tc, Protocols: &protos, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	rc := grpcreflect.NewClient(&http.Client{Transport: tr}, "https://"+c.peers[0].Addr, connect.WithGRPC())
	var names []protoreflect.FullName
	var stream *grpcreflect.ClientStream
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) { // until the listener is up
		stream = rc.NewStream(context.Background())
		var err error
		if names, err = stream.ListServices(); err == nil {
			break
		}
		stream.Close()
		if time.Now().After(deadline) {
			t.Fatalf("list services: %v", err)
		}
	}
	defer stream.Close()
	if !slices.Contains(names, schemaconnect.XceName) {
		t.Fatalf("services %v, want %s among them", names, schemaconnect.XceName)
	}
	files, err := stream.FileContainingSymbol(schemaconnect.XceName)
	if err != nil || len(files) == 0 {
		t.Fatalf("file of %s: %v (%d files)", schemaconnect.XceName, err, len(files))
	}
	var methods []string
	for _, f := range files { // the file asked for and its imports
		for _, s := range f.GetService() {
			for _, m := range s.GetMethod() {
				methods = append(methods, m.GetName())
			}
		}
	}
	for _, want := range []string{"Submit", "Claim", "Ack", "ClusterStatus", "List"} {
		if !slices.Contains(methods, want) {
			t.Errorf("method %s missing from the reflected service: %v", want, methods)
		}
	}
}
