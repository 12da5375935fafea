// Package api serves the client API (the Xce service of schema/api.proto)
// with connectrpc.com/connect: one handler for gRPC, gRPC-Web and
// Connect (binary and JSON). The transport hands it the HTTP connections
// of its port (TLS ALPN h2 or http/1.1), already authenticated.
//
// Each RPC becomes the one internal request form the daemon serves
// (schema.ClientRequest): checked by wire.CheckRequest (the one
// validation of client input), then given to Config.Door with the
// caller's verified certificate CN, which authorises it (package authz),
// counts it and runs it. The reply's status becomes a Connect code (see
// codeOf). A standby's "not primary" refusal of a primary-only call is
// forwarded to the primary it names when it knows one (once: a forwarded
// call is never forwarded again), else answered with code unavailable and
// a schema.NotPrimary detail. The Work stream serves each of its
// messages as a Claim (work.go).
package api

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"xce/adapters/transport"
	"xce/client"
	"xce/schema"
	"xce/schema/schemaconnect"
)

// Door serves one internal request from the certificate named cn: the
// daemon's authorisation, metrics and node.
type Door func(ctx context.Context, cn string, req *schema.ClientRequest) *schema.ClientReply

// Config configures the handler.
type Config struct {
	Door  Door
	Self  int           // this node's index in Peers
	Peers []client.Peer // --peers
	// IsPeer tells a controller's certificate CN (only those may forward
	// a call on behalf of another certificate).
	IsPeer func(cn string) bool
	// Forward reaches the primary with this node's own certificate; nil
	// never forwards.
	Forward *client.Client
}

// Handler is the API's path prefix and handler (the Xce service and its
// gRPC server reflection).
//
// A call's limits are its encoding's: binary protobuf's requests are
// bounded as peer frames are (client.MaxMessageBytes), JSON's to
// client.MaxJSONMessageBytes, so that the JSON of the largest request
// (a payload at the limit, in base64) fits; a request body longer than
// its limit is refused before it is read (transport.LimitBody). Answers
// are sized for the caller's encoding before anything is applied (a
// claim's jobs, a list's page: sm's reply budgets), so a send limit never
// refuses one: both handlers send up to JSON's (a standby forwards a JSON
// call in binary, and its answer is sized for JSON).
func Handler(cfg Config) (string, http.Handler) {
	s := &server{cfg: cfg}
	opts := func(readMax int) []connect.HandlerOption {
		return append(jsonCodecs(), connect.WithReadMaxBytes(readMax), connect.WithSendMaxBytes(client.MaxJSONMessageBytes),
			// Connect gzips every reply a client accepts gzip for by
			// default: that cost more than the rest of a small call (the
			// benchmark in docs/performance.md); a list page or a config
			// still is.
			connect.WithCompressMinBytes(compressMinBytes))
	}
	path, binary := schemaconnect.NewXceHandler(s, opts(client.MaxMessageBytes)...)
	_, json := schemaconnect.NewXceHandler(s, opts(client.MaxJSONMessageBytes)...)
	mux := http.NewServeMux()
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, limit := binary, int64(client.MaxMessageBytes)
		if isJSON(r.Header.Get("Content-Type")) {
			h, limit = json, client.MaxJSONMessageBytes
		}
		transport.LimitBody(r, limit+bodySlack)
		h.ServeHTTP(w, r)
	}))
	serveReflection(mux)
	return path, withCaller(cfg.IsPeer, mux)
}

// bodySlack is what a request body may hold beyond its message limit:
// the envelope of a stream's message, and room for connect to see the
// message is too long and answer resource_exhausted itself.
const bodySlack = 64 << 10

// compressMinBytes: replies below it are sent uncompressed.
const compressMinBytes = 64 << 10

type server struct {
	cfg Config
}

// caller is who a call is from, set by withCaller.
type caller struct {
	cn        string // the certificate the call is authorised as
	forwarded bool   // a controller forwarded it (OnBehalfHeader)
	// json: the caller reads the answer in JSON (its Content-Type, or
	// EncodingHeader from a standby that forwards a JSON call).
	json bool
	// stream is the transport's control of the request body, for a
	// streaming RPC; nil when not served by a Transport.
	stream *transport.Stream
}

type callerKey struct{}

// withCaller puts the verified client certificate's CN in the request's
// context (or, from a controller's certificate with OnBehalfHeader, the
// CN it forwards for). A request without a verified certificate cannot
// arrive: the listener requires one.
func withCaller(isPeer func(string) bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := caller{stream: transport.StreamOf(r.Body),
			json: isJSON(r.Header.Get("Content-Type")) || r.Header.Get(client.EncodingHeader) == "json"}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			c.cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		if on := r.Header.Get(client.OnBehalfHeader); on != "" && isPeer != nil && isPeer(c.cn) {
			c.cn, c.forwarded = on, true
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}
