// Package api serves the client API (the Xce service of schema/api.proto)
// with connectrpc.com/connect: one handler for gRPC, gRPC-Web and
// Connect (binary and JSON). The transport hands it the HTTP connections
// of its port (TLS ALPN h2 or http/1.1), already authenticated.
//
// Each RPC becomes the one internal request form the daemon serves
// (wire.Request): checked by wire.CheckRequest (the one
// validation of client input), then given to Config.Door with the
// caller's verified certificate CN, which authorises it (package authz),
// counts it and runs it. A job operation's request is the node's own
// (sm.JobRequest, built in rpcs.go), and its reply the node's sm.Reply,
// rendered as the JobResponse here (render.go). The reply's status
// becomes a Connect code (see CodeOf, which the metrics count by too). A standby's "not primary" refusal of a primary-only call is
// forwarded to the primary it names when it knows one (once: a forwarded
// call is never forwarded again), else answered with code unavailable and
// a schema.NotPrimary detail. The Work stream serves each of its
// messages as a Claim (work.go).
package api

import (
	"context"
	"crypto/x509"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/authz"
	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/adapters/transport"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema/schemaconnect"
)

// Door serves one internal request from caller: the daemon's
// authorisation, metrics and node.
type Door func(ctx context.Context, caller Caller, req *wire.Request) *wire.Reply

// Caller is who a request is from, as the door authorises it.
type Caller struct {
	// CN is the verified certificate's common name or, on a forwarded
	// call, the name of the certificate the call is forwarded for.
	CN string
	// Via is the node that forwarded the call ("" for a direct call), and
	// Role the caller's role as that node's allowlists gave it.
	Via, Role string
	// Ignored is an OnBehalfHeader sent by a certificate that may not
	// forward (not a node's): the call runs as that certificate itself.
	Ignored string
}

// String names the caller for audit lines: "CN=alice", or "CN=alice via
// n1" on a forwarded call.
func (c Caller) String() string {
	s := "CN=" + tlsconf.SanitizeCN(c.CN)
	if c.Via != "" {
		s += " via " + tlsconf.SanitizeCN(c.Via)
	}
	return s
}

// Config configures the handler.
type Config struct {
	Door  Door
	Self  int           // this node's index in Peers
	Peers []client.Peer // --peers
	// Policy tells the controllers' certificates (only those may forward
	// a call on behalf of another certificate) and the role a forwarded
	// call's caller has; nil: no call is believed forwarded, none is
	// forwarded.
	Policy *authz.Policy
	// Forward reaches the primary with this node's own certificate; nil
	// never forwards.
	Forward *client.Client
	// Without: streaming procedures (client.StreamsHeader's names) not
	// served nor announced, as by a version before them: for tests of
	// the clients that meet such a node.
	Without []string
}

// streams is what a node's ClusterStatus answer announces it serves
// (client.StreamsHeader).
var streams = []string{"SubmitStream"}

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
	s := &server{cfg: cfg, served: streamsServed(cfg)}
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
		if slices.Contains(cfg.Without, strings.TrimPrefix(r.URL.Path, path)) {
			http.NotFound(w, r)
			return
		}
		h, limit := binary, int64(client.MaxMessageBytes)
		if isJSON(r.Header.Get("Content-Type")) {
			h, limit = json, client.MaxJSONMessageBytes
		}
		transport.LimitBody(r, limit+bodySlack)
		h.ServeHTTP(w, r)
	}))
	serveReflection(mux)
	return path, withCaller(cfg.Policy, mux)
}

// bodySlack is what a request body may hold beyond its message limit:
// the envelope of a stream's message, and room for connect to see the
// message is too long and answer resource_exhausted itself.
const bodySlack = 64 << 10

// compressMinBytes: replies below it are sent uncompressed.
const compressMinBytes = 64 << 10

type server struct {
	cfg    Config
	served string // the StreamsHeader of its ClusterStatus answers (streamsServed)
}

// caller is who a call is from, set by withCaller.
type caller struct {
	Caller
	// json: the caller reads the answer in JSON (its Content-Type, or
	// EncodingHeader from a standby that forwards a JSON call).
	json bool
	// stream is the transport's control of the request body, for a
	// streaming RPC; nil when not served by a Transport.
	stream *transport.Stream
}

func (c caller) forwarded() bool { return c.Via != "" }

type callerKey struct{}

// withCaller puts the caller in the request's context: the verified
// client certificate's CN or, from a node's own certificate (a CN in
// --peers, issued for both serverAuth and clientAuth) with
// OnBehalfHeader, the CN and role it forwards for. A request without a
// verified certificate cannot arrive: the listener requires one.
func withCaller(policy *authz.Policy, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := caller{stream: transport.StreamOf(r.Body),
			json: isJSON(r.Header.Get("Content-Type")) || r.Header.Get(client.EncodingHeader) == "json"}
		var cert *x509.Certificate
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cert = r.TLS.PeerCertificates[0]
			c.CN = cert.Subject.CommonName
		}
		if on := r.Header.Get(client.OnBehalfHeader); on != "" {
			if policy != nil && policy.RoleOf(c.CN) == authz.RolePeer && tlsconf.IsNodeCert(cert) {
				c.Via, c.CN, c.Role = c.CN, on, r.Header.Get(client.OnBehalfRoleHeader)
			} else {
				c.Ignored = on
			}
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}
