package simdisk

import (
	"bytes"
	"strings"
	"testing"

	"github.com/xce-hpc/xce/sm"
)

const (
	oldName = "cluster.bin.0123456789ab"
	newName = "cluster.bin.a1b2c3d4e5f6"
)

var (
	oldBlob = bytes.Repeat([]byte("old-config;"), 300) // 3300 B: spans 512 B and 4 KiB tearing
	newBlob = bytes.Repeat([]byte("NEW-CONFIG!"), 500) // 5500 B
)

// oldConfigDisk is a node with a complete, durable old config.
func oldConfigDisk(t *testing.T) *Disk {
	t.Helper()
	d := New()
	if err := d.PutDurable("conf/"+oldName, oldBlob, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.PutDurable("conf/current", []byte(oldName+"\n"), 1); err != nil {
		t.Fatal(err)
	}
	if err := d.PutDurable("data/term", []byte("3\n"), 1); err != nil {
		t.Fatal(err)
	}
	return d
}

// saveSequence is seed 002 §3.2 (with the directory fsync after each
// rename, DESIGN §3.3); skipVersionedDirSync drops the first FsyncDir.
func saveSequence(skipVersionedDirSync bool) []sm.FileOp {
	tmp := "conf/" + newName + ".1.tmp"
	ops := []sm.FileOp{
		{Op: sm.OpWrite, Path: tmp, Data: newBlob},
		opFsync(tmp),
		opRename(tmp, "conf/"+newName),
		opFsyncDir("conf"),
		opWrite("conf/current.1.tmp", newName+"\n"),
		opFsync("conf/current.1.tmp"),
		opRename("conf/current.1.tmp", "conf/current"),
		opFsyncDir("conf"),
	}
	if skipVersionedDirSync {
		ops = append(ops[:3], ops[4:]...)
	}
	return ops
}

// configOutcome classifies what a booting node finds: "old", "new", or a
// description of the inconsistency.
func configOutcome(s *Disk) string {
	ptr, ok := s.ReadFile("conf/current")
	if !ok {
		return "conf/current missing"
	}
	name := strings.TrimSuffix(string(ptr), "\n")
	var want []byte
	switch name + "\n" {
	case oldName + "\n":
		want = oldBlob
	case newName + "\n":
		want = newBlob
	default:
		return "conf/current is not a complete pointer: " + strings.ToValidUTF8(string(ptr), "?")
	}
	if string(ptr) != name+"\n" {
		return "conf/current torn"
	}
	blob, ok := s.ReadFile("conf/" + name)
	if !ok {
		return "conf/current names missing " + name
	}
	if !bytes.Equal(blob, want) {
		return "conf/current names incomplete " + name
	}
	if name == oldName {
		return "old"
	}
	return "new"
}

// TestSaveSequenceCrashSafe enumerates every crash state after every prefix
// of the config save sequence: a booting node always finds the complete old
// config or the complete new one, and the new one once the sequence is done.
func TestSaveSequenceCrashSafe(t *testing.T) {
	d := oldConfigDisk(t)
	ops := saveSequence(false)
	total := 0
	for i := 0; i <= len(ops); i++ {
		if i > 0 {
			run(t, d, ops[i-1])
		}
		states := d.CrashStates()
		total += len(states)
		seen := map[string]int{}
		for _, s := range states {
			out := configOutcome(s)
			seen[out]++
			if out != "old" && out != "new" {
				t.Errorf("after %d ops: %s in state:\n%s", i, out, s)
			}
			if got, _ := fileIn(s, "data/term"); got != "3\n" {
				t.Errorf("after %d ops: unrelated data/term = %q", i, got)
			}
		}
		t.Logf("after %d ops (last %s %s): %d crash states, outcomes %v", i, opName(ops, i), lastPath(ops, i), len(states), seen)
		switch {
		case i < 7 && seen["new"] > 0:
			t.Errorf("after %d ops the new config is visible before the pointer rename", i)
		case i == 7 && (seen["new"] == 0 || seen["old"] == 0):
			t.Errorf("after the pointer rename both outcomes must be possible, got %v", seen)
		case i == 8 && (len(states) != 1 || seen["new"] != 1):
			t.Errorf("after the final fsyncdir: %v", seen)
		}
	}
	t.Logf("save sequence: %d crash states enumerated over %d prefixes", total, len(ops)+1)
}

func opName(ops []sm.FileOp, i int) string {
	if i == 0 {
		return "none"
	}
	return ops[i-1].Op.String()
}

func lastPath(ops []sm.FileOp, i int) string {
	if i == 0 {
		return ""
	}
	return ops[i-1].Path
}

// Without the FsyncDir after the versioned rename, the pointer rename can
// become durable while the versioned file's name does not.
func TestSaveSequenceWithoutDirSyncDangles(t *testing.T) {
	d := oldConfigDisk(t)
	ops := saveSequence(true)
	bad, total := 0, 0
	for i := 0; i <= len(ops); i++ {
		if i > 0 {
			run(t, d, ops[i-1])
		}
		states := d.CrashStates()
		total += len(states)
		for _, s := range states {
			if configOutcome(s) == "conf/current names missing "+newName {
				bad++
			}
		}
	}
	t.Logf("without the versioned fsyncdir: %d of %d crash states have conf/current naming a missing file", bad, total)
	if bad == 0 {
		t.Fatal("no crash state has conf/current naming a missing file")
	}
}

// Also the classic mistake of not fsyncing the temp file: the pointer can
// name a versioned file whose data never reached the disk.
func TestSaveSequenceWithoutFsyncTorn(t *testing.T) {
	d := oldConfigDisk(t)
	ops := saveSequence(false)
	ops = append(ops[:1], ops[2:]...) // drop the Fsync of the versioned tmp file
	bad := 0
	for i := 0; i <= len(ops); i++ {
		if i > 0 {
			run(t, d, ops[i-1])
		}
		for _, s := range d.CrashStates() {
			if configOutcome(s) == "conf/current names incomplete "+newName {
				bad++
			}
		}
	}
	if bad == 0 {
		t.Fatal("no crash state has conf/current naming an incomplete file")
	}
}
