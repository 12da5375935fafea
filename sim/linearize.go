package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/anishathalye/porcupine"

	"xce/schema"
	"xce/sm"
	"xce/sm/queue"
)

// jobInput / jobOutput are what porcupine sees of one client call.
type jobInput struct {
	req       sm.JobRequest
	now       int64
	term, lsn uint64 // the record it was (or would be) logged as
}

type jobOutput struct {
	known bool // false: the node crashed before answering
	rep   sm.Reply
}

// jobModel is the sequential specification: the controller's own apply
// path (sm.ApplyJob) on a copy of the state. An operation with unknown
// outcome may be linearized anywhere, including never observed.
func jobModel(cfg *schema.ClusterConfig) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return queue.New().Export() },
		Step: func(state, input, output any) (bool, any) {
			s := state.(queue.Snapshot)
			in := input.(jobInput)
			out := output.(jobOutput)
			q, err := queue.Import(s)
			if err != nil {
				return false, state
			}
			rep := sm.ApplyJob(q, cfg, in.term, in.lsn, in.now, in.req)
			if out.known && !sameOutcome(rep, out.rep) {
				return false, state
			}
			return true, q.Export()
		},
		Equal: func(a, b any) bool { return reflect.DeepEqual(a, b) },
		DescribeOperation: func(input, output any) string {
			in, out := input.(jobInput), output.(jobOutput)
			res := "?"
			if out.known {
				res = fmt.Sprintf("ok=%v oks=%v jobs=%v", out.rep.OK, out.rep.OKs, jobIDs(out.rep.Jobs))
			}
			return fmt.Sprintf("%s@%d %+v -> %s", in.req.Kind, in.now, in.req.Handle, res)
		},
	}
}

func jobIDs(js []queue.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = fmt.Sprintf("%d/%s/a%d", j.ID, j.State, j.Attempts)
	}
	return out
}

// sameOutcome compares what a client can observe.
func sameOutcome(a, b sm.Reply) bool {
	if a.Status != b.Status || a.OK != b.OK || !reflect.DeepEqual(a.OKs, b.OKs) || a.Moved != b.Moved || a.Deleted != b.Deleted {
		return false
	}
	if len(a.Jobs) != len(b.Jobs) {
		return false
	}
	for i := range a.Jobs {
		if !reflect.DeepEqual(a.Jobs[i], b.Jobs[i]) {
			return false
		}
	}
	return true
}

// checkLinearizable checks the client history with porcupine; refused
// calls (not primary, recovering, bad input) never happened and are left
// out. On failure it writes porcupine's HTML visualization.
func (w *JobWorld) checkLinearizable() {
	var hist []porcupine.Operation
	end := int64(w.now) + 1
	for _, c := range w.calls {
		if c.refused || w.reconf > 0 && c.call >= w.reconf {
			continue // after a config change the model's config no longer applies
		}
		op := porcupine.Operation{ClientId: c.client, Input: jobInput{req: c.req, now: c.now, term: c.term, lsn: c.lsn}, Call: int64(c.call)}
		if c.ret < 0 || c.ret == 0 && c.reply.ID == 0 {
			op.Output, op.Return = jobOutput{}, end
		} else {
			op.Output, op.Return = jobOutput{known: true, rep: c.reply}, int64(c.ret)
		}
		hist = append(hist, op)
	}
	model := jobModel(jobConfig(false)) // the config before any change
	res, info := porcupine.CheckOperationsVerbose(model, hist, 20*time.Second)
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		w.tr.line(w.now, -1, "porcupine: timed out (inconclusive)")
	default:
		path := filepath.Join(os.TempDir(), fmt.Sprintf("xce-jobs-%d.html", w.sc.Seed))
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			path = "(visualization failed: " + err.Error() + ")"
		}
		w.violate("S5", "client history of %d operations is not linearizable; porcupine visualization: %s", len(hist), path)
	}
}
