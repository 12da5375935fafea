package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// TestMirrorSharesDurableBytes: the durable-log mirror and its frame cache
// keep the disk's own bytes of a segment (they never change) instead of a
// copy per fsync, which made every fsync of a segment cost its whole size,
// and the cache decodes only the appended frames.
func TestMirrorSharesDurableBytes(t *testing.T) {
	d := simdisk.New()
	p := wal.SegmentPath(1)
	appendSync := func(b []byte) {
		t.Helper()
		for _, op := range []sm.FileOp{{Op: sm.OpAppend, Path: p, Data: b}, {Op: sm.OpFsync, Path: p}, {Op: sm.OpFsyncDir, Path: wal.WALDir}} {
			if r := d.Exec(op, epoch); r.Err != sm.IOOK {
				t.Fatalf("%s %s: %v %s", op.Op, op.Path, r.Err, r.Detail)
			}
		}
	}
	if r := d.Exec(sm.FileOp{Op: sm.OpMkdir, Path: sm.DataDir}, epoch); r.Err != sm.IOOK {
		t.Fatal(r.Detail)
	}
	if r := d.Exec(sm.FileOp{Op: sm.OpMkdir, Path: wal.WALDir}, epoch); r.Err != sm.IOOK {
		t.Fatal(r.Detail)
	}
	d.Exec(sm.FileOp{Op: sm.OpFsyncDir, Path: ""}, epoch)
	d.Exec(sm.FileOp{Op: sm.OpFsyncDir, Path: sm.DataDir}, epoch)
	appendSync(frames(t, [2]uint64{1, 1}, [2]uint64{2, 1}))
	var m durMirror
	var c frameCache
	m.sync(d, nil)
	if v := m.read(&c, nil); v.lastLSN() != 2 {
		t.Fatalf("mirror reads up to LSN %d, want 2", v.lastLSN())
	}
	for lsn := uint64(3); lsn < 6; lsn++ {
		appendSync(frames(t, [2]uint64{lsn, 1}))
		op := sm.FileOp{Op: sm.OpFsync, Path: p}
		m.sync(d, &op)
		v := m.read(&c, nil)
		if v.lastLSN() != lsn {
			t.Fatalf("mirror reads up to LSN %d, want %d", v.lastLSN(), lsn)
		}
		disk, _ := d.DurableData(p)
		if f := m.files[p]; &f.data[0] != &disk[0] {
			t.Fatalf("after LSN %d: the mirror holds a copy of %s", lsn, p)
		}
		if sp := c.segs[wal.SegmentName(1)]; &sp.data[0] != &disk[0] || len(sp.recs) != int(lsn) {
			t.Fatalf("after LSN %d: the frame cache holds a copy, or %d records", lsn, len(sp.recs))
		}
	}
}

// TestEvHeapOrder: events pop in (at, seq) order under interleaved pushes
// and pops, each event whole (its pointers too), and a popped event's
// slot is reused, so the slots never outgrow the most events queued at
// once.
func TestEvHeapOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var h evHeap
	var seq uint64
	var want []event
	most := 0
	var last evKey
	for step := 0; step < 20000; step++ {
		if h.len() == 0 || r.IntN(3) > 0 {
			seq++
			nf := &NetFault{Dur: time.Duration(seq)}
			e := event{at: time.Duration(r.IntN(1000)), seq: seq, node: int(seq % 5), nf: nf}
			if e.at < last.at {
				e.at = last.at // nothing is scheduled in the past
			}
			h.push(e)
			want = append(want, e)
			most = max(most, h.len())
			continue
		}
		e := h.pop()
		if k := (evKey{at: e.at, seq: e.seq}); k.less(last) {
			t.Fatalf("popped (%v, %d) after (%v, %d)", e.at, e.seq, last.at, last.seq)
		}
		last = evKey{at: e.at, seq: e.seq}
		i := slices.IndexFunc(want, func(x event) bool { return x.seq == e.seq })
		if i < 0 || want[i] != e || e.nf.Dur != time.Duration(e.seq) {
			t.Fatalf("popped event seq %d is not the one pushed", e.seq)
		}
		for _, x := range want {
			if (evKey{at: x.at, seq: x.seq}).less(last) {
				t.Fatalf("popped (%v, %d) while (%v, %d) was queued", e.at, e.seq, x.at, x.seq)
			}
		}
		want = slices.Delete(want, i, i+1)
	}
	if len(h.slots) > most {
		t.Fatalf("%d slots for at most %d events queued", len(h.slots), most)
	}
}

// TestTermParseCached: the parse of data/term is redone only when the
// disk holds another slice for it, and gives what sm.ParseTermVote gives.
func TestTermParseCached(t *testing.T) {
	var c termParse
	a := []byte("3 1\n") // (without the checksum a newer version appends)
	if tm, v, err := c.parse(a); tm != 3 || v != 1 || err != nil {
		t.Fatalf("parse: %d %d %v", tm, v, err)
	}
	// The same slice is not parsed again (here its bytes did change, which
	// a disk never does, to see that).
	copy(a, "4 1\n")
	if tm, _, _ := c.parse(a); tm != 3 {
		t.Fatalf("the same slice was parsed again: term %d", tm)
	}
	b := []byte("5 2\n")
	if tm, v, err := c.parse(b); tm != 5 || v != 2 || err != nil {
		t.Fatalf("another slice: %d %d %v", tm, v, err)
	}
	if _, _, err := c.parse([]byte("garbage")); err == nil {
		t.Fatal("garbage parsed")
	}
}

// TestCheckHistoryReportsLoss: with the quick check first and the verbose
// one only after a failure, a history that does not linearize still fails
// S5 naming the job, with the visualization written.
func TestCheckHistoryReportsLoss(t *testing.T) {
	w := NewWorld(Demo(1), nil)
	if _, f := w.Run(); f != nil {
		t.Fatal(f.Error())
	}
	x := w.excuses()
	lost := slices.IndexFunc(w.final, func(j queue.Job) bool { return !x.excused(j) && !x.removable[j.ID] })
	if lost < 0 {
		t.Fatal("no job in the final state to lose")
	}
	dropped := slices.Delete(slices.Clone(w.final), lost, lost+1)
	w.checkHistory(dropped, w.now)
	path := filepath.Join(os.TempDir(), fmt.Sprintf("xce-sim-%d.html", w.sc.Seed))
	t.Cleanup(func() { os.Remove(path) })
	wantViolation(t, w, "S5", "job "+string(w.final[lost].Payload)+"'s")
	if !strings.Contains(w.fail.Detail, "porcupine visualization: "+path) {
		t.Fatalf("no visualization in %q", w.fail.Detail)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("visualization: %v", err)
	}
}

// TestMirrorNamesFollowFiles: the mirror's cached names and plan follow a
// segment that comes (a roll) and one that goes (after a checkpoint): its
// view is readLog's of the disk after every step.
func TestMirrorNamesFollowFiles(t *testing.T) {
	d := simdisk.New()
	exec := func(ops ...sm.FileOp) {
		t.Helper()
		for _, op := range ops {
			if r := d.Exec(op, epoch); r.Err != sm.IOOK {
				t.Fatalf("%s %s: %v %s", op.Op, op.Path, r.Err, r.Detail)
			}
		}
	}
	exec(sm.FileOp{Op: sm.OpMkdir, Path: sm.DataDir}, sm.FileOp{Op: sm.OpMkdir, Path: wal.WALDir},
		sm.FileOp{Op: sm.OpFsyncDir, Path: ""}, sm.FileOp{Op: sm.OpFsyncDir, Path: sm.DataDir})
	var m durMirror
	var c frameCache
	m.sync(d, nil)
	check := func(op sm.FileOp, want uint64) {
		t.Helper()
		m.sync(d, &op)
		got := m.read(&c, nil)
		ref := readLog(d, true, &frameCache{})
		if got.lastLSN() != want || ref.lastLSN() != want || got.snapLSN != ref.snapLSN {
			t.Fatalf("after %s %s: mirror to LSN %d, readLog to %d, want %d", op.Op, op.Path, got.lastLSN(), ref.lastLSN(), want)
		}
	}
	seg1, seg3 := wal.SegmentPath(1), wal.SegmentPath(3)
	exec(sm.FileOp{Op: sm.OpAppend, Path: seg1, Data: frames(t, [2]uint64{1, 1}, [2]uint64{2, 1})}, sm.FileOp{Op: sm.OpFsync, Path: seg1})
	check(sm.FileOp{Op: sm.OpFsync, Path: seg1}, 0) // the file's entry is not durable yet
	exec(sm.FileOp{Op: sm.OpFsyncDir, Path: wal.WALDir})
	check(sm.FileOp{Op: sm.OpFsyncDir, Path: wal.WALDir}, 2)
	exec(sm.FileOp{Op: sm.OpAppend, Path: seg3, Data: frames(t, [2]uint64{3, 1})}, sm.FileOp{Op: sm.OpFsync, Path: seg3}, sm.FileOp{Op: sm.OpFsyncDir, Path: wal.WALDir})
	check(sm.FileOp{Op: sm.OpFsyncDir, Path: wal.WALDir}, 3)
	exec(sm.FileOp{Op: sm.OpAppend, Path: seg3, Data: frames(t, [2]uint64{4, 1})}, sm.FileOp{Op: sm.OpFsync, Path: seg3})
	check(sm.FileOp{Op: sm.OpFsync, Path: seg3}, 4)
	// Without the first segment the log starts at LSN 3: no snapshot
	// covers 1..2, so recovery finds a gap and the view ends before it.
	exec(sm.FileOp{Op: sm.OpRemove, Path: seg1}, sm.FileOp{Op: sm.OpFsyncDir, Path: wal.WALDir})
	check(sm.FileOp{Op: sm.OpFsyncDir, Path: wal.WALDir}, 0)
	if _, ok := m.files[seg1]; ok {
		t.Fatal("the mirror keeps a removed segment")
	}
}

// TestTraceTextIsFmts: the strconv renderings of requests, replies and
// handles are byte for byte what the fmt ones they replace gave (the
// trace hash covers them), on every kind and the odd values.
func TestTraceTextIsFmts(t *testing.T) {
	refHandle := func(h queue.Handle) string {
		return fmt.Sprintf("%d:%d:%d.%d", h.ID, h.Attempt, h.Claim.Term, h.Claim.LSN)
	}
	refPayload := func(p []byte) string {
		if i := strings.IndexByte(string(p), '.'); i >= 0 {
			return fmt.Sprintf("%s+%dB", p[:i], len(p)-i)
		}
		return string(p)
	}
	refReq := func(q sm.JobRequest) string {
		s := q.Kind.String()
		switch q.Kind {
		case sm.JobEnqueue:
			s += fmt.Sprintf(" %s %s prio=%d", q.Queue, refPayload(q.Payload), q.Priority)
			if q.Delay != 0 || q.Expires != 0 || q.Host != "" {
				s += fmt.Sprintf(" delay=%d expires=%d pin=%q", q.Delay, q.Expires, q.Host)
			}
		case sm.JobEnqueueBatch:
			s += " " + q.Queue
			for _, p := range q.Payloads {
				s += " " + refPayload(p)
			}
		case sm.JobClaim:
			s += fmt.Sprintf(" %s host=%s max=%d", q.Queue, q.Host, q.Max)
			if q.Wait > 0 {
				s += fmt.Sprintf(" wait=%v", q.Wait)
			}
			for _, h := range q.Handles {
				s += " ack=" + refHandle(h)
			}
		case sm.JobAck, sm.JobHeartbeat, sm.JobRetry, sm.JobFail:
			s += " " + refHandle(q.Handle)
		case sm.JobAckBatch:
			for _, h := range q.Handles {
				s += " " + refHandle(h)
			}
		case sm.JobCancel, sm.JobGet, sm.JobRedrive:
			s += fmt.Sprintf(" %d", q.ID)
		case sm.JobList:
			s += fmt.Sprintf(" %q", q.Queue)
		case sm.JobRegister:
			s += fmt.Sprintf(" %s %q %s", q.Name, q.Spec, q.Queue)
		case sm.JobUnregister:
			s += " " + q.Name
		}
		return s
	}
	refRep := func(r sm.Reply) string {
		s := fmt.Sprintf("status=%d", r.Status)
		if r.Status != sm.StatusOK {
			return s + fmt.Sprintf(" primary=%d %q", r.Primary, r.Error)
		}
		s += fmt.Sprintf(" ok=%v lsn=%d at=%d", r.OK, r.LSN, r.At)
		if r.OKs != nil {
			s += fmt.Sprintf(" oks=%v", r.OKs)
		}
		if r.Moved != 0 || r.Deleted != 0 {
			s += fmt.Sprintf(" moved=%d deleted=%d", r.Moved, r.Deleted)
		}
		for i, j := range r.Jobs {
			if i == 6 {
				s += fmt.Sprintf(" ...+%d", len(r.Jobs)-6)
				break
			}
			s += fmt.Sprintf(" %d/%s/a%d/%s", j.ID, j.State, j.Attempts, j.Payload)
		}
		return s
	}
	hs := []queue.Handle{{ID: 7, Attempt: 2, Claim: queue.ClaimStamp{Term: 3, LSN: 99}}, {ID: 1 << 63}}
	odd := "pin \"x\"\n\x00é"
	r := rand.New(rand.NewPCG(1, 2))
	for k := sm.JobKind(0); k < 40; k++ {
		for i := 0; i < 20; i++ {
			q := sm.JobRequest{Kind: k, Queue: []string{"q0", "", odd}[i%3], Payload: []byte([]string{"p1", "p2.xyz", ""}[i%3]),
				Payloads: [][]byte{[]byte("a.b"), []byte("c")}, Priority: int32(r.IntN(7) - 3), Delay: int64(i % 2), Expires: int64(i % 3 * 5),
				Host: []string{"", "h1", odd}[i%3], Max: r.IntN(9), Handle: hs[i%2], Handles: hs[:i%3], ID: r.Uint64(),
				Name: "every10", Spec: []string{"@every 10s", odd}[i%2], Wait: time.Duration(r.IntN(3)) * 1500 * time.Millisecond}
			if got, want := describeReq(q), refReq(q); got != want {
				t.Fatalf("request %+v:\n got %q\nwant %q", q, got, want)
			}
		}
	}
	for i := 0; i < 200; i++ {
		rep := sm.Reply{Status: []int32{sm.StatusOK, sm.StatusOK, 11, -3}[i%4], Error: odd, Primary: i%3 - 1, OK: i%2 == 0,
			LSN: r.Uint64(), At: r.Int64() - 1<<62, Moved: i % 3, Deleted: i % 5 % 2}
		switch i % 3 {
		case 1:
			rep.OKs = []bool{}
		case 2:
			rep.OKs = []bool{true, false, true}
		}
		for n := 0; n < i%9; n++ {
			rep.Jobs = append(rep.Jobs, queue.Job{ID: uint64(n), State: queue.State(n % 4), Attempts: uint32(n), Payload: []byte(odd)})
		}
		if got, want := describeRep(rep), refRep(rep); got != want {
			t.Fatalf("reply %+v:\n got %q\nwant %q", rep, got, want)
		}
	}
}
