package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/client"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// A submit with an idempotency key is repeated while its outcome is
// unknown, up to KeyedAttempts sends; one without a key, or a batch with
// a payload lacking one, is sent once; a definite refusal ends the
// repeats at once.
func TestKeyedSubmitIsRepeated(t *testing.T) {
	unknownThenOK := func(fails int32) (door, *atomic.Int32) {
		var n atomic.Int32
		return func(req *wire.Request) *wire.Reply {
			if req.Job == nil {
				return okReply(req)
			}
			if n.Add(1) <= fails {
				return unknownReply(req)
			}
			if req.Job.Kind == sm.JobEnqueueBatch { // the node names a batch's jobs by id alone
				return &wire.Reply{Job: &sm.Reply{OK: true, IDs: []uint64{7}, Deduplicated: []bool{true}}}
			}
			return &wire.Reply{Job: &sm.Reply{OK: true, Jobs: []queue.Job{{ID: 7}}, Deduplicated: []bool{true}}}
		}, &n
	}
	opt := client.Options{KeyedAttempts: 4, KeyedRetryBase: time.Millisecond}
	single := func(key string) func(context.Context, *client.Client) (*schema.JobResponse, error) {
		return func(ctx context.Context, cl *client.Client) (*schema.JobResponse, error) {
			return cl.Submit(ctx, &schema.SubmitRequest{Queue: "q", Payload: []byte("x"), IdempotencyKey: key})
		}
	}
	batch := func(keys ...string) func(context.Context, *client.Client) (*schema.JobResponse, error) {
		return func(ctx context.Context, cl *client.Client) (*schema.JobResponse, error) {
			return cl.SubmitBatch(ctx, &schema.SubmitBatchRequest{Queue: "q", Payloads: [][]byte{[]byte("a"), []byte("b")}, IdempotencyKeys: keys})
		}
	}
	for _, c := range []struct {
		name    string
		fails   int32
		call    func(context.Context, *client.Client) (*schema.JobResponse, error)
		sends   int32
		wantErr error
	}{
		{"keyed: repeated until answered", 2, single("k1"), 3, nil},
		{"keyed: gives up after KeyedAttempts", 10, single("k1"), 4, client.ErrOutcomeUnknown},
		{"no key: sent once", 2, single(""), 1, client.ErrOutcomeUnknown},
		{"batch, every payload keyed: repeated", 1, batch("a", "b"), 2, nil},
		{"batch, a payload without a key: sent once", 1, batch("a", ""), 1, client.ErrOutcomeUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := startFake(t, true)
			d, n := unknownThenOK(c.fails)
			f.c.Nodes[0].Set(d)
			cl := newClient(t, f.peers(), f.mat, opt)
			rep, err := c.call(context.Background(), cl)
			if got := n.Load(); got != c.sends {
				t.Errorf("sent %d times, want %d", got, c.sends)
			}
			if c.wantErr == nil {
				if err != nil || len(rep.GetIds()) != 1 || rep.GetIds()[0] != 7 || len(rep.GetDeduplicated()) != 1 || !rep.GetDeduplicated()[0] {
					t.Fatalf("reply %v, err %v; want job 7, deduplicated", rep, err)
				}
				return
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
		})
	}

	// An attempt whose outcome is unknown may have been applied, so a
	// later definite refusal or "no primary" leaves the submit unknown.
	for _, last := range []struct {
		name  string
		reply *wire.Reply
	}{
		{"refused", &wire.Reply{Status: sm.StatusEEXIST, Error: "idempotency key already used for a different job"}},
		{"not primary", &wire.Reply{Status: sm.StatusEAGAIN, Error: "Not primary — redirect to primary", NotPrimary: true}},
	} {
		t.Run("unknown then "+last.name, func(t *testing.T) {
			f := startFake(t, true)
			var n atomic.Int32
			f.c.Nodes[0].Set(func(req *wire.Request) *wire.Reply {
				if req.Job == nil {
					return okReply(req)
				}
				if n.Add(1) == 1 {
					return unknownReply(req)
				}
				return last.reply
			})
			cl := newClient(t, f.peers(), f.mat, opt)
			_, err := single("k1")(context.Background(), cl)
			if !errors.Is(err, client.ErrOutcomeUnknown) || n.Load() < 2 {
				t.Fatalf("err %v after %d sends, want ErrOutcomeUnknown after at least 2", err, n.Load())
			}
		})
	}

	// A refusal (the key reused for another payload) is definite.
	f := startFake(t, true)
	var n atomic.Int32
	f.c.Nodes[0].Set(func(req *wire.Request) *wire.Reply {
		if req.Job == nil {
			return okReply(req)
		}
		n.Add(1)
		return &wire.Reply{Status: sm.StatusEEXIST, Error: "idempotency key already used for a different job"}
	})
	cl := newClient(t, f.peers(), f.mat, opt)
	_, err := single("k1")(context.Background(), cl)
	var ne *client.NodeError
	if !errors.As(err, &ne) || ne.Code().String() != "already_exists" || n.Load() != 1 {
		t.Fatalf("err %v after %d sends, want already_exists after 1", err, n.Load())
	}
}
