package integration

// The tests' and load generators' way to the cluster: package client
// (one kept HTTP/2 connection per node, the primary followed, a mutation
// of unknown outcome never retried), with the job operations in the form
// the tests build them (the API request message of each, sent by
// clitool.Send).

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/schema"
)

// jobDoer is one load client.
type jobDoer struct{ cl *client.Client }

// jobResult is an answer and the node that gave it (the client's known
// primary after the call: a standby that forwards names the primary).
type jobResult struct {
	Peer  string
	Reply *schema.JobResponse
}

// newDoer is a client of peersFlag; timeout bounds each answer once the
// request is written.
func newDoer(peersFlag string, mat *tlsconf.Material, timeout time.Duration) (*jobDoer, error) {
	cl, err := client.NewFromFlag(peersFlag, mat, client.Options{Timeout: timeout})
	if err != nil {
		return nil, err
	}
	return &jobDoer{cl: cl}, nil
}

// Do sends jr (errors as clitool.Send's).
func (d *jobDoer) Do(ctx context.Context, jr proto.Message) (*jobResult, error) {
	rep, err := clitool.Send(ctx, d.cl, jr)
	if err != nil {
		return nil, err
	}
	res := &jobResult{Reply: rep}
	if p, ok := d.cl.Primary(); ok {
		res.Peer = d.cl.Peers()[p].Name
	}
	return res, nil
}

func (d *jobDoer) Close() { _ = d.cl.Close() }
