package clitool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"xce/adapters/authz"
	"xce/adapters/clitool/failover"
	"xce/adapters/daemon"
	"xce/adapters/tlsconf"
	"xce/schema"
	"xce/sm"
)

// StatusEAGAIN means nothing was applied, so a request may go elsewhere;
// its text tells a redirect (wire.Redirect, handled by the failover
// package) from a node that cannot serve yet. StatusOutcomeUnknown means
// maybe applied.
const (
	msgRecovering = "primary is recovering its job state" // the primary, before its replay ends
	msgStarting   = "starting"                            // the daemon before its node runs
	msgNoConfig   = "no config loaded yet"                // config request to a configless node
)

// ErrNoPrimary: no peer took the request (all down, or none primary).
var ErrNoPrimary = failover.ErrNoPrimary

// ErrUnknownOutcome: a mutation was sent but its outcome is unknown (the
// connection failed after sending, or the node lost its role or timed
// out while the request waited). It is not retried elsewhere: a blind
// retry could apply it twice. Check with `job get` / `job list`.
var ErrUnknownOutcome = failover.ErrUnknownOutcome

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

// Unwrap is authz.ErrForbidden when the node refused the caller's
// certificate: a definite answer (nothing was applied), naming the role
// the request needs.
func (e *NodeError) Unwrap() error {
	if e.Status == authz.StatusForbidden {
		return authz.ErrForbidden
	}
	return nil
}

// JobClient sends job operations to the cluster's primary through a
// failover.Client (its fields: Peers, TLS, Timeout, ConnectTimeout, ...).
// One JobClient remembers the primary between requests.
type JobClient struct {
	*failover.Client
}

// NewJobClient parses --peers; timeout bounds the wait for each answer
// (0 = transport.DefaultClientTimeout), connecting to a node is bounded by
// failover.DefaultConnectTimeout.
func NewJobClient(peersFlag string, mat *tlsconf.Material, timeout time.Duration) (*JobClient, error) {
	peers, _, err := daemon.ParsePeers(peersFlag)
	if err != nil {
		return nil, err
	}
	return &JobClient{Client: failover.New(peers, mat, timeout)}, nil
}

// readOnly operations may be repeated anywhere without harm.
func readOnly(k schema.JobRequest_Kind) bool {
	return k == schema.JobRequest_GET || k == schema.JobRequest_LIST
}

// classifyJob reads a job reply that is not a redirect.
func classifyJob(p daemon.Peer, rep *schema.ClientReply) (failover.Verdict, error) {
	switch st := rep.GetStatus(); st {
	case sm.StatusOK:
		if rep.GetJobReply() == nil {
			return failover.Done, fmt.Errorf("%s: reply without a job body", p.Name)
		}
		return failover.Done, nil
	case sm.StatusOutcomeUnknown:
		return failover.Unknown, nil
	case sm.StatusEAGAIN:
		switch msg := rep.GetError(); {
		case strings.HasPrefix(msg, msgRecovering), msg == msgStarting, msg == msgNoConfig:
			return failover.Next, nil
		default:
			// An EAGAIN this client does not know: it cannot tell that
			// nothing was applied, so it assumes the worst.
			return failover.Unknown, nil
		}
	default:
		return failover.Done, &NodeError{Peer: p.Name, Status: st, Msg: rep.GetError()}
	}
}

// Attempt is one peer tried on the way to the primary.
type Attempt = failover.Attempt

// JobResult is the primary's answer.
type JobResult struct {
	Peer     string // who answered
	Reply    *schema.JobReply
	Attempts []Attempt // peers tried before it
}

// Do sends req to the primary (see package failover: the last known
// primary first, then every peer at once, redirects followed, hung nodes
// passed over after the connect timeout). A node's refusal of the request
// itself (status != 0) is a *NodeError; an operation that may have been
// applied without an answer wraps ErrUnknownOutcome and is not sent
// elsewhere; when nobody took it, the error wraps ErrNoPrimary and lists
// every attempt.
func (c *JobClient) Do(ctx context.Context, jr *schema.JobRequest) (*JobResult, error) {
	res, err := c.Call(ctx, failover.Request{
		Msg:      &schema.ClientRequest{Op: &schema.ClientRequest_Job{Job: jr}},
		ReadOnly: readOnly(jr.GetKind()),
		Classify: classifyJob,
	})
	if errors.Is(err, ErrUnknownOutcome) {
		return nil, fmt.Errorf("%s: %w", kindName(jr.GetKind()), err)
	}
	if err != nil {
		return nil, err
	}
	return &JobResult{Peer: res.Name, Reply: res.Reply.GetJobReply(), Attempts: res.Attempts}, nil
}

func kindName(k schema.JobRequest_Kind) string {
	return strings.ToLower(strings.ReplaceAll(k.String(), "_", "-"))
}

// FetchConfig asks the peers for the running config and returns the first
// answer, decoded; the blob must match the tag the node reports.
func FetchConfig(ctx context.Context, peersFlag string, mat *tlsconf.Material, timeout time.Duration) (*schema.ClusterConfig, string, error) {
	c, err := NewJobClient(peersFlag, mat, timeout)
	if err != nil {
		return nil, "", err
	}
	return c.FetchConfig(ctx)
}

// FetchConfig: see the package function. Any node that has the config
// answers; the search is the one of Do.
func (c *JobClient) FetchConfig(ctx context.Context) (*schema.ClusterConfig, string, error) {
	var cfg *schema.ClusterConfig
	res, err := c.Call(ctx, failover.Request{
		Msg:      &schema.ClientRequest{Op: &schema.ClientRequest_Config{Config: &schema.ConfigRequest{}}},
		ReadOnly: true,
		AnyNode:  true,
		Classify: func(p daemon.Peer, rep *schema.ClientReply) (failover.Verdict, error) {
			if rep.GetStatus() != sm.StatusOK {
				return failover.Next, fmt.Errorf("%s (status %d)", rep.GetError(), rep.GetStatus())
			}
			got, err := decodeConfigReply(rep.GetConfigReply())
			if err != nil {
				return failover.Next, err // a bad blob is not believed: ask another node
			}
			cfg = got
			return failover.Done, nil
		},
	})
	var np *failover.NoPrimaryError
	if errors.As(err, &np) {
		return nil, "", fmt.Errorf("no peer returned the running config (%s)", np.List())
	}
	if err != nil {
		return nil, "", err
	}
	return cfg, res.Name, nil
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
