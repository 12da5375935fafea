package integration

// A client that keeps its connections: the transport.Client of the load
// generator (throughput_test.go), one TLS connection per node kept open
// across requests, with xcecli's rules for finding the primary and for
// outcomes (a mutation sent without an answer is unknown, never retried;
// "not primary" is followed to the primary it names). clitool.JobClient
// dials per request; a worker library would not, and a kept connection
// delivers requests to a paused node the moment it resumes.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"xce/adapters/clitool"
	"xce/adapters/daemon"
	"xce/adapters/tlsconf"
	"xce/adapters/transport"
	"xce/schema"
	"xce/sm"
)

// jobDoer is what the load's clients call: clitool.JobClient or wireClient.
type jobDoer interface {
	Do(ctx context.Context, jr *schema.JobRequest) (*clitool.JobResult, error)
}

type wireClient struct {
	peers   []daemon.Peer
	mat     *tlsconf.Material
	timeout time.Duration
	conns   []*transport.Client
	cur     int // where the primary was last
}

func newWireClient(peersFlag string, mat *tlsconf.Material, timeout time.Duration) (*wireClient, error) {
	peers, _, err := daemon.ParsePeers(peersFlag)
	if err != nil {
		return nil, err
	}
	return &wireClient{peers: peers, mat: mat, timeout: timeout, conns: make([]*transport.Client, len(peers))}, nil
}

func (w *wireClient) drop(i int) {
	if w.conns[i] != nil {
		_ = w.conns[i].Close()
		w.conns[i] = nil
	}
}

// call sends jr to peer i on its kept connection (dialled if needed);
// sent is false only if the request certainly did not leave.
func (w *wireClient) call(ctx context.Context, i int, jr *schema.JobRequest) (rep *schema.ClientReply, sent bool, err error) {
	if w.conns[i] == nil {
		cl, err := transport.DialClient(ctx, w.peers[i].Addr(), w.mat, w.timeout)
		if err != nil {
			return nil, false, err
		}
		w.conns[i] = cl
	}
	rep, err = w.conns[i].Call(ctx, &schema.ClientRequest{Op: &schema.ClientRequest_Job{Job: jr}})
	if err != nil {
		w.drop(i)
		return nil, !errors.Is(err, transport.ErrNotSent), err
	}
	return rep, true, nil
}

// Do follows clitool.JobClient.Do's rules (see primary.go) on kept
// connections, starting with the node that answered last.
func (w *wireClient) Do(ctx context.Context, jr *schema.JobRequest) (*clitool.JobResult, error) {
	readOnly := jr.GetKind() == schema.JobRequest_GET || jr.GetKind() == schema.JobRequest_LIST
	order := []int{w.cur}
	for i := range w.peers {
		if i != w.cur {
			order = append(order, i)
		}
	}
	tried := make([]bool, len(w.peers))
	followed := false
	var notes []string
	for k := 0; k < len(order); k++ {
		i := order[k]
		if tried[i] {
			continue
		}
		tried[i] = true
		name := w.peers[i].Name
		rep, sent, err := w.call(ctx, i, jr)
		if err != nil {
			notes = append(notes, name+": "+err.Error())
			if sent && !readOnly {
				return nil, fmt.Errorf("%w: %s to %s: %v", clitool.ErrUnknownOutcome, jr.GetKind(), name, err)
			}
			continue
		}
		msg := rep.GetError()
		switch st := rep.GetStatus(); {
		case st == sm.StatusOK:
			if rep.GetJobReply() == nil {
				return nil, fmt.Errorf("%s: reply without a job body", name)
			}
			w.cur = i
			return &clitool.JobResult{Peer: name, Reply: rep.GetJobReply()}, nil
		case st == sm.StatusEAGAIN && strings.HasPrefix(msg, "Not primary"):
			notes = append(notes, name+": "+msg)
			if p := int(rep.GetJobReply().GetPrimary()); !followed && rep.GetJobReply() != nil && p >= 0 && p < len(w.peers) && !tried[p] {
				followed = true
				order = append(order[:k+1], append([]int{p}, order[k+1:]...)...)
			}
		case st == sm.StatusEAGAIN && (strings.HasPrefix(msg, "primary is recovering its job state") || msg == "starting" || msg == "no config loaded yet"):
			notes = append(notes, name+": "+msg)
		case st == sm.StatusEAGAIN || st == sm.StatusOutcomeUnknown:
			notes = append(notes, name+": "+msg)
			if !readOnly {
				return nil, fmt.Errorf("%w: %s: %s", clitool.ErrUnknownOutcome, name, msg)
			}
		default:
			return nil, &clitool.NodeError{Peer: name, Status: st, Msg: msg}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w (%s)", clitool.ErrNoPrimary, strings.Join(notes, "; "))
}

func (w *wireClient) Close() {
	for i := range w.conns {
		w.drop(i)
	}
}
