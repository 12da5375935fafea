package sm

import (
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm/queue"
)

// Replay applies a record as the live path does: on triplet states, each
// record of a random history (every operation, names the config no
// longer has, bad stamps, valid and stale handles, time going back,
// batches with repeated idempotency keys) gives the same error, the same
// lost_and_found routing and WARN lines, and the same state through
// replayApply (no reply) and through apply with a reply of ids
// (replyIDs, the API's) as through applyRecord; and the reply of ids is
// the whole reply without an enqueue batch's Jobs, whose ids it names in
// order, one per payload.
func TestReplayApplyIsApplyRecord(t *testing.T) {
	cfg := &schema.ClusterConfig{
		Queues:    []*schema.Queue{{Id: 1, Name: "a", VisibilityTimeoutS: 5, MaxAttempts: 2}, {Id: 2, Name: "b", VisibilityTimeoutS: 9, MaxAttempts: 3, DeadLetterRetentionS: 20}},
		Hosts:     []*schema.Host{{Name: "h1"}, {Name: "h2"}},
		Resources: []*schema.Resource{{Id: 1, Name: "gpu"}},
	}
	rapid.Check(t, func(t *rapid.T) {
		live, replay, idsOnly := queue.New(), queue.New(), queue.New()
		rl, rr, ri := newRouter(cfg), newRouter(cfg), newRouter(cfg)
		var wl, wr, wi []routeWarning
		rl.warn = func(what, id string) { wl = append(wl, routeWarning{what, id}) }
		rr.warn = func(what, id string) { wr = append(wr, routeWarning{what, id}) }
		ri.warn = func(what, id string) { wi = append(wi, routeWarning{what, id}) }
		var handles []*schema.WalHandle
		now := int64(1_000_000)
		queues := rapid.SampledFrom([]string{"a", "a", "b", "gone", LostAndFound})
		hosts := rapid.SampledFrom([]string{"", "h1", "h2", "h9"})
		stamps := func() *schema.WalStamps {
			return &schema.WalStamps{VisibilityTimeoutS: rapid.Uint32Range(0, 6).Draw(t, "vt"), MaxAttempts: rapid.Uint32Range(0, 3).Draw(t, "max attempts"),
				BackoffBaseS: rapid.Uint32Range(0, 3).Draw(t, "backoff"), DeadLetterRetentionS: rapid.Uint32Range(0, 10).Draw(t, "retention")}
		}
		handle := func() *schema.WalHandle {
			if len(handles) > 0 && rapid.IntRange(0, 3).Draw(t, "made-up handle") != 0 {
				return rapid.SampledFrom(handles).Draw(t, "handle")
			}
			return &schema.WalHandle{Id: rapid.Uint64Range(0, 20).Draw(t, "id"), Attempt: rapid.Uint32Range(0, 3).Draw(t, "attempt")}
		}
		for i, n := 0, rapid.IntRange(1, 80).Draw(t, "records"); i < n; i++ {
			now += rapid.Int64Range(-3, 8).Draw(t, "advance")
			rec := &schema.WalRecord{Lsn: uint64(i + 1), Term: 1, Now: now}
			switch rapid.IntRange(0, 14).Draw(t, "op") {
			case 0, 1, 2:
				rec.Op = &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: queues.Draw(t, "queue"), Payload: rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "payload"),
					Stamps: stamps(), Priority: rapid.Int32Range(-1, 1).Draw(t, "priority"), Delay: rapid.Int64Range(-1, 10).Draw(t, "delay"),
					RunAt: now + rapid.Int64Range(-5, 5).Draw(t, "run at"), Expires: rapid.Int64Range(-1, 30).Draw(t, "expires"),
					Resource: rapid.Uint32Range(0, 2).Draw(t, "resource"), Host: hosts.Draw(t, "pin")}}
			case 3:
				b := &schema.WalEnqueueBatch{Queue: queues.Draw(t, "queue"),
					Payloads: rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 2), 0, 4).Draw(t, "payloads"), Stamps: stamps(),
					Delay: rapid.Int64Range(-1, 3).Draw(t, "delay"), Host: hosts.Draw(t, "pin")}
				if rapid.Bool().Draw(t, "keyed") {
					// Few keys, payloads and options: a repeat names an
					// earlier job (or is refused: another payload).
					b.Queue, b.Delay, b.Host, b.IdempotencyWindowS = "a", 0, "", 60
					b.Stamps = &schema.WalStamps{VisibilityTimeoutS: 5, MaxAttempts: 2}
					for k := range b.Payloads {
						b.Payloads[k] = []byte(rapid.SampledFrom([]string{"x", "y"}).Draw(t, "keyed payload"))
						b.IdempotencyKeys = append(b.IdempotencyKeys, rapid.SampledFrom([]string{"", "k1", "k2", "k3"}).Draw(t, "key"))
					}
				}
				rec.Op = &schema.WalRecord_EnqueueBatch{EnqueueBatch: b}
			case 4, 5, 6:
				rec.Op = &schema.WalRecord_ClaimBatch{ClaimBatch: &schema.WalClaimBatch{Queue: queues.Draw(t, "queue"), Host: hosts.Draw(t, "host"), Max: rapid.Uint32Range(0, 3).Draw(t, "max"),
					Json: rapid.Bool().Draw(t, "json")}}
			case 7:
				rec.Op = &schema.WalRecord_Ack{Ack: &schema.WalAck{Handle: handle()}}
			case 8:
				hs := make([]*schema.WalHandle, rapid.IntRange(0, 3).Draw(t, "handles"))
				for k := range hs {
					hs[k] = handle()
				}
				rec.Op = &schema.WalRecord_AckBatch{AckBatch: &schema.WalAckBatch{Handles: hs}}
			case 9:
				rec.Op = &schema.WalRecord_Heartbeat{Heartbeat: &schema.WalHeartbeat{Handle: handle()}}
			case 10:
				rec.Op = &schema.WalRecord_Retry{Retry: &schema.WalRetry{Handle: handle(), Error: "exit 1"}}
			case 11:
				rec.Op = &schema.WalRecord_Fail{Fail: &schema.WalFail{Handle: handle()}}
			case 12:
				rec.Op = &schema.WalRecord_SweepExpired{SweepExpired: &schema.WalSweepExpired{}}
			case 13:
				rec.Op = &schema.WalRecord_Redrive{Redrive: &schema.WalRedrive{Id: rapid.Uint64Range(0, 20).Draw(t, "id")}}
			case 14: // no op: refused
			}
			rep, lerr := applyRecord(live, rl, rec)
			rerr := replayApply(replay, rr, rec)
			irep, ierr := apply(idsOnly, ri, rec, replyIDs)
			if fmt.Sprint(lerr) != fmt.Sprint(rerr) || fmt.Sprint(lerr) != fmt.Sprint(ierr) {
				t.Fatalf("record %d (%v): applyRecord: %v, replayApply: %v, replyIDs: %v", i, rec, lerr, rerr, ierr)
			}
			if rl.routed != rr.routed || !reflect.DeepEqual(wl, wr) || rl.routed != ri.routed || !reflect.DeepEqual(wl, wi) {
				t.Fatalf("record %d (%v): routed %d, warnings %v; replay: routed %d, warnings %v; replyIDs: routed %d, warnings %v", i, rec, rl.routed, wl, rr.routed, wr, ri.routed, wi)
			}
			gl := live.Export()
			if gr, gi := replay.Export(), idsOnly.Export(); !reflect.DeepEqual(gl, gr) || !reflect.DeepEqual(gl, gi) {
				t.Fatalf("record %d (%v): states differ\napplyRecord %+v\nreplayApply %+v\nreplyIDs %+v", i, rec, gl, gr, gi)
			}
			b, batch := rec.GetOp().(*schema.WalRecord_EnqueueBatch)
			switch {
			case lerr != nil: // a refused record's reply is never read
			case batch:
				if len(rep.IDs) != len(b.EnqueueBatch.GetPayloads()) || len(rep.Jobs) != len(rep.IDs) {
					t.Fatalf("record %d (%v): %d ids and %d jobs for %d payloads", i, rec, len(rep.IDs), len(rep.Jobs), len(b.EnqueueBatch.GetPayloads()))
				}
				for k, j := range rep.Jobs {
					if rep.IDs[k] != j.ID {
						t.Fatalf("record %d (%v): id %d is %d, its job %d", i, rec, k, rep.IDs[k], j.ID)
					}
				}
				whole := rep
				whole.Jobs = nil
				if !reflect.DeepEqual(whole, irep) {
					t.Fatalf("record %d (%v): the reply of ids %+v, the whole one without its jobs %+v", i, rec, irep, whole)
				}
			case !reflect.DeepEqual(rep, irep):
				t.Fatalf("record %d (%v): replyIDs %+v, applyRecord %+v", i, rec, irep, rep)
			}
			if _, ok := rec.GetOp().(*schema.WalRecord_ClaimBatch); ok {
				for _, j := range rep.Jobs {
					handles = append(handles, WalHandle(j.Handle()))
				}
			}
		}
	})
}

// The router's memory of the queue and host it found known last changes
// no answer: over any sequence of names, each is known exactly when a
// fresh router (nothing remembered) knows it.
func TestRouterKnownIsFresh(t *testing.T) {
	for _, cfg := range []*schema.ClusterConfig{
		{Queues: []*schema.Queue{{Id: 1, Name: "a"}, {Id: 2, Name: "b"}}, Hosts: []*schema.Host{{Name: "h1"}, {Name: "h2"}}},
		{Queues: []*schema.Queue{{Id: 1, Name: ""}}}, // no hosts: any host is known
	} {
		rapid.Check(t, func(t *rapid.T) {
			r := newRouter(cfg)
			names := rapid.SampledFrom([]string{"", "a", "b", "h1", "h2", "gone", LostAndFound})
			for i, n := 0, rapid.IntRange(1, 30).Draw(t, "n"); i < n; i++ {
				name := names.Draw(t, "name")
				if got, want := r.knownQueue(name), newRouter(cfg).knownQueue(name); got != want {
					t.Fatalf("step %d: knownQueue(%q) = %v, a fresh router says %v", i, name, got, want)
				}
				if got, want := r.knownHost(name), newRouter(cfg).knownHost(name); got != want {
					t.Fatalf("step %d: knownHost(%q) = %v, a fresh router says %v", i, name, got, want)
				}
			}
		})
	}
}
