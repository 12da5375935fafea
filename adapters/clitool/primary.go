package clitool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"xce/adapters/daemon"
	"xce/adapters/tlsconf"
	"xce/adapters/transport"
	"xce/schema"
	"xce/sm"
)

// StatusEAGAIN means nothing was applied, so a request may go elsewhere;
// its text tells a redirect (follow JobReply.primary) from a node that
// cannot serve yet. StatusOutcomeUnknown means maybe applied.
const (
	msgNotPrimary = "Not primary"                         // a standby: redirect to JobReply.primary
	msgRecovering = "primary is recovering its job state" // the primary, before its replay ends
	msgStarting   = "starting"                            // the daemon before its node runs
	msgNoConfig   = "no config loaded yet"                // config request to a configless node
)

// ErrNoPrimary: no peer took the request (all down, or none primary).
var ErrNoPrimary = errors.New("no primary answered")

// ErrUnknownOutcome: a mutation was sent but its outcome is unknown (the
// connection failed after sending, or the node lost its role or timed
// out while the request waited). It is not retried elsewhere: a blind
// retry could apply it twice. Check with `job get` / `job list`.
var ErrUnknownOutcome = errors.New("outcome unknown")

// NodeError is a non-zero reply status other than a redirect: the node's
// answer (bad input, unknown queue, ...), printed as is.
type NodeError struct {
	Peer   string
	Status int32
	Msg    string
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("%s: %s (status %d)", e.Peer, e.Msg, e.Status)
}

// caller sends one ClientRequest to one address; a seam for tests.
// sent reports whether the request may have reached the node (false only
// when the connection could not be made).
type caller func(ctx context.Context, addr string, req *schema.ClientRequest) (rep *schema.ClientReply, sent bool, err error)

// JobClient sends job operations to the cluster's primary.
type JobClient struct {
	Peers   []daemon.Peer
	TLS     *tlsconf.Material
	Timeout time.Duration // per node; 0 = transport.DefaultClientTimeout
	call    caller        // nil = dial with TLS
}

// NewJobClient parses --peers; the peers are tried in that order.
func NewJobClient(peersFlag string, mat *tlsconf.Material, timeout time.Duration) (*JobClient, error) {
	peers, _, err := daemon.ParsePeers(peersFlag)
	if err != nil {
		return nil, err
	}
	return &JobClient{Peers: peers, TLS: mat, Timeout: timeout}, nil
}

func (c *JobClient) send(ctx context.Context, addr string, req *schema.ClientRequest) (*schema.ClientReply, bool, error) {
	if c.call != nil {
		return c.call(ctx, addr, req)
	}
	return dialCall(ctx, addr, c.TLS, c.Timeout, req)
}

// dialCall makes one connection, one request.
func dialCall(ctx context.Context, addr string, mat *tlsconf.Material, timeout time.Duration, req *schema.ClientRequest) (*schema.ClientReply, bool, error) {
	if timeout <= 0 {
		timeout = transport.DefaultClientTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := transport.DialClient(cctx, addr, mat, timeout)
	if err != nil {
		return nil, false, err
	}
	defer cl.Close()
	rep, err := cl.Call(cctx, req)
	return rep, !errors.Is(err, transport.ErrNotSent), err
}

// readOnly operations may be repeated anywhere without harm.
func readOnly(k schema.JobRequest_Kind) bool {
	return k == schema.JobRequest_GET || k == schema.JobRequest_LIST
}

// verdict is what one reply means for the search of the primary.
type verdict int

const (
	vDone       verdict = iota // the answer (ok, or a node error)
	vNotPrimary                // a standby: follow JobReply.primary, else next
	vNext                      // nothing applied here: try the next peer
	vUnknown                   // maybe applied: stop unless read-only
)

func classify(rep *schema.ClientReply) verdict {
	if rep.GetStatus() == sm.StatusOutcomeUnknown {
		return vUnknown
	}
	if rep.GetStatus() != sm.StatusEAGAIN {
		return vDone
	}
	msg := rep.GetError()
	switch {
	case strings.HasPrefix(msg, msgNotPrimary):
		return vNotPrimary
	case strings.HasPrefix(msg, msgRecovering), msg == msgStarting, msg == msgNoConfig:
		return vNext
	default:
		return vUnknown
	}
}

// Attempt is one peer tried on the way to the primary.
type Attempt struct {
	Peer string
	Err  string
}

// JobResult is the primary's answer.
type JobResult struct {
	Peer     string // who answered
	Reply    *schema.JobReply
	Attempts []Attempt // peers tried before it
}

// Do sends req to the primary: the peers in --peers order, following a
// "not primary" reply's primary index once; a peer that is down or
// cannot serve yet is skipped. A node's refusal of the request itself
// (status != 0) is a *NodeError; an operation that may have been applied
// without an answer wraps ErrUnknownOutcome; when nobody took it, the
// error wraps ErrNoPrimary and lists every attempt.
func (c *JobClient) Do(ctx context.Context, jr *schema.JobRequest) (*JobResult, error) {
	if len(c.Peers) == 0 {
		return nil, fmt.Errorf("%w: no peers", ErrNoPrimary)
	}
	var attempts []Attempt
	tried := make([]bool, len(c.Peers))
	followed := false
	try := func(i int) (*JobResult, verdict, int, error) {
		tried[i] = true
		p := c.Peers[i]
		rep, sent, err := c.send(ctx, p.Addr(), &schema.ClientRequest{Op: &schema.ClientRequest_Job{Job: jr}})
		if err != nil {
			attempts = append(attempts, Attempt{Peer: p.Name, Err: err.Error()})
			if sent && !readOnly(jr.GetKind()) {
				return nil, vUnknown, -1, fmt.Errorf("%w: %s to %s: %v", ErrUnknownOutcome, kindName(jr.GetKind()), p.Name, err)
			}
			return nil, vNext, -1, nil
		}
		v := classify(rep)
		switch v {
		case vDone:
			if rep.GetStatus() != sm.StatusOK {
				return nil, v, -1, &NodeError{Peer: p.Name, Status: rep.GetStatus(), Msg: rep.GetError()}
			}
			if rep.GetJobReply() == nil {
				return nil, v, -1, fmt.Errorf("%s: reply without a job body", p.Name)
			}
			return &JobResult{Peer: p.Name, Reply: rep.GetJobReply(), Attempts: attempts}, v, -1, nil
		case vNotPrimary:
			prim := int(rep.GetJobReply().GetPrimary())
			note := rep.GetError()
			if rep.GetJobReply() == nil {
				prim = -1
			}
			if prim >= 0 && prim < len(c.Peers) {
				note += " (primary " + c.Peers[prim].Name + ")"
			}
			attempts = append(attempts, Attempt{Peer: p.Name, Err: note})
			return nil, v, prim, nil
		case vUnknown:
			attempts = append(attempts, Attempt{Peer: p.Name, Err: rep.GetError()})
			if !readOnly(jr.GetKind()) {
				return nil, v, -1, fmt.Errorf("%w: %s: %s", ErrUnknownOutcome, p.Name, rep.GetError())
			}
			return nil, vNext, -1, nil
		default: // vNext
			attempts = append(attempts, Attempt{Peer: p.Name, Err: rep.GetError()})
			return nil, v, -1, nil
		}
	}
	for i := range c.Peers {
		if tried[i] {
			continue
		}
		res, v, prim, err := try(i)
		if res != nil || err != nil {
			return res, err
		}
		if v == vNotPrimary && !followed && prim >= 0 && prim < len(c.Peers) && !tried[prim] {
			followed = true
			res, _, _, err := try(prim)
			if res != nil || err != nil {
				return res, err
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	parts := make([]string, len(attempts))
	for i, a := range attempts {
		parts[i] = a.Peer + ": " + a.Err
	}
	return nil, fmt.Errorf("%w (%s)", ErrNoPrimary, strings.Join(parts, "; "))
}

func kindName(k schema.JobRequest_Kind) string {
	return strings.ToLower(strings.ReplaceAll(k.String(), "_", "-"))
}

// FetchConfig asks the peers in --peers order for the running config and
// returns the first one that answers, decoded; the blob must match the tag
// the node reports.
func FetchConfig(ctx context.Context, peersFlag string, mat *tlsconf.Material, timeout time.Duration) (*schema.ClusterConfig, string, error) {
	c, err := NewJobClient(peersFlag, mat, timeout)
	if err != nil {
		return nil, "", err
	}
	return c.FetchConfig(ctx)
}

// FetchConfig: see the package function.
func (c *JobClient) FetchConfig(ctx context.Context) (*schema.ClusterConfig, string, error) {
	var parts []string
	for _, p := range c.Peers {
		rep, _, err := c.send(ctx, p.Addr(), &schema.ClientRequest{Op: &schema.ClientRequest_Config{Config: &schema.ConfigRequest{}}})
		if err == nil && rep.GetStatus() != sm.StatusOK {
			err = &NodeError{Peer: p.Name, Status: rep.GetStatus(), Msg: rep.GetError()}
		}
		if err == nil {
			var cfg *schema.ClusterConfig
			cfg, err = decodeConfigReply(rep.GetConfigReply())
			if err == nil {
				return cfg, p.Name, nil
			}
		}
		parts = append(parts, p.Name+": "+err.Error())
		if cerr := ctx.Err(); cerr != nil {
			return nil, "", cerr
		}
	}
	return nil, "", fmt.Errorf("no peer returned the running config (%s)", strings.Join(parts, "; "))
}

func decodeConfigReply(cr *schema.ConfigReply) (*schema.ClusterConfig, error) {
	if cr == nil {
		return nil, errors.New("reply without a config body")
	}
	if tag := sm.TagOf(cr.GetBlob()); tag != cr.GetVersionTag() {
		return nil, fmt.Errorf("config blob hashes to tag %016x but the node reports %016x", tag, cr.GetVersionTag())
	}
	return schema.DecodeClusterConfig(cr.GetBlob())
}
