package simdisk

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xce-hpc/xce/sm"
)

// withData returns a disk with durable dir "data" and durable data/term.
func withData(t *testing.T, term string) *Disk {
	t.Helper()
	d := New()
	if err := d.PutDurable("data/term", []byte(term), 1); err != nil {
		t.Fatal(err)
	}
	return d
}

func hasContent(path, want string) func(*Disk) bool {
	return func(s *Disk) bool {
		got, ok := fileIn(s, path)
		return ok && got == want
	}
}

func missing(path string) func(*Disk) bool {
	return func(s *Disk) bool { _, ok := fileIn(s, path); return !ok }
}

func TestUnsyncedWriteCanBeLost(t *testing.T) {
	d := withData(t, "1\n")
	run(t, d, opWrite("data/term", "2\n"))
	states := d.CrashStates()
	if !anyState(states, hasContent("data/term", "1\n")) {
		t.Errorf("no crash state lost the unsynced write:\n%s", describe(states))
	}
	if !anyState(states, hasContent("data/term", "2\n")) {
		t.Errorf("no crash state kept the unsynced write:\n%s", describe(states))
	}
	if !anyState(states, hasContent("data/term", "")) || !anyState(states, hasContent("data/term", "\x00\x00")) {
		t.Errorf("no torn-to-empty or zeroed state:\n%s", describe(states))
	}
	// old, new, torn at 0, zeroed; the name is durable.
	if len(states) != 4 {
		t.Errorf("%d states, want 4:\n%s", len(states), describe(states))
	}
	// With no luck (no random source) the unsynced write is lost.
	c := d.Clone()
	c.Crash(nil)
	if got, _ := fileIn(c, "data/term"); got != "1\n" {
		t.Errorf("no-luck crash kept %q", got)
	}
	// Once fsync'd it always survives.
	run(t, d, opFsync("data/term"))
	for _, s := range d.CrashStates() {
		if !hasContent("data/term", "2\n")(s) {
			t.Fatalf("fsync'd data lost:\n%s", s)
		}
	}
}

func TestCreateNotDirSyncedCanLoseName(t *testing.T) {
	d := withData(t, "1\n")
	run(t, d, opWrite("data/new", "payload"), opFsync("data/new"))
	states := d.CrashStates()
	if !anyState(states, missing("data/new")) {
		t.Errorf("the un-dir-synced create always survived:\n%s", describe(states))
	}
	if !anyState(states, hasContent("data/new", "payload")) {
		t.Errorf("the create never survived:\n%s", describe(states))
	}
	for _, s := range states {
		if got, ok := fileIn(s, "data/new"); ok && got != "payload" {
			t.Errorf("fsync'd file survived with data %q", got)
		}
	}
	if len(states) != 2 {
		t.Errorf("%d states, want 2:\n%s", len(states), describe(states))
	}
	run(t, d, opFsyncDir("data"))
	if states := d.CrashStates(); len(states) != 1 || !hasContent("data/new", "payload")(states[0]) {
		t.Errorf("after fsyncdir: %d states:\n%s", len(states), describe(states))
	}
}

func TestUnlinkNotDirSyncedCanComeBack(t *testing.T) {
	d := withData(t, "1\n")
	run(t, d, opRemove("data/term"))
	states := d.CrashStates()
	if !anyState(states, hasContent("data/term", "1\n")) || !anyState(states, missing("data/term")) {
		t.Errorf("want the unlink both kept and lost:\n%s", describe(states))
	}
	run(t, d, opFsyncDir("data"))
	if states := d.CrashStates(); len(states) != 1 || !missing("data/term")(states[0]) {
		t.Errorf("after fsyncdir: %s", describe(states))
	}
}

func TestMkdirNeedsParentSync(t *testing.T) {
	d := New()
	run(t, d, opMkdir("conf"), opWrite("conf/x", "y"), opFsync("conf/x"), opFsyncDir("conf"))
	states := d.CrashStates()
	if !anyState(states, func(s *Disk) bool { return len(s.Dirs()) == 0 }) {
		t.Errorf("mkdir without fsync of the base dir always survived:\n%s", describe(states))
	}
	// conf exists without x is impossible: conf's entries were synced.
	if anyState(states, func(s *Disk) bool { return len(s.Dirs()) == 1 && missing("conf/x")(s) }) {
		t.Errorf("conf survived without its synced entry:\n%s", describe(states))
	}
	run(t, d, opFsyncDir(""))
	if states := d.CrashStates(); len(states) != 1 || !hasContent("conf/x", "y")(states[0]) {
		t.Errorf("after fsyncdir of base: %s", describe(states))
	}
}

func TestSafeReplaceAlwaysSurvives(t *testing.T) {
	d := withData(t, "1\n")
	run(t, d, opWrite("data/term.tmp", "2\n"), opFsync("data/term.tmp"), opRename("data/term.tmp", "data/term"), opFsyncDir("data"))
	states := d.CrashStates()
	if len(states) != 1 {
		t.Fatalf("%d states:\n%s", len(states), describe(states))
	}
	if !hasContent("data/term", "2\n")(states[0]) || !missing("data/term.tmp")(states[0]) {
		t.Fatalf("state:\n%s", states[0])
	}
	for seed := range uint64(100) {
		c := d.Clone()
		c.Crash(rand.New(rand.NewPCG(seed, 0)))
		if got, _ := fileIn(c, "data/term"); got != "2\n" {
			t.Fatalf("seed %d: data/term = %q", seed, got)
		}
	}
}

// The classic bug: rename without fsync of the temp file first. The rename
// (made durable) can survive while the data it was meant to publish does not.
func TestRenameSurvivesDataLost(t *testing.T) {
	d := withData(t, "1\n")
	run(t, d, opWrite("data/term.tmp", "2\n"), opRename("data/term.tmp", "data/term"), opFsyncDir("data"))
	states := d.CrashStates()
	if !anyState(states, hasContent("data/term", "")) {
		t.Errorf("no state with the renamed file empty:\n%s", describe(states))
	}
	if !anyState(states, hasContent("data/term", "\x00\x00")) {
		t.Errorf("no state with the renamed file zeroed:\n%s", describe(states))
	}
	if anyState(states, hasContent("data/term", "1\n")) {
		t.Errorf("old data back after a durable rename:\n%s", describe(states))
	}
}

func TestTornAtBlockBoundaries(t *testing.T) {
	d := New()
	run(t, d, opWrite("f", "seed"), opFsync("f"), opFsyncDir(""))
	big := bytes.Repeat([]byte{'x'}, 5000)
	if r := d.Exec(sm.FileOp{Op: sm.OpWrite, Path: "f", Data: big}, 0); r.Err != sm.IOOK {
		t.Fatal(r.Detail)
	}
	var lens []int
	zeroed := false
	for _, s := range d.CrashStates() {
		b, _ := s.ReadFile("f")
		lens = append(lens, len(b))
		zeroed = zeroed || (len(b) == 5000 && b[0] == 0)
	}
	slices.Sort(lens)
	// durable "seed" (4), torn 0, 512, ..., 4608, current and zeroed (5000).
	want := []int{0, 4, 512, 1024, 1536, 2048, 2560, 3072, 3584, 4096, 4608, 5000, 5000}
	if !slices.Equal(lens, want) || !zeroed {
		t.Fatalf("lengths %v (zeroed %v), want %v", lens, zeroed, want)
	}
}

// randomHistory runs random operations (on a small name space) on d.
func randomHistory(r *rand.Rand, d *Disk, n int) {
	dirs := []string{"", "a", "b"}
	names := []string{"x", "y", "x.tmp"}
	path := func() string {
		dir := dirs[r.IntN(len(dirs))]
		if dir == "" {
			return names[r.IntN(len(names))]
		}
		return dir + "/" + names[r.IntN(len(names))]
	}
	for i := range n {
		var op sm.FileOp
		switch r.IntN(8) {
		case 0, 1:
			data := bytes.Repeat([]byte{byte('a' + i%26)}, r.IntN(1200))
			op = sm.FileOp{Op: sm.OpWrite, Path: path(), Data: data}
		case 2:
			op = opFsync(path())
		case 3:
			p := path()
			dir := p[:max(0, bytes.LastIndexByte([]byte(p), '/'))]
			if dir == "" {
				op = opRename(p, names[r.IntN(len(names))])
			} else {
				op = opRename(p, dir+"/"+names[r.IntN(len(names))])
			}
		case 4:
			op = opFsyncDir(dirs[r.IntN(len(dirs))])
		case 5:
			op = opRemove(path())
		default:
			op = opMkdir(dirs[1+r.IntN(len(dirs)-1)])
		}
		d.Exec(op, int64(i))
	}
}

// Every state Crash picks is one CrashStates lists; the lists contain the
// durable state first and the current view; every state is fully durable.
func TestCrashWithinCrashStates(t *testing.T) {
	total, maxStates := 0, 0
	for seed := range uint64(150) {
		r := rand.New(rand.NewPCG(seed, 1))
		d := New()
		randomHistory(r, d, 4+r.IntN(14))
		states, complete := d.CrashStatesLimit(20000)
		if !complete {
			continue
		}
		total += len(states)
		maxStates = max(maxStates, len(states))
		set := map[[32]byte]bool{}
		for _, s := range states {
			fp := s.Fingerprint()
			if set[fp] {
				t.Fatalf("seed %d: duplicate state", seed)
			}
			set[fp] = true
			if s.Pending() {
				t.Fatalf("seed %d: crash state not durable:\n%s", seed, s)
			}
		}
		if got := states[0].Files(); !maps.EqualFunc(got, d.DurableFiles(), bytes.Equal) {
			t.Fatalf("seed %d: first state %q != durable %q", seed, got, d.DurableFiles())
		}
		if !set[d.Fingerprint()] {
			t.Fatalf("seed %d: current view is not a crash state:\n%s", seed, d)
		}
		for k := range uint64(30) {
			c := d.Clone()
			c.Crash(rand.New(rand.NewPCG(seed, k)))
			if !set[c.Fingerprint()] {
				t.Fatalf("seed %d/%d: Crash produced a state CrashStates lacks:\nbefore:\n%s\nafter:\n%s", seed, k, d, c)
			}
			if c.Pending() || !maps.EqualFunc(c.Files(), c.DurableFiles(), bytes.Equal) {
				t.Fatalf("seed %d/%d: state after Crash not durable:\n%s", seed, k, c)
			}
		}
	}
	t.Logf("random histories: %d crash states enumerated, at most %d for one history", total, maxStates)
}

func TestCrashDeterministic(t *testing.T) {
	mk := func() *Disk {
		d := New()
		randomHistory(rand.New(rand.NewPCG(4, 4)), d, 30)
		return d
	}
	distinct := map[[32]byte]bool{}
	for seed := range uint64(40) {
		a, b := mk(), mk()
		a.Crash(rand.New(rand.NewPCG(seed, 9)))
		b.Crash(rand.New(rand.NewPCG(seed, 9)))
		if a.Fingerprint() != b.Fingerprint() || a.String() != b.String() {
			t.Fatalf("seed %d: same seed, different crash:\n%s\nvs\n%s", seed, a, b)
		}
		distinct[a.Fingerprint()] = true
	}
	if len(distinct) < 5 {
		t.Fatalf("40 seeds gave only %d distinct crash states", len(distinct))
	}
	// Disk's own source, and the enumeration order, are deterministic too.
	a, b := mk(), mk()
	a.SetRand(rand.New(rand.NewPCG(1, 1)))
	b.SetRand(rand.New(rand.NewPCG(1, 1)))
	a.Crash(nil)
	b.Crash(nil)
	if a.Fingerprint() != b.Fingerprint() {
		t.Fatal("Crash(nil) with equal disk sources differs")
	}
	x, y := mk().CrashStates(), mk().CrashStates()
	if len(x) != len(y) {
		t.Fatalf("enumeration sizes %d vs %d", len(x), len(y))
	}
	for i := range x {
		if x[i].Fingerprint() != y[i].Fingerprint() {
			t.Fatalf("enumeration order differs at %d", i)
		}
	}
}

func TestCrashStatesLimit(t *testing.T) {
	d := withData(t, "1\n")
	run(t, d, opWrite("data/term", "2\n"))
	if s, complete := d.CrashStatesLimit(2); len(s) != 2 || complete {
		t.Fatalf("limit 2: %d states, complete %v", len(s), complete)
	}
	if s, complete := d.CrashStatesLimit(4); len(s) != 4 || !complete {
		t.Fatalf("limit 4: %d states, complete %v", len(s), complete)
	}
	for i := range MaxEnumPending + 1 {
		run(t, d, opWrite("data/f"+string(rune('a'+i)), ""))
	}
	if s, complete := d.CrashStatesLimit(0); s != nil || complete {
		t.Fatalf("too many pending ops: %d states, complete %v", len(s), complete)
	}
}

// A kept rename whose create was dropped does not apply: the durable
// target keeps its old inode.
func TestReplaySkipsInapplicable(t *testing.T) {
	d := withData(t, "1\n")
	run(t, d, opWrite("data/term.tmp", "2\n"), opRename("data/term.tmp", "data/term"), opWrite("data/x", ""), opRemove("data/x"))
	dir := d.root.entries["data"]
	old := dir.durEntries["term"]
	if len(dir.pending) != 4 {
		t.Fatalf("%d pending ops, want 4", len(dir.pending))
	}
	m := replay(dir, []bool{false, true, false, true})
	if len(m) != 1 || m["term"] != old {
		t.Fatalf("rename without its create applied: %v", m)
	}
	m = replay(dir, []bool{true, true, true, false})
	if len(m) != 2 || m["term"] == old || m["x"] == nil {
		t.Fatalf("all but the unlink: %v", m)
	}
}

// Random crashes reach every kind of outcome.
func TestCrashCoversOutcomes(t *testing.T) {
	d := withData(t, "old\n")
	newData := string(bytes.Repeat([]byte("n"), 5000))
	run(t, d, opWrite("data/term", newData), opWrite("data/other", "o"), opFsync("data/other"))
	seen := map[string]int{}
	for seed := range uint64(400) {
		c := d.Clone()
		c.Crash(rand.New(rand.NewPCG(seed, 3)))
		got, _ := fileIn(c, "data/term")
		switch {
		case got == "old\n":
			seen["durable"]++
		case got == newData:
			seen["current"]++
		case len(got) == len(newData) && got[0] == 0:
			seen["zeroed"]++
		case len(got)%4096 == 0 && len(got) > 0:
			seen["torn 4k"]++
		case len(got)%512 == 0:
			seen["torn 512"]++
		default:
			t.Fatalf("unexpected data/term of %d bytes", len(got))
		}
		if _, ok := fileIn(c, "data/other"); ok {
			seen["create kept"]++
		} else {
			seen["create lost"]++
		}
	}
	for _, k := range []string{"durable", "current", "zeroed", "torn 4k", "torn 512", "create kept", "create lost"} {
		if seen[k] == 0 {
			t.Errorf("no crash gave %q: %v", k, seen)
		}
	}
}
