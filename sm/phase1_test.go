package sm_test

// Seed 002 §14.1 Phase-1 unit tests, one per row, driven through the state
// machine with the harness of harness_test.go; plus §10.11 (concurrent push
// and fetch) and §10.6a (empty pointer file).

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
)

const hbEvery = 500 * time.Millisecond

// xorshift64 mirrors the seed's jitter PRNG (§9.0) to predict deadlines.
func xorshift64(x uint64) uint64 {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x
}

// bootDeadline is the election deadline a node booted with seed at time 0
// must arm: election_timeout + priority*step + jitter (first PRNG draw).
func bootDeadline(o sm.Options, seed uint64) time.Duration {
	return o.ElectionTimeout + time.Duration(o.Self)*o.PriorityStep + time.Duration(xorshift64(seed)%uint64(o.JitterMax))
}

// newPrimary boots node 0 of `peers` (the others silent mocks) with blob
// installed and runs it past its election deadline.
func newPrimary(t *testing.T, peers int, blob []byte) (*harness, *hnode) {
	t.Helper()
	h := newHarness(t, peers)
	p := h.add(0, nil, nil)
	install(t, p.disk, blob, epoch)
	h.boot(0)
	h.advance(3 * time.Second)
	if p.n.Role() != sm.RolePrimary {
		t.Fatalf("node 0 is %v after its election deadline, want primary\n%s", p.n.Role(), p.logDump())
	}
	return h, p
}

// newStandby makes node 1 of 2 a harness node (saved config installed if
// non-nil, with mtime) and peer 0 a mock primary advertising tag, serving
// ReplConfig through serve (nil: never answers). Not booted yet.
func newStandby(t *testing.T, saved []byte, mtime int64, tag uint64, serve func(sm.Msg) (sm.Msg, bool)) (*harness, *hnode, *mockPrimary) {
	t.Helper()
	h := newHarness(t, 2)
	s := h.add(1, nil, nil)
	if saved != nil {
		install(t, s.disk, saved, mtime)
	}
	p := &mockPrimary{self: 0, term: 1, tag: tag, serve: serve}
	h.mocks[0] = p.respond
	return h, s, p
}

// keepAlive advances the clock by up to d, the mock primary p sending node
// `to` a heartbeat every 500 ms (as a live primary does); it stops early
// and reports true once stop() holds.
func keepAlive(h *harness, p *mockPrimary, to int, d time.Duration, stop func() bool) bool {
	for elapsed := time.Duration(0); elapsed < d; {
		h.deliver(p.self, to, p.msg(sm.MsgHeartbeat, 0))
		if stop != nil && stop() {
			return true
		}
		step := min(hbEvery, d-elapsed)
		if h.advanceUntil(step, stop) {
			return true
		}
		elapsed += step
	}
	return false
}

func stopped(hn *hnode) func() bool { return func() bool { return !hn.up } }

// fetchWindow is the §5.5 retry window: sum of the backoff delays.
func fetchWindow(o sm.Options) time.Duration {
	var w time.Duration
	for i := 0; i < o.FetchMaxAttempts; i++ {
		w += o.FetchDelay(i)
	}
	return w
}

// pointerOn returns the versioned name conf/current holds in files.
func pointerOn(t *testing.T, files map[string][]byte) string {
	t.Helper()
	data, ok := files[sm.PointerPath]
	if !ok {
		t.Fatalf("conf/current missing; conf/ holds %v", confFiles(files))
	}
	name, err := sm.ParsePointer(data)
	if err != nil {
		t.Fatalf("conf/current %q: %v", data, err)
	}
	return name
}

// bootOn boots a lone process (node 1 of 2, peer 0 silent) on disk and
// returns it after Phase 1's local reads (a candidate).
func bootOn(t *testing.T, disk *simdisk.Disk) *hnode {
	t.Helper()
	h := newHarness(t, 2)
	hn := h.add(1, disk, nil)
	h.boot(1)
	return hn
}

// noErrorLogs fails if hn logged anything at ERROR or above.
func noErrorLogs(t *testing.T, hn *hnode) {
	t.Helper()
	for _, l := range hn.logs {
		if l.Level >= sm.Error {
			t.Errorf("n%d logged %s %s: %s", hn.id, l.Level, l.Key, l.Text)
		}
	}
}

// --- seed 002 §14.1 Phase 1 ---

// TestConfSha256ChangeDetection: tag match -> no push (UpToDate, no file
// read); tag differ -> push of bytes whose SHA-256 matches.
func TestConfSha256ChangeDetection(t *testing.T) {
	blobA := testConfig(t, "A", 3)
	blobB := testConfig(t, "B", 2)
	tagA := sm.TagOf(blobA)

	t.Run("primary", func(t *testing.T) {
		h, p := newPrimary(t, 2, blobA)
		standby := sm.Msg{Role: sm.RoleStandby, Term: p.n.Term(), Priority: 1}

		join := standby
		join.Type, join.ReqID = sm.MsgJoin, 7
		h.deliver(1, 0, join)
		jr := h.outboxOf(sm.MsgJoinReply)
		if len(jr) != 1 || jr[0].Msg.ReqID != 7 || jr[0].Msg.Status != sm.StatusOK {
			t.Fatalf("join reply = %+v, want one with ReqID 7 status 0", jr)
		}

		// Tag match: up to date, and no file I/O at all.
		req := standby
		req.Type, req.ReqID, req.ConfigTag = sm.MsgReplConfig, 8, tagA
		opsBefore := len(p.ops)
		h.deliver(1, 0, req)
		replies := h.outboxOf(sm.MsgReplConfigReply)
		if len(replies) != 1 {
			t.Fatalf("want 1 ReplConfigReply, got %d", len(replies))
		}
		r := replies[0].Msg
		if !r.UpToDate || r.ReqID != 8 || r.Status != sm.StatusOK || len(r.Bytes) != 0 || len(r.SHA256) != 0 {
			t.Errorf("matching tag: reply %+v, want UpToDate with no data", r)
		}
		if got := p.ops[opsBefore:]; len(got) != 0 {
			t.Errorf("matching tag: primary issued file ops %v, want none", got)
		}

		// Tag differs: the primary re-reads its versioned file and sends it.
		req.ReqID, req.ConfigTag = 9, sm.TagOf(blobB)
		opsBefore = len(p.ops)
		h.deliver(1, 0, req)
		reads := 0
		for _, op := range p.ops[opsBefore:] {
			if op.Op == sm.OpRead && op.Path == sm.ConfDir+"/"+versionName(blobA) {
				reads++
			}
		}
		if reads != 1 {
			t.Errorf("differing tag: %d reads of the versioned file, want 1 (ops %v)", reads, p.ops[opsBefore:])
		}
		replies = h.outboxOf(sm.MsgReplConfigReply)
		if len(replies) != 2 {
			t.Fatalf("want 2 ReplConfigReply, got %d", len(replies))
		}
		r = replies[1].Msg
		sum := sha256.Sum256(r.Bytes)
		switch {
		case r.UpToDate || r.ReqID != 9 || r.Status != sm.StatusOK:
			t.Errorf("differing tag: reply %+v, want data", r)
		case !bytes.Equal(r.Bytes, blobA):
			t.Errorf("differing tag: reply carries %d bytes, not the primary's config", len(r.Bytes))
		case !bytes.Equal(r.SHA256, sum[:]):
			t.Errorf("reply sha256 %x does not match its bytes (%x)", r.SHA256, sum)
		case r.ConfigTag != tagA || r.ConfigTag != sm.Tag(sum):
			t.Errorf("reply tag %016x, want %016x", r.ConfigTag, tagA)
		}
	})

	t.Run("standby-tag-match", func(t *testing.T) {
		h, s, _ := newStandby(t, blobA, epoch, tagA, serveBlob(blobA))
		h.boot(1)
		if rc := h.outboxOf(sm.MsgReplConfig); len(rc) != 1 || rc[0].Msg.ConfigTag != tagA {
			t.Fatalf("standby ReplConfig requests %+v, want one carrying its tag %016x", rc, tagA)
		}
		if !s.n.Serving() || s.n.ConfigTag() != tagA || !s.hasLog("conf.up-to-date", sm.Info) {
			t.Errorf("serving=%v tag=%016x, want serving with %016x and conf.up-to-date\n%s", s.n.Serving(), s.n.ConfigTag(), tagA, s.logDump())
		}
		if w := append(s.confOpsOf(sm.OpWrite), s.confOpsOf(sm.OpRename)...); len(w) != 0 {
			t.Errorf("up-to-date standby wrote/renamed %v, want nothing", w)
		}
	})

	t.Run("standby-tag-differs", func(t *testing.T) {
		h, s, _ := newStandby(t, blobB, epoch, tagA, serveBlob(blobA))
		h.boot(1)
		if !s.hasLog("conf.saved-differs", sm.Warn) {
			t.Errorf("want WARN conf.saved-differs (§10.8)\n%s", s.logDump())
		}
		if !s.n.Serving() || s.n.ConfigTag() != tagA {
			t.Errorf("serving=%v tag=%016x, want serving with pushed tag %016x", s.n.Serving(), s.n.ConfigTag(), tagA)
		}
		if got := pointerOn(t, s.disk.Files()); got != versionName(blobA) {
			t.Errorf("conf/current names %s, want %s", got, versionName(blobA))
		}
	})
}

// TestConfSha256FullIntegrity: a reply whose full SHA-256 does not match
// its bytes is an integrity failure: ERROR, nothing saved, retry.
func TestConfSha256FullIntegrity(t *testing.T) {
	blob := testConfig(t, "A", 3)
	sum := sha256.Sum256(blob)
	tag := sm.Tag(sum)
	corrupt := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 0x40; return c }

	cases := []struct {
		name string
		bad  sm.Msg
	}{
		{"sha256-field-wrong", sm.Msg{ConfigTag: tag, SHA256: corrupt(sum[:], 31), Bytes: blob}},
		{"bytes-corrupted", sm.Msg{ConfigTag: tag, SHA256: sum[:], Bytes: corrupt(blob, len(blob)/2)}},
		{"sha256-truncated", sm.Msg{ConfigTag: tag, SHA256: sum[:16], Bytes: blob}},
		{"tag-not-from-sha256", sm.Msg{ConfigTag: tag ^ 1, SHA256: sum[:], Bytes: blob}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			answers := 0
			serve := func(req sm.Msg) (sm.Msg, bool) {
				answers++
				if answers == 1 {
					return c.bad, true
				}
				return serveBlob(blob)(req)
			}
			h, s, p := newStandby(t, nil, 0, tag, serve)
			h.boot(1)

			if !s.hasLog("conf.fetch-mismatch", sm.Error) {
				t.Fatalf("want ERROR conf.fetch-mismatch\n%s", s.logDump())
			}
			if l := s.logsWithKey("conf.fetch-mismatch")[0]; !strings.Contains(l.Text, "Retrying (1/20)") {
				t.Errorf("mismatch log %q does not count the attempt", l.Text)
			}
			if w := s.confOpsOf(sm.OpWrite); len(w) != 0 {
				t.Errorf("mismatching bytes were written: %v", w)
			}
			if files := confFiles(s.disk.Files()); len(files) != 0 {
				t.Errorf("conf/ holds %v after a mismatch, want nothing", files)
			}
			if s.n.Serving() || s.n.ConfigTag() != 0 || !s.up {
				t.Fatalf("after mismatch: serving=%v tag=%016x up=%v, want not serving, no config, alive", s.n.Serving(), s.n.ConfigTag(), s.up)
			}

			// The fetch timer retries with a new request, which succeeds.
			joins := len(h.outboxOf(sm.MsgJoin))
			keepAlive(h, p, 1, s.opts.FetchDelay(0), nil)
			if got := len(h.outboxOf(sm.MsgJoin)); got != joins+1 {
				t.Fatalf("joins %d -> %d after the fetch delay, want one retry", joins, got)
			}
			if !s.n.Serving() || s.n.ConfigTag() != tag {
				t.Fatalf("after retry: serving=%v tag=%016x, want %016x\n%s", s.n.Serving(), s.n.ConfigTag(), tag, s.logDump())
			}
			if got := pointerOn(t, s.disk.Files()); got != versionName(blob) {
				t.Errorf("conf/current names %s, want %s", got, versionName(blob))
			}
			if st := s.n.SavedTags(); len(st) != 1 || st[0] != tag {
				t.Errorf("SavedTags = %x, want [%016x]", st, tag)
			}
		})
	}

	t.Run("every-attempt-mismatches", func(t *testing.T) {
		bad := cases[0].bad
		h, s, p := newStandby(t, nil, 0, tag, func(sm.Msg) (sm.Msg, bool) { return bad, true })
		h.boot(1)
		if !keepAlive(h, p, 1, 2*fetchWindow(s.opts), stopped(s)) {
			t.Fatalf("standby still up after twice the retry window")
		}
		if n := len(s.logsWithKey("conf.fetch-mismatch")); n != s.opts.FetchMaxAttempts {
			t.Errorf("%d mismatch logs, want %d", n, s.opts.FetchMaxAttempts)
		}
		if !s.hasLog("fatal.standby-no-config", sm.Fatal) || len(s.exits) != 1 || s.exits[0].Code != 1 {
			t.Errorf("want §10.2 FATAL exit 1 after all mismatches; exits %+v\n%s", s.exits, s.logDump())
		}
	})
}

// checkSaveSequence checks that ops hold the §3.2 procedure for blob, as
// eight consecutive ops: versioned tmp write, fsync, rename, dir fsync;
// pointer tmp write, fsync, rename, dir fsync.
func checkSaveSequence(t *testing.T, ops []sm.FileOp, blob []byte) {
	t.Helper()
	name := versionName(blob)
	ver := sm.ConfDir + "/" + name
	start := -1
	for i, op := range ops {
		if op.Op == sm.OpWrite && strings.HasPrefix(op.Path, ver+".") {
			start = i
			break
		}
	}
	if start < 0 || start+8 > len(ops) {
		t.Fatalf("no versioned tmp write for %s in %v", name, ops)
	}
	seq := ops[start : start+8]
	tmp, ptrTmp := seq[0].Path, seq[4].Path
	want := []struct {
		op       sm.OpKind
		path, to string
	}{
		{sm.OpWrite, tmp, ""}, {sm.OpFsync, tmp, ""}, {sm.OpRename, tmp, ver}, {sm.OpFsyncDir, sm.ConfDir, ""},
		{sm.OpWrite, ptrTmp, ""}, {sm.OpFsync, ptrTmp, ""}, {sm.OpRename, ptrTmp, sm.PointerPath}, {sm.OpFsyncDir, sm.ConfDir, ""},
	}
	for i, w := range want {
		if seq[i].Op != w.op || seq[i].Path != w.path || seq[i].To != w.to {
			t.Errorf("save op %d = %v %q -> %q, want %v %q -> %q", i, seq[i].Op, seq[i].Path, seq[i].To, w.op, w.path, w.to)
		}
	}
	if !strings.HasSuffix(tmp, ".tmp") || !strings.HasPrefix(ptrTmp, sm.PointerPath+".") || !strings.HasSuffix(ptrTmp, ".tmp") {
		t.Errorf("temp names %q, %q are not per-operation .tmp names", tmp, ptrTmp)
	}
	if !bytes.Equal(seq[0].Data, blob) || !bytes.Equal(seq[4].Data, sm.PointerContents(name)) {
		t.Errorf("written data: versioned %d bytes, pointer %q", len(seq[0].Data), seq[4].Data)
	}
}

// TestConfSavePointerAtomic: versioned file + fsync + HEAD-file swap;
// `cat conf/current` names the new file after the update, durably by the
// time the node reports the save.
func TestConfSavePointerAtomic(t *testing.T) {
	oldBlob := testConfig(t, "old", 2)
	newBlob := testConfig(t, "new", 4)
	newName := versionName(newBlob)
	h, s, _ := newStandby(t, oldBlob, epoch-int64(time.Hour), sm.TagOf(newBlob), serveBlob(newBlob))

	checked := false
	h.onStep = func(i int, _ sm.Input, effs []sm.Effect) {
		for _, e := range effs {
			if l, ok := e.(sm.Log); ok && l.Key == "conf.saved" {
				checked = true
				dur := s.disk.DurableFiles()
				if got := string(dur[sm.PointerPath]); got != string(sm.PointerContents(newName)) {
					t.Errorf("when conf.saved is logged, durable conf/current = %q, want %q", got, sm.PointerContents(newName))
				}
				if !bytes.Equal(dur[sm.ConfDir+"/"+newName], newBlob) {
					t.Errorf("when conf.saved is logged, durable %s is not the new config", newName)
				}
			}
		}
	}
	h.boot(1)
	if !checked {
		t.Fatalf("no conf.saved log\n%s", s.logDump())
	}
	checkSaveSequence(t, s.ops, newBlob)

	files := s.disk.Files()
	if got := string(files[sm.PointerPath]); got != newName+"\n" {
		t.Errorf("cat conf/current = %q, want %q", got, newName+"\n")
	}
	want := []string{versionName(oldBlob), newName, "current"}
	if got := confFiles(files); !equalSets(got, want) {
		t.Errorf("conf/ = %v, want %v (previous version retained)", got, want)
	}
	if !s.n.Serving() || s.n.ConfigTag() != sm.TagOf(newBlob) {
		t.Errorf("serving=%v tag=%016x after save", s.n.Serving(), s.n.ConfigTag())
	}

	// A restart boots on the new config (and the primary finds it current).
	h.restart(1)
	if b, name, ok := s.n.Config(); !ok || name != newName || !bytes.Equal(b, newBlob) {
		t.Errorf("after restart running %q, want %q", name, newName)
	}
	if w := s.opsOf(sm.OpWrite); len(w) != 0 || !s.hasLog("conf.up-to-date", sm.Info) {
		t.Errorf("restarted standby wrote %v; want up-to-date without writes\n%s", w, s.logDump())
	}
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

// TestConfSaveCrashAfterFsync: a crash after step 1 of the save
// (versioned file renamed and durable, pointer not updated) boots the old
// config in every allowed crash state; and a crash at any point of the save
// boots old or new, never a torn or missing config, and new once the save
// was reported.
func TestConfSaveCrashAfterFsync(t *testing.T) {
	oldBlob := testConfig(t, "old", 2)
	newBlob := testConfig(t, "new", 4)
	oldTag, newTag := sm.TagOf(oldBlob), sm.TagOf(newBlob)

	// run drives a save of newBlob over oldBlob on node 1, killing it
	// before the save's op number killAt (-1: never), and returns the
	// node and whether it was killed.
	run := func(t *testing.T, killAt int) (*hnode, bool, int) {
		h, s, p := newStandby(t, oldBlob, epoch-int64(time.Hour), newTag, nil)
		h.boot(1) // fetch pending: the mock does not answer yet
		counting, n, killed := false, 0, false
		h.killBefore = func(i int, op sm.FileOp) bool {
			if !counting {
				return false
			}
			n++
			if n-1 == killAt {
				killed = true
				return true
			}
			return false
		}
		p.serve = serveBlob(newBlob)
		counting = true
		keepAlive(h, p, 1, s.opts.FetchDelay(0), func() bool { return killed })
		h.run()
		return s, killed, n
	}

	// Reference run: the save's ops and the index of the pointer rename.
	ref, _, total := run(t, -1)
	saveOps := ref.ops[len(ref.ops)-total:]
	checkSaveSequence(t, saveOps, newBlob)
	renameAt, writePtrAt := -1, -1
	for i, op := range saveOps {
		if op.Op == sm.OpWrite && strings.HasPrefix(op.Path, sm.PointerPath+".") && writePtrAt < 0 {
			writePtrAt = i
		}
		if op.Op == sm.OpRename && op.To == sm.PointerPath {
			renameAt = i
		}
	}
	if ref.n.ConfigTag() != newTag || renameAt < 0 || writePtrAt < 0 {
		t.Fatalf("reference save did not complete (tag %016x, ops %v)", ref.n.ConfigTag(), saveOps)
	}

	t.Run("after-step-1", func(t *testing.T) {
		for _, killAt := range []int{writePtrAt, renameAt} {
			s, killed, _ := run(t, killAt)
			if !killed {
				t.Fatalf("kill point %d not reached", killAt)
			}
			files := s.disk.Files()
			if !bytes.Equal(files[sm.ConfDir+"/"+versionName(newBlob)], newBlob) {
				t.Errorf("kill before op %d: new versioned file not on disk (conf/ = %v)", killAt, confFiles(files))
			}
			states := s.disk.CrashStates()
			if len(states) == 0 {
				t.Fatalf("kill before op %d: no crash states", killAt)
			}
			for k, st := range states {
				if got := pointerOn(t, st.Files()); got != versionName(oldBlob) {
					t.Errorf("kill before op %d, state %d: conf/current names %s, want the old %s", killAt, k, got, versionName(oldBlob))
				}
				b := bootOn(t, st)
				if b.n.ConfigTag() != oldTag {
					t.Errorf("kill before op %d, state %d: next boot runs %016x, want old %016x\n%s", killAt, k, b.n.ConfigTag(), oldTag, b.logDump())
				}
				noErrorLogs(t, b)
			}
		}
	})

	t.Run("every-kill-point", func(t *testing.T) {
		for killAt := 0; killAt <= total; killAt++ {
			s, killed, _ := run(t, killAt)
			reported := len(s.logsWithKey("conf.saved")) > 0
			for k, st := range s.disk.CrashStates() {
				b := bootOn(t, st)
				got := b.n.ConfigTag()
				switch {
				case got != oldTag && got != newTag:
					t.Errorf("kill before op %d (killed=%v), state %d: boots with %016x, want old or new\n%s", killAt, killed, k, got, b.logDump())
				case killAt <= renameAt && got != oldTag:
					t.Errorf("kill before op %d (pointer not renamed), state %d: boots new config", killAt, k)
				case reported && got != newTag:
					t.Errorf("kill before op %d: save was reported (conf.saved) but crash state %d boots the old config — the pointer rename was not durable", killAt, k)
				}
				noErrorLogs(t, b)
				for _, key := range []string{"conf.pointer-empty", "conf.pointer-invalid", "conf.invalid"} {
					if len(b.logsWithKey(key)) > 0 {
						t.Errorf("kill before op %d, state %d: boot logged %s", killAt, k, key)
					}
				}
			}
		}
	})
}

// TestConfReadCurrentFilename: conf/current parsing strips the newline
// and validates the name; an absent pointer is "no config".
func TestConfReadCurrentFilename(t *testing.T) {
	good := "cluster.bin.a1b2c3d4e5f6"
	for _, c := range []struct {
		in   string
		want string
		err  error
	}{
		{good + "\n", good, nil},
		{good, good, nil},
		{good + "\nextra line\n", good, nil},
		{"", "", sm.ErrPointerEmpty},
		{"\n", "", sm.ErrPointerPrefix},
		{"../cluster.bin.a1b2c3d4e5f6\n", "", sm.ErrPointerSeparator},
		{"config.bin.a1b2c3d4e5f6\n", "", sm.ErrPointerPrefix},
		{"cluster.bin.a1b2c3d4e5\n", "", sm.ErrPointerSuffix},
		{"cluster.bin.A1B2C3D4E5F6\n", "", sm.ErrPointerSuffix},
		{"cluster.bin.a1b2c3d4e5f6 \n", "", sm.ErrPointerSuffix},
	} {
		got, err := sm.ParsePointer([]byte(c.in))
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("ParsePointer(%q) = %q, %v; want %q, %v", c.in, got, err, c.want, c.err)
		}
	}
	if got, err := sm.ParsePointer(sm.PointerContents(good)); got != good || err != nil {
		t.Errorf("PointerContents round trip: %q, %v", got, err)
	}

	blob := testConfig(t, "A", 1)
	name := versionName(blob)

	t.Run("absent", func(t *testing.T) {
		d := simdisk.New()
		if err := d.PutDurable(sm.ConfDir+"/"+name, blob, epoch); err != nil { // a versioned file but no pointer
			t.Fatal(err)
		}
		hn := bootOn(t, d)
		reads := 0
		for _, op := range hn.opsOf(sm.OpRead) {
			if op.Path == sm.PointerPath {
				reads++
			}
			if op.Path == sm.ConfDir+"/"+name {
				t.Errorf("read %s without a pointer naming it", op.Path)
			}
		}
		if reads != 1 {
			t.Errorf("%d reads of conf/current, want 1", reads)
		}
		if _, _, ok := hn.n.Config(); ok || hn.n.ConfigTag() != 0 {
			t.Errorf("no pointer but a config is loaded (tag %016x)", hn.n.ConfigTag())
		}
		for _, l := range hn.logs {
			if l.Level >= sm.Warn {
				t.Errorf("absent pointer logged %s %s (it is the normal fresh-standby case)", l.Level, l.Key)
			}
		}
	})

	for _, ptr := range []string{name + "\n", name} {
		t.Run("present-"+strings.TrimSpace(strings.ReplaceAll(ptr, "\n", "-nl")), func(t *testing.T) {
			d := simdisk.New()
			for p, data := range map[string][]byte{sm.ConfDir + "/" + name: blob, sm.PointerPath: []byte(ptr)} {
				if err := d.PutDurable(p, data, epoch); err != nil {
					t.Fatal(err)
				}
			}
			hn := bootOn(t, d)
			if _, got, ok := hn.n.Config(); !ok || got != name {
				t.Errorf("pointer %q: running %q, want %q\n%s", ptr, got, name, hn.logDump())
			}
		})
	}
}

// TestConfZeroTagSentinel: a standby without config sends tag 0 and gets
// the bytes (no FATAL); only a reply carrying tag 0 is FATAL (§10.5).
func TestConfZeroTagSentinel(t *testing.T) {
	blob := testConfig(t, "A", 3)
	sum := sha256.Sum256(blob)
	tag := sm.Tag(sum)

	t.Run("standby-sends-zero", func(t *testing.T) {
		h, s, _ := newStandby(t, nil, 0, tag, serveBlob(blob))
		h.boot(1)
		rc := h.outboxOf(sm.MsgReplConfig)
		if len(rc) != 1 || rc[0].Msg.ConfigTag != 0 {
			t.Fatalf("ReplConfig requests %+v, want one with tag 0", rc)
		}
		if len(s.exits) != 0 || s.hasLog("fatal.zero-tag", sm.Fatal) {
			t.Fatalf("zero-tag request ended in FATAL: %+v\n%s", s.exits, s.logDump())
		}
		if !s.n.Serving() || s.n.ConfigTag() != tag || !s.hasLog("conf.received", sm.Info) {
			t.Errorf("serving=%v tag=%016x, want the primary's %016x\n%s", s.n.Serving(), s.n.ConfigTag(), tag, s.logDump())
		}
	})

	t.Run("primary-answers-zero-with-bytes", func(t *testing.T) {
		h, p := newPrimary(t, 2, blob)
		h.deliver(1, 0, sm.Msg{Type: sm.MsgReplConfig, ReqID: 3, Role: sm.RoleStandby, Term: p.n.Term(), Priority: 1, ConfigTag: 0})
		r := h.outboxOf(sm.MsgReplConfigReply)
		if len(r) != 1 || r[0].Msg.UpToDate || r[0].Msg.ConfigTag != tag || !bytes.Equal(r[0].Msg.Bytes, blob) || !bytes.Equal(r[0].Msg.SHA256, sum[:]) {
			t.Fatalf("reply to tag 0: %+v, want the full config", r)
		}
		if p.n.Role() != sm.RolePrimary || len(p.exits) != 0 {
			t.Errorf("primary role %v exits %+v after a tag-0 request", p.n.Role(), p.exits)
		}
	})

	t.Run("reply-with-zero-tag-is-fatal", func(t *testing.T) {
		h, s, _ := newStandby(t, nil, 0, tag, func(sm.Msg) (sm.Msg, bool) {
			return sm.Msg{UpToDate: false, ConfigTag: 0, SHA256: sum[:], Bytes: blob}, true
		})
		h.boot(1)
		if len(s.exits) != 1 || s.exits[0].Code != 1 {
			t.Fatalf("exits %+v, want one with code 1", s.exits)
		}
		if !s.hasLog("fatal.zero-tag", sm.Fatal) || s.n.Role() != sm.RoleStopped || s.n.FatalReason() == "" {
			t.Errorf("want FATAL fatal.zero-tag and stopped; role %v\n%s", s.n.Role(), s.logDump())
		}
		if !strings.Contains(s.n.FatalReason(), "BUG: primary sent zero version_tag") {
			t.Errorf("fatal reason %q lacks the seed's wording", s.n.FatalReason())
		}
		if w := s.confOpsOf(sm.OpWrite); len(w) != 0 {
			t.Errorf("zero-tag config was written: %v", w)
		}
	})
}

// push is an OP_replConfigPush from mock primary p carrying blob.
func push(p *mockPrimary, reqID uint64, blob []byte) sm.Msg {
	sum := sha256.Sum256(blob)
	m := p.msg(sm.MsgReplConfigPush, reqID)
	m.ConfigTag, m.SHA256, m.Bytes = sm.Tag(sum), sum[:], blob
	return m
}

// TestConfTrimKeepN: after 3 updates with keep_n=2 exactly 2 versioned
// files remain (the newest two) and stale .tmp files are gone.
func TestConfTrimKeepN(t *testing.T) {
	b1, b2, b3 := testConfig(t, "one", 1), testConfig(t, "two", 2), testConfig(t, "three", 3)
	h, s, p := newStandby(t, nil, 0, sm.TagOf(b1), serveBlob(b1))
	s.opts.KeepN = 2
	h.newProcess(s)
	// Leftovers of interrupted writes from an earlier process.
	for _, stale := range []string{"cluster.bin.0123456789ab.99.tmp", "current.98.tmp"} {
		if err := s.disk.PutDurable(sm.ConfDir+"/"+stale, []byte("partial"), epoch-int64(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	h.boot(1) // save 1: the fetch
	if s.n.ConfigTag() != sm.TagOf(b1) {
		t.Fatalf("fetch did not save config 1\n%s", s.logDump())
	}
	for i, b := range [][]byte{b2, b3} { // saves 2 and 3: pushes
		keepAlive(h, p, 1, time.Second, nil) // distinct mtimes
		p.tag = sm.TagOf(b)
		h.deliver(0, 1, push(p, uint64(100+i), b))
		replies := h.outboxOf(sm.MsgReplConfigPushReply)
		if len(replies) != i+1 {
			t.Fatalf("push %d: %d push replies so far, want %d", i+2, len(replies), i+1)
		}
		if r := replies[i].Msg; !r.Accepted || r.ReqID != uint64(100+i) || r.ConfigTag != sm.TagOf(b) {
			t.Fatalf("push %d reply %+v, want accepted with the new tag", i+2, r)
		}
	}

	if st := s.n.SavedTags(); len(st) != 3 {
		t.Fatalf("SavedTags %x, want 3 saves", st)
	}
	for view, files := range map[string]map[string][]byte{"current": s.disk.Files(), "durable": s.disk.DurableFiles()} {
		var versions, tmps []string
		for _, name := range confFiles(files) {
			switch {
			case sm.IsVersionName(name):
				versions = append(versions, name)
			case strings.HasSuffix(name, ".tmp"):
				tmps = append(tmps, name)
			}
		}
		if want := []string{versionName(b2), versionName(b3)}; !equalSets(versions, want) {
			t.Errorf("%s view: versioned files %v, want exactly %v", view, versions, want)
		}
		if len(tmps) != 0 {
			t.Errorf("%s view: stale .tmp files left: %v", view, tmps)
		}
		if got := pointerOn(t, files); got != versionName(b3) {
			t.Errorf("%s view: conf/current names %s, want %s", view, got, versionName(b3))
		}
	}
}

// TestAmIPrimaryNoPeers: priority 0 alone in --peers is primary without
// probing anybody.
func TestAmIPrimaryNoPeers(t *testing.T) {
	blob := testConfig(t, "A", 1)
	h := newHarness(t, 1)
	n := h.add(0, nil, nil)
	install(t, n.disk, blob, epoch)
	h.boot(0)
	if n.n.Role() != sm.RolePrimary || n.n.Primary() != 0 || n.n.Term() != 1 {
		t.Fatalf("role %v primary %d term %d, want primary of term 1 at once\n%s", n.n.Role(), n.n.Primary(), n.n.Term(), n.logDump())
	}
	if h.now != 0 {
		t.Errorf("became primary at %v, want without waiting", h.now)
	}
	if len(n.sent) != 0 {
		t.Errorf("sent %d messages (first %s), want none", len(n.sent), n.sent[0].Msg.Type)
	}
	for _, k := range []sm.TimerKind{sm.TimerElection, sm.TimerProbe} {
		if _, ok := n.timers[k]; ok {
			t.Errorf("%v timer armed, want no election wait", k)
		}
	}
	// A one-node cluster is its own majority: it votes for itself.
	if got := string(n.disk.DurableFiles()[sm.TermPath]); got != "1 0 crc32c=1bab1d29\n" {
		t.Errorf("durable %s = %q, want \"1 0 crc32c=1bab1d29\\n\" (term 1, vote for n0)", sm.TermPath, got)
	}
	if !n.n.Serving() || !n.hasLog("ha.promoted", sm.Info) {
		t.Errorf("serving=%v, want serving and ha.promoted", n.n.Serving())
	}
}

// TestAmIPrimaryHigherAlive: a probe answer from a live priority-0 primary
// makes the candidate its standby (and it starts the config fetch).
func TestAmIPrimaryHigherAlive(t *testing.T) {
	blob := testConfig(t, "A", 1)
	h := newHarness(t, 3)
	n := h.add(2, nil, nil)
	install(t, n.disk, blob, epoch)
	p := &mockPrimary{self: 0, term: 4, tag: sm.TagOf(blob)}
	h.mocks[0] = p.respond
	h.boot(2)

	if probes := h.outboxOf(sm.MsgProbe); len(probes) < 2 {
		t.Errorf("probed %d peers, want both higher-priority peers", len(probes))
	}
	if n.n.Role() != sm.RoleStandby || n.n.Primary() != 0 {
		t.Fatalf("role %v following %d, want standby of 0\n%s", n.n.Role(), n.n.Primary(), n.logDump())
	}
	if !n.hasLog("election.standby", sm.Info) || n.primary {
		t.Errorf("want election.standby and never primary\n%s", n.logDump())
	}
	if len(h.outboxOf(sm.MsgJoin)) != 1 {
		t.Errorf("standby did not join the primary to fetch its config")
	}
	// Following the primary, it made the primary's term its own, durably.
	if got := string(n.disk.DurableFiles()[sm.TermPath]); got != "4 crc32c=a5048dff\n" || n.n.Term() != 4 {
		t.Errorf("standby of a term-4 primary: durable term %q, term %d; want \"4 crc32c=a5048dff\\n\", 4", got, n.n.Term())
	}
	// It stays a standby past its own deadline while the primary lives.
	keepAlive(h, p, 2, 5*time.Second, nil)
	if n.n.Role() != sm.RoleStandby || n.primary {
		t.Errorf("role %v after 5 s with a live primary", n.n.Role())
	}

	t.Run("candidate-answer-is-not-enough", func(t *testing.T) {
		h := newHarness(t, 2)
		n := h.add(1, nil, nil)
		install(t, n.disk, blob, epoch)
		h.mocks[0] = func(s sent) []sm.Msg {
			if s.Msg.Type == sm.MsgProbe {
				return []sm.Msg{{Type: sm.MsgProbeReply, ReqID: s.Msg.ReqID, Role: sm.RoleCandidate, Priority: 0}}
			}
			return nil
		}
		h.boot(1)
		if n.n.Role() != sm.RoleCandidate {
			t.Errorf("a candidate's probe answer made it %v, want still candidate", n.n.Role())
		}
	})
}

// TestAmIPrimaryDeadlineExpires: no probe answers -> primary at the
// deadline election_timeout + priority*step + jitter, after data/term is
// durable.
func TestAmIPrimaryDeadlineExpires(t *testing.T) {
	blob := testConfig(t, "A", 1)
	h := newHarness(t, 3)
	n := h.add(2, nil, func(o *sm.Options) { o.SeedMode = true }) // the seed's rule: no majority needed
	install(t, n.disk, blob, epoch)
	var becamePrimaryAt time.Duration = -1
	h.onStep = func(i int, _ sm.Input, _ []sm.Effect) {
		if i != 2 || becamePrimaryAt >= 0 || n.n.Role() != sm.RolePrimary {
			return
		}
		becamePrimaryAt = h.now
		if got := string(n.disk.DurableFiles()[sm.TermPath]); got != "1 crc32c=90f599e3\n" {
			t.Errorf("reported primary while durable %s = %q, want \"1 crc32c=90f599e3\\n\"", sm.TermPath, got)
		}
	}
	h.boot(2)

	o := n.opts
	deadline := bootDeadline(o, 1002)
	base := o.ElectionTimeout + 2*o.PriorityStep
	if deadline < base || deadline >= base+o.JitterMax {
		t.Fatalf("predicted deadline %v outside [%v, %v)", deadline, base, base+o.JitterMax)
	}
	if a, ok := n.timers[sm.TimerElection]; !ok || a.at != deadline {
		t.Fatalf("election timer %+v (armed %v), want at %v", a, ok, deadline)
	}
	h.advance(deadline - 1)
	if n.n.Role() != sm.RoleCandidate {
		t.Fatalf("role %v just before the deadline, want candidate", n.n.Role())
	}
	if probes := len(h.outboxOf(sm.MsgProbe)); probes < 2*int(deadline/o.ProbeInterval) {
		t.Errorf("%d probes before the deadline, want re-probing every %v", probes, o.ProbeInterval)
	}
	h.advance(1)
	if n.n.Role() != sm.RolePrimary || n.n.Term() != 1 || becamePrimaryAt != deadline {
		t.Fatalf("role %v term %d (primary at %v), want primary of term 1 at %v\n%s", n.n.Role(), n.n.Term(), becamePrimaryAt, deadline, n.logDump())
	}
	// data/term: tmp written, fsynced, renamed, directory fsynced.
	var termOps []string
	for _, op := range n.ops {
		if strings.HasPrefix(op.Path, sm.TermPath) || op.To == sm.TermPath || op.Op == sm.OpFsyncDir && op.Path == sm.DataDir {
			termOps = append(termOps, op.Op.String()+" "+op.Path)
		}
	}
	// (Job-state recovery, which starts at promotion, fsyncs data/ again
	// after creating data/wal and data/snap: only the first five count.)
	if want := []string{"read data/term", "write data/term.tmp", "fsync data/term.tmp", "rename data/term.tmp", "fsyncdir data"}; len(termOps) < 5 || strings.Join(termOps[:5], ",") != strings.Join(want, ",") {
		t.Errorf("term ops %v, want %v", termOps, want)
	}
	if hb := h.outboxOf(sm.MsgHeartbeat); len(hb) != 2 || hb[0].Msg.Term != 1 || hb[0].Msg.Role != sm.RolePrimary {
		t.Errorf("heartbeats after promotion %+v, want one to each peer with term 1", hb)
	}

	// The jitter stays below JitterMax for many seeds.
	for seed := uint64(1); seed <= 64; seed++ {
		hh := newHarness(t, 3)
		m := hh.add(1, nil, nil)
		m.up = true
		hh.enqueue(1, sm.Boot{Seed: seed})
		hh.run()
		at := m.timers[sm.TimerElection].at
		lo := o.ElectionTimeout + o.PriorityStep
		if at != bootDeadline(m.opts, seed) || at < lo || at >= lo+o.JitterMax {
			t.Errorf("seed %d: deadline %v, want %v in [%v, %v)", seed, at, bootDeadline(m.opts, seed), lo, lo+o.JitterMax)
		}
	}
}

// primaries lists the harness nodes that are primary now.
func primaries(h *harness) []int {
	var out []int
	for _, hn := range h.nodes {
		if hn != nil && hn.up && hn.n.Role() == sm.RolePrimary {
			out = append(out, hn.id)
		}
	}
	return out
}

// TestAmIPrimarySimultaneousBoot: three candidates start at the same
// instant and end with exactly one primary, priority 0; a priority-1 node
// that self-declared first (same term) steps down on node 0's heartbeat.
func TestAmIPrimarySimultaneousBoot(t *testing.T) {
	blob := testConfig(t, "A", 2)
	tag := sm.TagOf(blob)

	t.Run("same-instant", func(t *testing.T) {
		h := newHarness(t, 3)
		for i := 0; i < 3; i++ {
			h.add(i, nil, nil)
		}
		install(t, h.node(0).disk, blob, epoch) // standbys fetch it
		h.boot(0, 1, 2)
		h.advance(10 * time.Second)
		if got := primaries(h); len(got) != 1 || got[0] != 0 {
			t.Fatalf("primaries %v, want [0]", got)
		}
		for i, hn := range h.nodes {
			if i > 0 && (hn.primary || hn.n.Role() != sm.RoleStandby || hn.n.Primary() != 0) {
				t.Errorf("n%d: role %v following %d (ever primary %v), want standby of 0", i, hn.n.Role(), hn.n.Primary(), hn.primary)
			}
			if !hn.n.Serving() || hn.n.ConfigTag() != tag || len(hn.exits) != 0 {
				t.Errorf("n%d: serving=%v tag=%016x exits=%v, want serving with %016x", i, hn.n.Serving(), hn.n.ConfigTag(), hn.exits, tag)
			}
		}
		if term := h.node(0).n.Term(); term != 1 {
			t.Errorf("primary term %d, want 1", term)
		}
	})

	// The seed's split brain (seed mode): a cut-off node 0 declares too.
	t.Run("node1-declared-first", func(t *testing.T) {
		h := newHarness(t, 3)
		for i := 0; i < 3; i++ {
			h.add(i, nil, func(o *sm.Options) { o.SeedMode = true })
			install(t, h.node(i).disk, blob, epoch)
		}
		n0, n1, n2 := h.node(0), h.node(1), h.node(2)
		// Node 0 cannot reach the others while they elect, and starts 1 s
		// later: node 1 self-declares first, node 0 later, both in term 1.
		h.cutLink(0, 1)
		h.cutLink(0, 2)
		h.boot(1, 2)
		h.advance(time.Second)
		h.boot(0)
		if !h.advanceUntil(10*time.Second, func() bool { return n1.n.Role() == sm.RolePrimary }) {
			t.Fatalf("node 1 never self-declared\n%s", n1.logDump())
		}
		at1 := h.now
		if !h.advanceUntil(10*time.Second, func() bool { return n0.n.Role() == sm.RolePrimary }) {
			t.Fatalf("node 0 never self-declared\n%s", n0.logDump())
		}
		at0 := h.now
		if at1 >= at0 {
			t.Fatalf("node 1 declared at %v, node 0 at %v: want node 1 first", at1, at0)
		}
		if n0.n.Term() != n1.n.Term() || n0.n.Term() != 1 {
			t.Fatalf("terms n0=%d n1=%d, want both 1", n0.n.Term(), n1.n.Term())
		}
		if n2.n.Role() != sm.RoleStandby || n2.n.Primary() != 1 {
			t.Fatalf("n2 role %v following %d, want standby of 1", n2.n.Role(), n2.n.Primary())
		}

		h.heal()
		resolved := h.advanceUntil(n0.opts.HeartbeatInterval, func() bool {
			p := primaries(h)
			return len(p) == 1 && p[0] == 0 && n2.n.Primary() == 0
		})
		if !resolved {
			t.Fatalf("split brain not resolved one heartbeat interval after heal: primaries %v", primaries(h))
		}
		h.advance(5 * time.Second)
		if got := primaries(h); len(got) != 1 || got[0] != 0 {
			t.Fatalf("primaries %v, want [0]", got)
		}
		if !n1.hasLog("ha.stepdown", sm.Warn) || n1.n.Role() != sm.RoleStandby || n1.n.Primary() != 0 {
			t.Errorf("n1: role %v following %d, want WARN ha.stepdown and standby of 0\n%s", n1.n.Role(), n1.n.Primary(), n1.logDump())
		}
		if n0.hasLog("ha.stepdown", sm.Warn) || n0.n.Term() != 1 {
			t.Errorf("n0 stepped down or changed term (%d)", n0.n.Term())
		}
		for _, hn := range h.nodes {
			if !hn.n.Serving() || hn.n.ConfigTag() != tag || len(hn.exits) != 0 {
				t.Errorf("n%d: serving=%v tag=%016x exits=%v", hn.id, hn.n.Serving(), hn.n.ConfigTag(), hn.exits)
			}
		}
	})
}

// TestPrimaryMissingConfigFatal: priority 0 without a config exits 1 with
// the §10.1 FATAL when it would become primary.
func TestPrimaryMissingConfigFatal(t *testing.T) {
	check := func(t *testing.T, n *hnode) {
		t.Helper()
		if len(n.exits) != 1 || n.exits[0].Code != 1 {
			t.Fatalf("exits %+v, want one with code 1\n%s", n.exits, n.logDump())
		}
		if !n.hasLog("fatal.primary-no-config", sm.Fatal) || n.n.Role() != sm.RoleStopped {
			t.Errorf("want FATAL fatal.primary-no-config and stopped (role %v)\n%s", n.n.Role(), n.logDump())
		}
		if !strings.Contains(n.n.FatalReason(), "Primary candidate (priority 0) has no config file") {
			t.Errorf("fatal reason %q lacks the seed's wording", n.n.FatalReason())
		}
		if n.primary || len(n.opsOf(sm.OpWrite)) != 0 {
			t.Errorf("ever primary=%v, writes %v: want neither", n.primary, n.opsOf(sm.OpWrite))
		}
		if len(n.sentOf(sm.MsgHeartbeat)) != 0 {
			t.Errorf("sent heartbeats as primary without a config")
		}
	}

	t.Run("with-peers", func(t *testing.T) {
		h := newHarness(t, 2)
		n := h.add(0, nil, nil)
		h.boot(0)
		if len(n.exits) != 0 {
			t.Fatalf("exited before its election deadline")
		}
		h.advance(5 * time.Second)
		check(t, n)
		if want := bootDeadline(n.opts, 1000); n.exitAt != want {
			t.Errorf("exited at %v, want at its election deadline %v", n.exitAt, want)
		}
	})
	t.Run("no-peers", func(t *testing.T) {
		h := newHarness(t, 1)
		n := h.add(0, nil, nil)
		h.boot(0)
		check(t, n)
	})
}

// TestStandbyNoConfigNoPrimaryFatal: the primary answers the join but
// never the config request, no saved config: after FetchMaxAttempts
// timeouts (~87.5 s) the standby exits with the §10.2 FATAL.
func TestStandbyNoConfigNoPrimaryFatal(t *testing.T) {
	h, s, p := newStandby(t, nil, 0, sm.TagOf(testConfig(t, "A", 1)), nil)
	h.boot(1)
	joins := h.outboxOf(sm.MsgJoin)
	if s.n.Role() != sm.RoleStandby || len(joins) != 1 {
		t.Fatalf("role %v joins %d, want a standby fetching", s.n.Role(), len(joins))
	}
	start := joins[0].At
	window := fetchWindow(s.opts)
	if window != 87500*time.Millisecond {
		t.Errorf("retry window %v, want 87.5 s (500+1k+2k+4k+16x5k ms)", window)
	}
	if keepAlive(h, p, 1, window-time.Millisecond, stopped(s)) {
		t.Fatalf("exited at %v, before the %v retry window ended\n%s", s.exitAt-start, window, s.logDump())
	}
	if s.n.Serving() {
		t.Errorf("serving without a config")
	}
	if !keepAlive(h, p, 1, 10*time.Second, stopped(s)) {
		t.Fatalf("still up 10 s after the retry window\n%s", s.logDump())
	}
	if got := s.exitAt - start; got != window {
		t.Errorf("exited %v after the first attempt, want %v", got, window)
	}
	if len(s.exits) != 1 || s.exits[0].Code != 1 || !s.hasLog("fatal.standby-no-config", sm.Fatal) {
		t.Errorf("exits %+v, want code 1 with FATAL fatal.standby-no-config\n%s", s.exits, s.logDump())
	}
	if !strings.Contains(s.n.FatalReason(), "could not fetch config from primary and has no saved config") {
		t.Errorf("fatal reason %q lacks the seed's wording", s.n.FatalReason())
	}
	if j, r := len(h.outboxOf(sm.MsgJoin)), len(h.outboxOf(sm.MsgReplConfig)); j != s.opts.FetchMaxAttempts || r != s.opts.FetchMaxAttempts {
		t.Errorf("%d joins and %d config requests, want %d each", j, r, s.opts.FetchMaxAttempts)
	}
	for _, w := range s.opsOf(sm.OpWrite) {
		if w.Path != "data/term.tmp" { // following the primary makes its term durable
			t.Errorf("wrote %s; want no write but data/term", w.Path)
		}
	}
	if s.primary {
		t.Errorf("became primary")
	}
}

// TestStandbySavedConfigNoPrimary: same, but with a saved config the
// standby WARNs and proceeds with it.
func TestStandbySavedConfigNoPrimary(t *testing.T) {
	saved := testConfig(t, "saved", 2)
	h, s, p := newStandby(t, saved, epoch, sm.TagOf(testConfig(t, "newer", 3)), nil)
	var gaveUpAt time.Duration = -1
	h.onStep = func(i int, _ sm.Input, effs []sm.Effect) {
		for _, e := range effs {
			if l, ok := e.(sm.Log); ok && l.Key == "conf.fetch-gave-up-saved" && gaveUpAt < 0 {
				gaveUpAt = h.now
			}
		}
		if gaveUpAt < 0 && s.n.Serving() {
			t.Errorf("serving at %v, before the fetch gave up", h.now)
		}
	}
	h.boot(1)
	start := h.outboxOf(sm.MsgJoin)[0].At
	keepAlive(h, p, 1, 100*time.Second, func() bool { return gaveUpAt >= 0 })

	if gaveUpAt-start != fetchWindow(s.opts) {
		t.Errorf("gave up %v after the first attempt, want %v", gaveUpAt-start, fetchWindow(s.opts))
	}
	if !s.hasLog("conf.fetch-gave-up-saved", sm.Warn) {
		t.Fatalf("want WARN conf.fetch-gave-up-saved\n%s", s.logDump())
	}
	l := s.logsWithKey("conf.fetch-gave-up-saved")[0]
	if !strings.Contains(l.Text, "using saved config (tag="+sm.TagHex(sm.TagOf(saved))+")") {
		t.Errorf("WARN %q does not name the saved tag", l.Text)
	}
	if !s.n.Serving() || s.n.Role() != sm.RoleStandby || s.n.ConfigTag() != sm.TagOf(saved) || len(s.exits) != 0 {
		t.Errorf("serving=%v role=%v tag=%016x exits=%v, want serving the saved config as standby", s.n.Serving(), s.n.Role(), s.n.ConfigTag(), s.exits)
	}
	keepAlive(h, p, 1, 5*time.Second, nil)
	if !s.n.Serving() || len(s.exits) != 0 {
		t.Errorf("stopped serving later (serving=%v exits=%v)", s.n.Serving(), s.exits)
	}
}

// TestConfStaleTimeout: a saved config older than conf_stale_timeout is
// flagged (WARN, config_stale) but used; within it, no WARN, flag clear.
func TestConfStaleTimeout(t *testing.T) {
	blob := testConfig(t, "A", 2)
	for _, c := range []struct {
		name    string
		age     time.Duration
		timeout time.Duration
		stale   bool
	}{
		{"older-than-timeout", 25 * time.Hour, 24 * time.Hour, true},
		{"within-timeout", 23 * time.Hour, 24 * time.Hour, false},
		{"just-written", 0, 24 * time.Hour, false},
		{"disabled", 1000 * time.Hour, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, 2)
			n := h.add(1, nil, func(o *sm.Options) { o.StaleTimeout = c.timeout })
			install(t, n.disk, blob, epoch-int64(c.age))
			h.boot(1)
			if n.n.ConfigTag() != sm.TagOf(blob) {
				t.Fatalf("saved config not loaded\n%s", n.logDump())
			}
			if n.n.Stale() != c.stale || n.hasLog("conf.stale", sm.Warn) != c.stale || len(n.logsWithKey("conf.stale")) > 1 {
				t.Errorf("age %v timeout %v: Stale()=%v, conf.stale logs %d; want stale=%v\n%s", c.age, c.timeout, n.n.Stale(), len(n.logsWithKey("conf.stale")), c.stale, n.logDump())
			}
		})
	}

	t.Run("cleared-by-matching-fetch", func(t *testing.T) {
		h, s, _ := newStandby(t, blob, epoch-int64(48*time.Hour), sm.TagOf(blob), serveBlob(blob))
		var wasStale bool
		h.onStep = func(int, sm.Input, []sm.Effect) { wasStale = wasStale || s.n.Stale() }
		h.boot(1)
		if !wasStale || !s.hasLog("conf.stale", sm.Warn) {
			t.Fatalf("48 h old config never flagged stale")
		}
		if s.n.Stale() || !s.n.Serving() {
			t.Errorf("after the primary confirmed the tag: stale=%v serving=%v, want cleared and serving", s.n.Stale(), s.n.Serving())
		}
	})

	t.Run("stale-primary-still-promotes", func(t *testing.T) {
		h := newHarness(t, 1)
		n := h.add(0, nil, nil)
		install(t, n.disk, blob, epoch-int64(48*time.Hour))
		h.boot(0)
		if n.n.Role() != sm.RolePrimary || !n.n.Stale() {
			t.Errorf("role %v stale %v: a stale config is a soft limit, want primary with the flag", n.n.Role(), n.n.Stale())
		}
	})
}

// --- seed 002 §10.11 and §10.6a ---

// TestConfConcurrentPushAndFetch (§10.11): a push arriving while the
// standby's own fetch is saving — after each step of that save and its
// trim — both saves complete, conf/current is valid, and no .tmp file
// survives the trims.
func TestConfConcurrentPushAndFetch(t *testing.T) {
	blob := testConfig(t, "A", 3)
	other := testConfig(t, "B", 4)

	// fetchSave returns a standby whose fetch of blob has executed `after`
	// file ops of its save and trim (stopping there), and how many it ran.
	fetchSave := func(t *testing.T, after int) (*harness, *hnode, *mockPrimary, int) {
		h, s, p := newStandby(t, nil, 0, sm.TagOf(blob), nil)
		h.boot(1)
		p.serve = serveBlob(blob)
		base := len(s.ops)
		keepAlive(h, p, 1, s.opts.FetchDelay(0), func() bool { return len(s.ops)-base >= after })
		return h, s, p, len(s.ops) - base
	}
	// The uninterrupted fetch: how many ops its save + trim take.
	_, ref, _, total := fetchSave(t, 1<<30)
	if ref.n.ConfigTag() != sm.TagOf(blob) || ref.n.StoreBusy() || total < 8 {
		t.Fatalf("reference fetch did not save (%d ops)\n%s", total, ref.logDump())
	}

	for _, c := range []struct {
		label  string
		pushed []byte
	}{{"same-blob", blob}, {"newer-blob", other}} {
		pushed := c.pushed
		for after := 1; after <= total; after++ {
			name := fmt.Sprintf("%s-pushed-after-op-%d", c.label, after)
			t.Run(name, func(t *testing.T) {
				h, s, p, _ := fetchSave(t, after)
				busy := s.n.StoreBusy()
				if after < total && !busy {
					t.Fatalf("fetch save not in progress after %d of %d ops", after, total)
				}
				h.inject(0, 1, push(p, 77, pushed))
				h.run()

				if st := s.n.SavedTags(); len(st) != 2 || st[0] != sm.TagOf(blob) || st[1] != sm.TagOf(pushed) {
					t.Errorf("SavedTags %x, want the fetched then the pushed tag (store busy at push: %v)", st, busy)
				}
				if n := len(s.logsWithKey("conf.saved")); n != 2 {
					t.Errorf("%d conf.saved logs, want 2", n)
				}
				replies := h.outboxOf(sm.MsgReplConfigPushReply)
				if len(replies) != 1 || !replies[0].Msg.Accepted || replies[0].Msg.ConfigTag != sm.TagOf(pushed) {
					t.Errorf("push replies %+v, want one accepted with %016x", replies, sm.TagOf(pushed))
				}
				if !s.n.Serving() || s.n.ConfigTag() != sm.TagOf(pushed) || s.n.StoreBusy() {
					t.Errorf("serving=%v tag=%016x busy=%v", s.n.Serving(), s.n.ConfigTag(), s.n.StoreBusy())
				}
				for view, files := range map[string]map[string][]byte{"current": s.disk.Files(), "durable": s.disk.DurableFiles()} {
					name := pointerOn(t, files)
					if name != versionName(pushed) || !bytes.Equal(files[sm.ConfDir+"/"+name], pushed) {
						t.Errorf("%s view: conf/current names %s, want %s with its bytes", view, name, versionName(pushed))
					}
					if !bytes.Equal(files[sm.ConfDir+"/"+versionName(blob)], blob) {
						t.Errorf("%s view: the fetched version is gone (keep_n=2)", view)
					}
					for _, f := range confFiles(files) {
						if strings.HasSuffix(f, ".tmp") {
							t.Errorf("%s view: %s left after the trims", view, f)
						}
					}
				}
				noErrorLogs(t, s)
			})
		}
	}
}

// TestConfPointerEmpty (§10.6a): a zero-length conf/current is a WARN and
// "missing config": FATAL on the primary path, a full fetch on a standby.
func TestConfPointerEmpty(t *testing.T) {
	blob := testConfig(t, "A", 2)
	prepare := func(t *testing.T, d *simdisk.Disk) {
		t.Helper()
		for p, data := range map[string][]byte{sm.ConfDir + "/" + versionName(blob): blob, sm.PointerPath: nil} {
			if err := d.PutDurable(p, data, epoch); err != nil {
				t.Fatal(err)
			}
		}
	}
	warnFirst := func(t *testing.T, hn *hnode, fatalKey string) {
		t.Helper()
		w, f := -1, -1
		for i, l := range hn.logs {
			if l.Key == "conf.pointer-empty" && l.Level == sm.Warn && w < 0 {
				w = i
				if !strings.Contains(l.Text, "exists but is empty — treating as missing config") {
					t.Errorf("WARN text %q lacks the seed's wording", l.Text)
				}
			}
			if l.Key == fatalKey && f < 0 {
				f = i
			}
		}
		if w < 0 {
			t.Errorf("no WARN conf.pointer-empty\n%s", hn.logDump())
		}
		if fatalKey != "" && (f < 0 || f < w) {
			t.Errorf("want WARN conf.pointer-empty then %s\n%s", fatalKey, hn.logDump())
		}
	}

	t.Run("primary", func(t *testing.T) {
		h := newHarness(t, 2)
		n := h.add(0, nil, nil)
		prepare(t, n.disk)
		h.boot(0)
		h.advance(5 * time.Second)
		warnFirst(t, n, "fatal.primary-no-config")
		if len(n.exits) != 1 || n.exits[0].Code != 1 || n.primary {
			t.Errorf("exits %+v ever-primary %v, want exit 1 and never primary", n.exits, n.primary)
		}
	})

	t.Run("standby", func(t *testing.T) {
		h, s, _ := newStandby(t, nil, 0, sm.TagOf(blob), serveBlob(blob))
		prepare(t, s.disk)
		h.boot(1)
		warnFirst(t, s, "")
		if rc := h.outboxOf(sm.MsgReplConfig); len(rc) != 1 || rc[0].Msg.ConfigTag != 0 {
			t.Errorf("config requests %+v, want a full fetch with tag 0", rc)
		}
		if !s.n.Serving() || s.n.ConfigTag() != sm.TagOf(blob) || len(s.exits) != 0 {
			t.Errorf("serving=%v tag=%016x exits=%v", s.n.Serving(), s.n.ConfigTag(), s.exits)
		}
		if got := pointerOn(t, s.disk.DurableFiles()); got != versionName(blob) {
			t.Errorf("conf/current names %s after the fetch, want %s", got, versionName(blob))
		}
	})
}
