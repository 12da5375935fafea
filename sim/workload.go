package sim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
)

// The cluster world's client workload: a few clients, each with one
// request outstanding at a time, send job operations (seed 000) to the
// node they believe is primary through the whole run — the safety phase
// with every fault, the liveness phase, the primary kill — and the
// durability checker (durability.go) and porcupine (clusterlin.go) judge
// what they were told.

const (
	clientTimeout  = 2 * time.Second // no reply by then: the outcome is unknown
	clientMinDelay = 50 * time.Microsecond
	clientMaxDelay = time.Millisecond
	maxHeld        = 8  // handles a client keeps
	maxKnownIDs    = 64 // job ids kept as targets for cancel/get/redrive
)

// outcome is what a client knows of one request.
type outcome uint8

const (
	outPending outcome = iota // sent, no answer yet
	outOK                     // StatusOK: applied and durable (acknowledged)
	outRefused                // any other status but OutcomeUnknown: certainly not applied
	outUnknown                // timeout, connection reset, StatusOutcomeUnknown: maybe applied, maybe later
)

func (o outcome) String() string {
	return [...]string{"pending", "ok", "refused", "unknown"}[o]
}

// call is one request of the client history.
type call struct {
	id     uint64
	client int
	node   int    // the node it was sent to
	inc    int    // ... and that node's incarnation then
	term   uint64 // ... and its term then, if it was primary (0: it was not)
	// short: that primary could not commit when it was sent, too few of
	// its standbys synced for a majority (the rest install snapshots).
	short bool
	req   sm.JobRequest
	sent  time.Duration
	done  time.Duration // when the client learned the outcome (reply, timeout, reset)
	out   outcome
	rep   sm.Reply // the reply, when one reached the client in time
	// replied: the node emitted its reply (in flight in rep until it arrives).
	replied bool
}

// mayApply reports whether the call may have changed the state.
func (c *call) mayApply() bool { return c.out != outRefused }

// okAt reports whether the call may have applied with OK (for single-job
// operations: ack, cancel, retry, fail).
func (c *call) okAt() bool { return c.out != outRefused && (c.out != outOK || c.rep.OK) }

type heldHandle struct {
	h     queue.Handle
	queue string
}

type wlClient struct {
	id      int
	target  int   // the node it believes is primary; -1: none known
	cur     *call // the outstanding request
	handles []heldHandle
	// The flooder (nemesis.go) sends bursts without waiting: pending
	// holds its outstanding requests.
	flood   bool
	pending map[uint64]*call
	// resend is a keyed submit whose outcome was unknown (or that no
	// primary took), sent again next as the Go client repeats it, at most
	// maxResends times.
	resend  *sm.JobRequest
	resends int
}

// maxResends bounds the repeats of one keyed submit.
const maxResends = 4

// workload is the clients and everything they were told.
type workload struct {
	rng      *rand.Rand
	clients  []*wlClient
	calls    []*call // every request sent, in send order; id = index+1
	stopped  bool
	ids      []uint64 // job ids seen in replies
	payloads int
	led      ledger
	flood    *wlClient
	// The idempotency checker's reference (idempotency.go): the payloads
	// sent with a key, and what replies said of each.
	keyedSent map[string]bool
	keyed     map[string]*keyedJob
}

// client is the client of id (the flooder after the regular ones).
func (wl *workload) client(id int) *wlClient {
	if id < len(wl.clients) {
		return wl.clients[id]
	}
	return wl.flood
}

func newWorkload(sc Scenario) *workload {
	wl := &workload{rng: rand.New(rand.NewPCG(sc.Seed, 0xc11e)), led: newLedger(), keyedSent: map[string]bool{}, keyed: map[string]*keyedJob{}}
	for c := 0; c < sc.Clients; c++ {
		wl.clients = append(wl.clients, &wlClient{id: c, target: -1})
	}
	wl.flood = &wlClient{id: sc.Clients, target: -1, flood: true, pending: map[uint64]*call{}}
	return wl
}

func (wl *workload) report(r *Report) {
	r.ClientOps = len(wl.calls)
	for _, c := range wl.calls {
		if c.out == outUnknown {
			r.Unknown++
		}
	}
	r.Acked, r.AckedLost = wl.led.acked, len(wl.led.lost)
}

// idle reports whether no request is outstanding.
func (wl *workload) idle() bool {
	for _, cl := range wl.clients {
		if cl.cur != nil {
			return false
		}
	}
	return len(wl.flood.pending) == 0
}

// startWorkload wakes every client within the first second.
func (w *World) startWorkload() {
	for _, cl := range w.wl.clients {
		w.push(event{at: time.Duration(w.wl.rng.IntN(1000)) * time.Millisecond, kind: evClientWake, node: cl.id})
	}
}

func (w *World) linkDelay() time.Duration {
	return clientMinDelay + time.Duration(w.wl.rng.Int64N(int64(clientMaxDelay-clientMinDelay)))
}

// otherNode picks a node other than n at random (n itself when alone).
func (w *World) otherNode(n int) int {
	if w.sc.Nodes == 1 {
		return 0
	}
	o := w.wl.rng.IntN(w.sc.Nodes - 1)
	if o >= n {
		o++
	}
	return o
}

// clientWake sends client c's next request.
func (w *World) clientWake(c int) {
	wl := w.wl
	cl := wl.clients[c]
	if wl.stopped || cl.cur != nil {
		return
	}
	if cl.target < 0 {
		cl.target = wl.rng.IntN(w.sc.Nodes)
	}
	nd := w.nodes[cl.target]
	if !nd.up {
		// Connection refused: nothing was sent. Try another node.
		t := w.tr.begin(w.now, -1) // "c%d: n%d refused the connection", without Sprintf's string
		t.buf = append(strconv.AppendInt(append(t.buf, 'c'), int64(c), 10), ": n"...)
		t.buf = append(strconv.AppendInt(t.buf, int64(cl.target), 10), " refused the connection"...)
		t.end()
		cl.target = w.otherNode(cl.target)
		w.push(event{at: w.now + time.Duration(10+wl.rng.IntN(90))*time.Millisecond, kind: evClientWake, node: c})
		return
	}
	var req sm.JobRequest
	if cl.resend != nil {
		req, cl.resend = *cl.resend, nil
	} else {
		req, cl.resends = w.randomRequest(cl), 0
	}
	k := &call{id: uint64(len(wl.calls) + 1), client: c, node: cl.target, inc: nd.inc, req: req, sent: w.now}
	if nd.up && nd.node.Role() == sm.RolePrimary {
		k.term, k.short = nd.node.Term(), w.shortOfMajority(nd)
	}
	wl.calls = append(wl.calls, k)
	wl.noteKeyedSend(req)
	cl.cur = k
	t := w.tr.begin(w.now, -1)
	t.buf = fmt.Appendf(t.buf, "c%d -> n%d #%d ", c, k.node, k.id)
	t.buf = appendReq(t.buf, req)
	t.end()
	w.push(event{at: w.now + w.linkDelay(), kind: evClientReq, node: k.node, inc: k.inc, call: k.id})
	w.push(event{at: w.now + clientTimeout + req.Wait, kind: evClientGiveUp, call: k.id})
}

// deliverRequest hands call id to the node it was sent to, even if its
// client gave up meanwhile: a request the client no longer waits for may
// still be applied (that is what an unknown outcome means).
func (w *World) deliverRequest(nd *simNode, id uint64) {
	c := w.wl.calls[id-1]
	w.noteArrival(nd, c)
	w.deliver(nd.id, sm.ClientOp{ID: id, Req: c.req})
}

// nodeReply routes a Reply effect back to the client that sent the
// request; a reply nobody asked for is a bug in the node (S7).
func (w *World) nodeReply(nd *simNode, r sm.Reply) {
	wl := w.wl
	if r.ID == 0 || r.ID > uint64(len(wl.calls)) {
		w.violate("S7", "n%d replied to unknown request #%d", nd.id, r.ID)
		return
	}
	c := wl.calls[r.ID-1]
	switch {
	case c.node != nd.id:
		w.violate("S7", "n%d replied to request #%d, which was sent to n%d", nd.id, r.ID, c.node)
	case c.replied:
		w.violate("S7", "n%d replied twice to request #%d", nd.id, r.ID)
	default:
		c.replied, c.rep = true, r
		w.hc.noteSent(nd, c, r)
		w.push(event{at: w.now + w.linkDelay(), kind: evClientReply, call: c.id})
	}
}

// clientReply: the reply to call id reaches its client.
func (w *World) clientReply(id uint64) {
	c := w.wl.calls[id-1]
	if c.out != outPending {
		t := w.tr.begin(w.now, -1)
		t.buf = fmt.Appendf(t.buf, "c%d <- n%d #%d late reply ignored (%s): ", c.client, c.node, c.id, c.out)
		t.buf = appendRep(t.buf, c.rep)
		t.end()
		return
	}
	switch c.rep.Status {
	case sm.StatusOK:
		c.out = outOK
	case sm.StatusOutcomeUnknown:
		c.out = outUnknown
	default:
		c.out = outRefused
	}
	c.done = w.now
	t := w.tr.begin(w.now, -1)
	t.buf = fmt.Appendf(t.buf, "c%d <- n%d #%d %s: ", c.client, c.node, c.id, c.out)
	t.buf = appendRep(t.buf, c.rep)
	t.end()
	cl := w.wl.client(c.client)
	cl.cur = nil
	if c.out == outOK {
		w.observe(c)
		if keyed(c.req) && c.rep.Status == sm.StatusOK && w.wl.rng.IntN(8) == 0 {
			// A client that repeats an answered submit (a rerun
			// script): the key must make it the same job.
			cl.repeatKeyed(c)
		}
	}
	if cl.flood {
		delete(cl.pending, c.id)
		return
	}
	if c.rep.Status == sm.StatusEAGAIN || c.rep.Status == sm.StatusOutcomeUnknown {
		cl.repeatKeyed(c)
		// Follow the redirect; without one, try another node.
		if p := c.rep.Primary; p >= 0 && p < w.sc.Nodes && p != c.node {
			cl.target = p
		} else {
			cl.target = w.otherNode(c.node)
		}
	}
	w.think(cl)
}

// clientGiveUp: no reply within the timeout.
func (w *World) clientGiveUp(id uint64) {
	c := w.wl.calls[id-1]
	if c.out != outPending {
		return
	}
	w.unknown(c, fmt.Sprintf("no reply within %v", clientTimeout+c.req.Wait))
	w.checkAnswered(c)
	// The connection goes with the client (sm.ClientGone): a long poll it
	// left waiting must not claim a job for nobody.
	if nd := w.nodes[c.node]; c.req.Wait > 0 && nd.up && nd.inc == c.inc {
		w.deliver(nd.id, sm.ClientGone{ID: c.id})
	}
}

// processGone: node nd's process is dying. Requests it has not answered
// lose their connection: their outcome is unknown. Replies already sent
// still arrive, except when the machine lost power.
func (w *World) processGone(nd *simNode, power bool) {
	w.net.senderGone(nd.id) // its send queues die with it (link.go)
	for _, cl := range w.wl.clients {
		if c := cl.cur; c != nil && c.node == nd.id && c.inc == nd.inc && (!c.replied || power) {
			w.unknown(c, fmt.Sprintf("connection to n%d reset", nd.id))
		}
	}
	var gone []uint64
	for id, c := range w.wl.flood.pending {
		if c.node == nd.id && c.inc == nd.inc && (!c.replied || power) {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone) // the trace must not see map order
	for _, id := range gone {
		w.unknown(w.wl.flood.pending[id], fmt.Sprintf("connection to n%d reset", nd.id))
	}
}

func (w *World) unknown(c *call, why string) {
	c.out, c.done = outUnknown, w.now
	w.tr.line(w.now, -1, fmt.Sprintf("c%d #%d outcome unknown: %s", c.client, c.id, why))
	cl := w.wl.client(c.client)
	if cl.flood {
		delete(cl.pending, c.id)
		return
	}
	cl.cur = nil
	cl.repeatKeyed(c)
	cl.target = w.otherNode(c.node)
	w.think(cl)
}

// repeatKeyed makes a keyed submit without a definite answer the
// client's next request (its key makes the repeat safe).
func (cl *wlClient) repeatKeyed(c *call) {
	if keyed(c.req) && cl.resends < maxResends {
		cl.resends++
		req := c.req
		cl.resend = &req
	}
}

// keyed reports whether req is a submit whose every job has an
// idempotency key.
func keyed(req sm.JobRequest) bool {
	switch req.Kind {
	case sm.JobEnqueue:
		return req.Key != ""
	case sm.JobEnqueueBatch:
		return len(req.Keys) > 0 && !slices.Contains(req.Keys, "")
	}
	return false
}

// think schedules the client's next request: usually soon (concurrent
// with the other clients), sometimes seconds later, so claims lapse.
func (w *World) think(cl *wlClient) {
	r := w.wl.rng
	d := time.Duration(r.IntN(20)) * time.Millisecond
	if r.IntN(5) == 0 {
		d = time.Duration(r.IntN(2500)) * time.Millisecond
	}
	w.push(event{at: w.now + d, kind: evClientWake, node: cl.id})
}

// observe learns from an acknowledged reply: job ids, handles, acks.
func (w *World) observe(c *call) {
	wl := w.wl
	cl := wl.client(c.client)
	w.checkHandleReply(c)
	for i, j := range c.rep.Jobs {
		dedup := i < len(c.rep.Deduplicated) && c.rep.Deduplicated[i]
		w.noteKeyedJob(c, j, dedup)
		w.noteJob(c, j, dedup)
		if len(wl.ids) == 0 || wl.ids[len(wl.ids)-1] != j.ID {
			wl.ids = append(wl.ids, j.ID)
			if len(wl.ids) > maxKnownIDs {
				wl.ids = wl.ids[1:]
			}
		}
		if c.req.Kind == sm.JobClaim {
			cl.handles = append(cl.handles, heldHandle{h: j.Handle(), queue: j.Queue})
			if len(cl.handles) > maxHeld {
				cl.handles = cl.handles[1:]
			}
		}
	}
	switch c.req.Kind {
	case sm.JobAck:
		w.noteAcked(c, c.req.Handle, c.rep.OK)
		cl.drop(c.req.Handle)
	case sm.JobAckBatch, sm.JobClaim: // a claim's Handles are the acks it carries
		for i, h := range c.req.Handles {
			w.noteAcked(c, h, i < len(c.rep.OKs) && c.rep.OKs[i])
			cl.drop(h)
		}
	case sm.JobRetry, sm.JobFail:
		cl.drop(c.req.Handle)
	}
}

func (cl *wlClient) drop(h queue.Handle) {
	for i, x := range cl.handles {
		if x.h == h {
			cl.handles = append(cl.handles[:i], cl.handles[i+1:]...)
			return
		}
	}
}

// randomRequest draws one operation, weighted so that enqueue, claim and
// ack dominate; payloads are unique so every job can be identified.
func (w *World) randomRequest(cl *wlClient) sm.JobRequest {
	wl := w.wl
	r := wl.rng
	qname := func() string {
		if r.IntN(10) < 7 {
			return "q0"
		}
		return "q1"
	}
	payload := func() []byte {
		wl.payloads++
		p := []byte("p" + strconv.Itoa(wl.payloads))
		if pad := w.sc.PayloadPad; pad > 0 { // BUGGIFY: big records and snapshots
			p = append(append(p, '.'), bytes.Repeat([]byte{'x'}, pad)...)
		}
		return p
	}
	handle := func() queue.Handle {
		switch k := r.IntN(10); {
		case k < 8 && len(cl.handles) > 0:
			// usually one of its newest claims
			i := len(cl.handles) - 1 - min(r.IntN(3), len(cl.handles)-1)
			h := cl.handles[i].h
			if r.IntN(12) == 0 {
				// the same id and attempt from another record: what a lost
				// history's handle looks like (refused, unless that attempt's
				// claim was lost with its history and made again at that
				// very record: then it is the real handle)
				h.Claim = queue.ClaimStamp{Term: h.Claim.Term + uint64(r.IntN(2)), LSN: h.Claim.LSN + 1}
			}
			return h
		case k < 9:
			// someone else's claim: refused unless it lapsed and was reclaimed by ...nobody
			o := wl.clients[r.IntN(len(wl.clients))]
			if len(o.handles) > 0 {
				return o.handles[r.IntN(len(o.handles))].h
			}
		}
		return queue.Handle{ID: w.randomID(), Attempt: uint32(1 + r.IntN(2))}
	}
	switch k := r.IntN(104); {
	case k < 26:
		req := sm.JobRequest{Kind: sm.JobEnqueue, Queue: qname(), Payload: payload(), Priority: int32(r.IntN(3))}
		if r.IntN(8) == 0 {
			req.Delay = int64(1 + r.IntN(3))
		}
		if r.IntN(10) == 0 {
			req.Expires = int64(5 + r.IntN(60))
		}
		if r.IntN(10) == 0 {
			req.Host = "h1"
		}
		if r.IntN(3) == 0 { // a third carry an idempotency key, one per payload
			req.Key = idemKeyOf(req.Payload)
		}
		return req
	case k < 31:
		// With the jobs: the checkers judge each one as enqueued, and
		// checkHandleReply its id against the ids the API answers with.
		req := sm.JobRequest{Kind: sm.JobEnqueueBatch, Queue: qname(), Priority: int32(r.IntN(3)), WithJobs: true}
		for n := 2 + r.IntN(3); n > 0; n-- {
			req.Payloads = append(req.Payloads, payload())
		}
		if r.IntN(3) == 0 {
			for _, p := range req.Payloads {
				req.Keys = append(req.Keys, idemKeyOf(p))
			}
		}
		return req
	case k < 52:
		req := sm.JobRequest{Kind: sm.JobClaim, Queue: qname(), Host: []string{"h0", "h1"}[r.IntN(2)], Max: 1 + r.IntN(3)}
		// A third of the claims are a JSON caller's (sized for JSON, the
		// record saying so): from a draw made already, so that every
		// seed's schedule stays the one it was.
		req.JSON = req.Max == 2
		if r.IntN(3) == 0 { // a long poll (sm/longpoll.go), answered before the client gives up
			req.Wait = time.Duration(1+r.IntN(1500)) * time.Millisecond
		}
		if r.IntN(3) == 0 { // the acks of the batch before, carried on this claim
			for n := 1 + r.IntN(3); n > 0; n-- {
				req.Handles = append(req.Handles, handle())
			}
		}
		return req
	case k < 68:
		return sm.JobRequest{Kind: sm.JobAck, Handle: handle()}
	case k < 72:
		hs := []queue.Handle{handle(), handle()}
		if r.IntN(2) == 0 {
			hs = append(hs, handle())
		}
		return sm.JobRequest{Kind: sm.JobAckBatch, Handles: hs}
	case k < 77:
		return sm.JobRequest{Kind: sm.JobHeartbeat, Handle: handle()}
	case k < 81:
		req := sm.JobRequest{Kind: sm.JobRetry, Handle: handle(), Error: "retry"}
		if k == 80 { // a worker's own delay, from the draw made already
			req.RetryDelay = 2
		}
		return req
	case k < 84:
		return sm.JobRequest{Kind: sm.JobFail, Handle: handle(), Error: "boom"}
	case k < 87:
		return sm.JobRequest{Kind: sm.JobCancel, ID: w.randomID()}
	case k < 91:
		return sm.JobRequest{Kind: sm.JobGet, ID: w.randomID()}
	case k < 94:
		return sm.JobRequest{Kind: sm.JobList, Queue: []string{"q0", "q1", ""}[r.IntN(3)]}
	case k < 96:
		return sm.JobRequest{Kind: sm.JobRedrive, ID: w.randomID()}
	case k < 98:
		return sm.JobRequest{Kind: sm.JobSweep}
	case k < 100:
		return sm.JobRequest{Kind: sm.JobTick}
	case k < 102:
		// A schedule: ticks (the clients' and the primary's own) fire jobs
		// whose payload names it, so the checkers tell them apart.
		// The two longest intervals drawn are cron schedules instead (no
		// new draw: every seed keeps the rest of its schedule), one in a
		// zone, so the primary's tick, replay and the standbys' copies of
		// the log fire them as they fire the @every ones.
		name := fmt.Sprintf("s%d", r.IntN(2))
		spec := fmt.Sprintf("@every %ds", 2+r.IntN(10))
		switch spec {
		case "@every 10s":
			spec = "* * * * *"
		case "@every 11s":
			spec = "CRON_TZ=Europe/Berlin */2 * * * *"
		}
		return sm.JobRequest{Kind: sm.JobRegister, Name: name, Spec: spec, Queue: qname(), Payload: []byte(schedPrefix + name)}
	default:
		return sm.JobRequest{Kind: sm.JobUnregister, Name: fmt.Sprintf("s%d", r.IntN(2))}
	}
}

// schedPrefix starts the payload of every job a schedule fires: the same
// payload recurs, so the per-payload checkers (durability, porcupine)
// leave these jobs out; their ids still belong to them alone.
const schedPrefix = "sched-"

func isScheduled(payload string) bool { return strings.HasPrefix(payload, schedPrefix) }

// randomID is a job id seen in a reply, or now and then one nobody was
// told about (unknown, or lost).
func (w *World) randomID() uint64 {
	wl := w.wl
	if len(wl.ids) > 0 && wl.rng.IntN(8) > 0 {
		return wl.ids[wl.rng.IntN(len(wl.ids))]
	}
	top := uint64(1)
	if len(wl.ids) > 0 {
		top = wl.ids[len(wl.ids)-1]
	}
	return 1 + uint64(wl.rng.Int64N(int64(top)+3))
}

// appendPayload appends a payload, a padded one (Scenario.PayloadPad) as
// its key and its length.
func appendPayload(b, p []byte) []byte {
	if i := bytes.IndexByte(p, '.'); i >= 0 {
		b = append(b, p[:i]...)
		b = append(b, '+')
		b = strconv.AppendInt(b, int64(len(p)-i), 10)
		return append(b, 'B')
	}
	return append(b, p...)
}

// describeReq renders a request on one trace line.
func describeReq(q sm.JobRequest) string { return string(appendReq(nil, q)) }

// appendReq appends describeReq(q). The trace renders every request and
// reply: with strconv instead of fmt, a line costs no boxing and no
// intermediate strings (the bytes are the ones fmt gave).
func appendReq(b []byte, q sm.JobRequest) []byte {
	b = append(b, q.Kind.String()...)
	switch q.Kind {
	case sm.JobEnqueue:
		b = append(b, ' ')
		b = append(b, q.Queue...)
		b = append(b, ' ')
		b = appendPayload(b, q.Payload)
		if q.Key != "" {
			b = append(b, " key"...)
		}
		b = append(b, " prio="...)
		b = strconv.AppendInt(b, int64(q.Priority), 10)
		if q.Delay != 0 || q.Expires != 0 || q.Host != "" {
			b = append(b, " delay="...)
			b = strconv.AppendInt(b, q.Delay, 10)
			b = append(b, " expires="...)
			b = strconv.AppendInt(b, q.Expires, 10)
			b = append(b, " pin="...)
			b = strconv.AppendQuote(b, q.Host)
		}
	case sm.JobEnqueueBatch:
		b = append(b, ' ')
		b = append(b, q.Queue...)
		for _, p := range q.Payloads {
			b = append(b, ' ')
			b = appendPayload(b, p)
		}
		if len(q.Keys) > 0 {
			b = append(b, " keys"...)
		}
	case sm.JobClaim:
		b = append(b, ' ')
		b = append(b, q.Queue...)
		b = append(b, " host="...)
		b = append(b, q.Host...)
		b = append(b, " max="...)
		b = strconv.AppendInt(b, int64(q.Max), 10)
		if q.Wait > 0 {
			b = append(b, " wait="...)
			b = append(b, q.Wait.String()...)
		}
		for _, h := range q.Handles {
			b = append(b, " ack="...)
			b = appendHandle(b, h)
		}
	case sm.JobAck, sm.JobHeartbeat, sm.JobRetry, sm.JobFail:
		b = append(b, ' ')
		b = appendHandle(b, q.Handle)
		if q.RetryDelay != 0 {
			b = append(b, " delay="...)
			b = strconv.AppendInt(b, q.RetryDelay, 10)
		}
	case sm.JobAckBatch:
		for _, h := range q.Handles {
			b = append(b, ' ')
			b = appendHandle(b, h)
		}
	case sm.JobCancel, sm.JobGet, sm.JobRedrive:
		b = append(b, ' ')
		b = strconv.AppendUint(b, q.ID, 10)
	case sm.JobList:
		b = append(b, ' ')
		b = strconv.AppendQuote(b, q.Queue)
	case sm.JobRegister:
		b = append(b, ' ')
		b = append(b, q.Name...)
		b = append(b, ' ')
		b = strconv.AppendQuote(b, q.Spec)
		b = append(b, ' ')
		b = append(b, q.Queue...)
	case sm.JobUnregister:
		b = append(b, ' ')
		b = append(b, q.Name...)
	}
	return b
}

// describeRep renders a reply on one trace line (jobs as id/state/payload).
func describeRep(r sm.Reply) string { return string(appendRep(nil, r)) }

// appendRep appends describeRep(r).
func appendRep(b []byte, r sm.Reply) []byte {
	b = append(b, "status="...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	if r.Status != sm.StatusOK {
		b = append(b, " primary="...)
		b = strconv.AppendInt(b, int64(r.Primary), 10)
		b = append(b, ' ')
		return strconv.AppendQuote(b, r.Error)
	}
	b = append(b, " ok="...)
	b = strconv.AppendBool(b, r.OK)
	b = append(b, " lsn="...)
	b = strconv.AppendUint(b, r.LSN, 10)
	b = append(b, " at="...)
	b = strconv.AppendInt(b, r.At, 10)
	if r.OKs != nil {
		b = append(b, " oks=["...)
		for i, ok := range r.OKs {
			if i > 0 {
				b = append(b, ' ')
			}
			b = strconv.AppendBool(b, ok)
		}
		b = append(b, ']')
	}
	if r.Moved != 0 || r.Deleted != 0 {
		b = append(b, " moved="...)
		b = strconv.AppendInt(b, int64(r.Moved), 10)
		b = append(b, " deleted="...)
		b = strconv.AppendInt(b, int64(r.Deleted), 10)
	}
	const show = 6
	for i, j := range r.Jobs {
		if i == show {
			b = append(b, " ...+"...)
			b = strconv.AppendInt(b, int64(len(r.Jobs)-show), 10)
			break
		}
		b = append(b, ' ')
		b = strconv.AppendUint(b, j.ID, 10)
		b = append(b, '/')
		b = append(b, j.State.String()...)
		b = append(b, "/a"...)
		b = strconv.AppendUint(b, uint64(j.Attempts), 10)
		b = append(b, '/')
		b = append(b, j.Payload...)
	}
	return b
}
