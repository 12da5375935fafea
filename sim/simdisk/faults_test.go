package simdisk

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/xce-hpc/xce/sm"
)

// TestFsyncGateDropsDirtyData: with FsyncGate, a failed fsync reverts the
// file to its durable contents; a retried fsync succeeds and makes nothing
// of the dropped data durable. Without it the data stays dirty and a retry
// persists it (the kernel kept the pages).
func TestFsyncGateDropsDirtyData(t *testing.T) {
	for _, gate := range []bool{false, true} {
		d := New()
		run(t, d, opMkdir("data"), opFsyncDir(""),
			sm.FileOp{Op: sm.OpAppend, Path: "data/w", Data: []byte("synced.")},
			opFsync("data/w"), opFsyncDir("data"),
			sm.FileOp{Op: sm.OpAppend, Path: "data/w", Data: []byte("dirty")})
		d.SetFaults(Faults{FsyncErr: 1, FsyncGate: gate})
		d.SetRand(rand.New(rand.NewPCG(1, 1)))
		if r := d.Exec(opFsync("data/w"), 0); r.Err != sm.IOFailed {
			t.Fatalf("gate=%v: fsync = %s", gate, r.Err)
		}
		d.SetFaults(Faults{})
		run(t, d, opFsync("data/w"))
		want := "synced.dirty"
		if gate {
			want = "synced."
		}
		if got, _ := fileIn(d, "data/w"); got != want {
			t.Fatalf("gate=%v: read %q after the failed fsync, want %q", gate, got, want)
		}
		if got, _ := d.DurableFile("data/w"); string(got) != want {
			t.Fatalf("gate=%v: durable %q after the retried fsync, want %q", gate, got, want)
		}
	}
}

// TestShortWrite: a failing write with ShortWrite stores a proper prefix
// (unsynced) and still reports the error; without it nothing changes.
func TestShortWrite(t *testing.T) {
	d := New()
	run(t, d, sm.FileOp{Op: sm.OpAppend, Path: "w", Data: []byte("head.")}, opFsync("w"), opFsyncDir(""))
	d.SetFaults(Faults{NoSpace: 1, ShortWrite: 1})
	d.SetRand(rand.New(rand.NewPCG(7, 7)))
	data := bytes.Repeat([]byte("x"), 100)
	r := d.Exec(sm.FileOp{Op: sm.OpAppend, Path: "w", Data: data}, 0)
	if r.Err != sm.IONoSpace {
		t.Fatalf("short append = %s", r.Err)
	}
	got, _ := fileIn(d, "w")
	if n := len(got) - len("head."); n < 1 || n >= len(data) || got[:5] != "head." {
		t.Fatalf("short append left %q (%d new bytes)", got, n)
	}
	if dur, _ := d.DurableFile("w"); string(dur) != "head." {
		t.Fatalf("short append is durable: %q", dur)
	}
	d.SetFaults(Faults{WriteErr: 1})
	before := d.Fingerprint()
	if r := d.Exec(opWrite("w", "replaced"), 0); r.Err != sm.IOFailed || d.Fingerprint() != before {
		t.Fatalf("failed write without ShortWrite: %s, changed=%v", r.Err, d.Fingerprint() != before)
	}
	d.SetFaults(Faults{})
	run(t, d, opMkdir("already"))
	d.SetFaults(Faults{NoSpace: 1})
	if r := d.Exec(opMkdir("new"), 0); r.Err != sm.IONoSpace {
		t.Fatalf("mkdir on a full disk = %s", r.Err)
	}
	if r := d.Exec(opRename("w", "v"), 0); r.Err != sm.IONoSpace {
		t.Fatalf("rename on a full disk = %s", r.Err)
	}
}

// TestGarbageAndHoles: an unsynced append may crash into a tail ending in
// garbage or a zeroed hole followed by later data — enumerated, drawn by
// Crash only with TornGarbage, and never touching the fsync'd prefix.
func TestGarbageAndHoles(t *testing.T) {
	d := New()
	synced := bytes.Repeat([]byte{'a'}, 1000)
	more := bytes.Repeat([]byte{'b'}, 9000)
	run(t, d, sm.FileOp{Op: sm.OpAppend, Path: "w", Data: synced}, opFsync("w"), opFsyncDir(""),
		sm.FileOp{Op: sm.OpAppend, Path: "w", Data: more})
	full := append(bytes.Clone(synced), more...)
	kind := func(got []byte) string {
		switch {
		case !bytes.HasPrefix(got, synced):
			return "lost-prefix"
		case len(got) == len(full) && bytes.Equal(got, full):
			return "new"
		case len(got) == len(full) && !bytes.ContainsFunc(got[len(synced):], func(r rune) bool { return r != 0 }):
			return "zeroed"
		case len(got) == len(full):
			tail := got[len(synced):]
			if i := bytes.IndexByte(tail, 0); i >= 0 && (len(synced)+i)%512 == 0 {
				z := len(synced) + i
				j := z
				for j < len(got) && got[j] == 0 {
					j++
				}
				if j < len(got) && bytes.Equal(got[j:], full[j:]) && j-z >= 512 {
					return "hole"
				}
				if j == len(got) {
					return "zeroed"
				}
			}
			for i := len(synced); i < len(got); i++ {
				if got[i] != full[i] {
					if i%512 == 0 || i == len(synced) {
						return "garbage"
					}
					return "garbage-unaligned"
				}
			}
		}
		return "other"
	}
	seen := map[string]int{}
	for _, st := range d.CrashStates() {
		seen[kind(st.Files()["w"])]++
	}
	if seen["hole"] == 0 || seen["garbage"] == 0 || seen["lost-prefix"] > 0 || seen["garbage-unaligned"] > 0 {
		t.Fatalf("crash states by kind: %v", seen)
	}
	draw := func(garbage bool) map[string]int {
		m := map[string]int{}
		for seed := uint64(0); seed < 300; seed++ {
			c := d.Clone()
			c.SetFaults(Faults{TornGarbage: garbage})
			c.Crash(rand.New(rand.NewPCG(seed, 3)))
			m[kind(c.Files()["w"])]++
		}
		return m
	}
	if m := draw(false); m["hole"]+m["garbage"]+m["lost-prefix"] > 0 {
		t.Fatalf("Crash without TornGarbage drew %v", m)
	}
	if m := draw(true); m["hole"] == 0 || m["garbage"] == 0 || m["lost-prefix"]+m["garbage-unaligned"] > 0 {
		t.Fatalf("Crash with TornGarbage drew %v", m)
	}
}
