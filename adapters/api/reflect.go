package api

import (
	"net/http"

	"connectrpc.com/grpcreflect"

	"github.com/xce-hpc/xce/schema/schemaconnect"
)

// serveReflection adds gRPC server reflection (grpc.reflection.v1, and
// v1alpha for older tools) of the Xce service to mux, so that grpcurl and
// other generic gRPC clients can call the API without the .proto files.
// It sits behind the same mutual TLS as the API (any certificate of the
// cluster CA) and tells only the schema, not the Door: nothing is
// authorised, counted or run for it.
func serveReflection(mux *http.ServeMux) {
	r := grpcreflect.NewStaticReflector(schemaconnect.XceName)
	mux.Handle(grpcreflect.NewHandlerV1(r))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(r))
}
