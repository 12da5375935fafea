package sm

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

const confValidName = "cluster.bin.a1b2c3d4e5f6"

// TestParsePointer covers each branch of the seed's
// conf_read_current_filename (seed 002 §3.2, read procedure).
func TestParsePointer(t *testing.T) {
	long := strings.Repeat("x", 300)
	tests := []struct {
		name string
		data string
		want string // on success
		err  error
	}{
		{"valid with newline", confValidName + "\n", confValidName, nil},
		{"valid without newline", confValidName, confValidName, nil},
		{"second line ignored", confValidName + "\ncluster.bin.000000000000\n", confValidName, nil},
		{"second line with separator ignored", confValidName + "\n../../etc/passwd\n", confValidName, nil},
		{"all digits", "cluster.bin.012345678901\n", "cluster.bin.012345678901", nil},
		{"empty file", "", "", ErrPointerEmpty},
		{"only a newline", "\n", "", ErrPointerPrefix},
		{"separator alone", "/", "", ErrPointerSeparator},
		{"absolute path", "/conf/" + confValidName + "\n", "", ErrPointerSeparator},
		{"relative path", "../" + confValidName + "\n", "", ErrPointerSeparator},
		{"separator in suffix", "cluster.bin.a1b2c3/4e5f6\n", "", ErrPointerSeparator},
		// fgets into a NAME_MAX (255) buffer reads at most 254 bytes.
		{"separator at byte 253 is seen", "cluster.bin." + strings.Repeat("x", 241) + "/yy\n", "", ErrPointerSeparator},
		{"separator at byte 254 is past fgets", "cluster.bin." + strings.Repeat("x", 242) + "/", "", ErrPointerSuffix},
		{"separator after fgets limit is not seen", "cluster.bin." + long + "/", "", ErrPointerSuffix},
		{"wrong prefix", "cluster.bim.a1b2c3d4e5f6\n", "", ErrPointerPrefix},
		{"old flat name", "current_config\n", "", ErrPointerPrefix},
		{"prefix case", "Cluster.bin.a1b2c3d4e5f6\n", "", ErrPointerPrefix},
		{"leading space", " " + confValidName + "\n", "", ErrPointerPrefix},
		{"prefix only", "cluster.bin.\n", "", ErrPointerSuffix},
		{"11 hex chars", "cluster.bin.a1b2c3d4e5f\n", "", ErrPointerSuffix},
		{"13 hex chars", "cluster.bin.a1b2c3d4e5f67\n", "", ErrPointerSuffix},
		{"uppercase hex", "cluster.bin.A1B2C3D4E5F6\n", "", ErrPointerSuffix},
		{"one uppercase hex char", "cluster.bin.a1b2c3d4e5F6\n", "", ErrPointerSuffix},
		{"non-hex char", "cluster.bin.a1b2c3d4e5g6\n", "", ErrPointerSuffix},
		{"CRLF", confValidName + "\r\n", "", ErrPointerSuffix},
		{"trailing space", confValidName + " \n", "", ErrPointerSuffix},
		{"temp name", confValidName + ".7.tmp\n", "", ErrPointerSuffix},
		{"embedded NUL", confValidName + "\x00\n", "", ErrPointerSuffix},
		{"long first line", "cluster.bin." + long + "\n", "", ErrPointerSuffix},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePointer([]byte(tc.data))
			if !errors.Is(err, tc.err) {
				t.Fatalf("ParsePointer(%q) error = %v, want %v", tc.data, err, tc.err)
			}
			if got != tc.want {
				t.Fatalf("ParsePointer(%q) = %q, want %q", tc.data, got, tc.want)
			}
			if err == nil && !IsVersionName(got) {
				t.Fatalf("ParsePointer returned %q, not a version name", got)
			}
		})
	}
}

func TestIsVersionName(t *testing.T) {
	for name, want := range map[string]bool{
		confValidName:                    true,
		"cluster.bin.000000000000":       true,
		"cluster.bin.A1B2C3D4E5F6":       false,
		"cluster.bin.a1b2c3d4e5f":        false,
		"cluster.bin.a1b2c3d4e5f6.1.tmp": false,
		"current":                        false,
		"":                               false,
		"xcluster.bin.a1b2c3d4e5f6":      false,
	} {
		if got := IsVersionName(name); got != want {
			t.Errorf("IsVersionName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestTagKnownVector(t *testing.T) {
	sum := sha256.Sum256(nil) // e3b0c44298fc1c149afbf4c8996fb924...
	if got, want := TagOf(nil), uint64(0xe3b0c44298fc1c14); got != want {
		t.Fatalf("TagOf(empty) = %#x, want %#x", got, want)
	}
	if got, want := VersionName(sum), "cluster.bin.e3b0c44298fc"; got != want {
		t.Fatalf("VersionName = %q, want %q", got, want)
	}
	if got, want := TagHex(TagOf(nil)), "e3b0c44298fc1c14"; got != want {
		t.Fatalf("TagHex = %q, want %q", got, want)
	}
	if got, want := TagHex(1), "0000000000000001"; got != want {
		t.Fatalf("TagHex(1) = %q, want %q", got, want)
	}
	if !NameMatches("cluster.bin.e3b0c44298fc", sum) || NameMatches("cluster.bin.e3b0c44298fd", sum) {
		t.Fatal("NameMatches wrong for the empty-blob hash")
	}
}

func TestPointerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var sum [32]byte
		copy(sum[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "sum"))
		name := VersionName(sum)
		if !IsVersionName(name) {
			t.Fatalf("VersionName %q is not a version name", name)
		}
		if !NameMatches(name, sum) {
			t.Fatalf("NameMatches(VersionName(sum), sum) is false")
		}
		got, err := ParsePointer(PointerContents(name))
		if err != nil || got != name {
			t.Fatalf("ParsePointer(PointerContents(%q)) = %q, %v", name, got, err)
		}
		if got, want := Tag(sum), binary.BigEndian.Uint64(sum[:8]); got != want {
			t.Fatalf("Tag = %#x, want %#x", got, want)
		}
		// The 12 hex chars of the name are the top 48 bits of the tag.
		if got, want := name[len(VersionPfx):], TagHex(Tag(sum))[:12]; got != want {
			t.Fatalf("name suffix %q, tag prefix %q", got, want)
		}
	})
}

func TestTagOfProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		blob := rapid.SliceOfN(rapid.Byte(), 1, 4096).Draw(t, "blob")
		sum := sha256.Sum256(blob)
		tag := TagOf(blob)
		if tag != Tag(sum) {
			t.Fatalf("TagOf = %#x, Tag(sha256) = %#x", tag, Tag(sum))
		}
		// Zero is the "no config" sentinel; a real blob hitting it is 2^-64.
		if tag == 0 {
			t.Fatalf("TagOf(%x) = 0", blob)
		}
		// Changing one byte changes the tag (with overwhelming probability).
		i := rapid.IntRange(0, len(blob)-1).Draw(t, "flip")
		other := slices.Clone(blob)
		other[i] ^= 1 << rapid.IntRange(0, 7).Draw(t, "bit")
		if TagOf(other) == tag {
			t.Fatalf("flipping a bit kept tag %#x", tag)
		}
	})
}

// confTrimCase is one generated conf/ directory and TrimPlan call.
type confTrimCase struct {
	entries []DirEntry
	target  string
	keepN   int
	live    map[uint64]bool // nil: no live function
}

func (c confTrimCase) liveFn() func(uint64) bool {
	if c.live == nil {
		return nil
	}
	return func(op uint64) bool { return c.live[op] }
}

func confHexName(b []byte) string { return fmt.Sprintf("%s%x", VersionPfx, b) }

func genConfTrimCase(t *rapid.T) confTrimCase {
	opGen := rapid.Uint64Range(0, 5)
	nameGen := rapid.OneOf(
		// versioned files (dominant)
		rapid.Map(rapid.SliceOfN(rapid.ByteRange(0, 3), 6, 6), confHexName),
		rapid.Map(rapid.SliceOfN(rapid.ByteRange(0, 3), 6, 6), confHexName),
		// temp files of a versioned file or the pointer, with an op id
		rapid.Custom(func(t *rapid.T) string {
			return fmt.Sprintf("%s.%d.tmp", confHexName(rapid.SliceOfN(rapid.ByteRange(0, 3), 6, 6).Draw(t, "v")), opGen.Draw(t, "op"))
		}),
		rapid.Map(opGen, func(op uint64) string { return fmt.Sprintf("current.%d.tmp", op) }),
		// temp files without a parsable op id, and names trim must ignore
		rapid.SampledFrom([]string{
			".tmp", "x.tmp", "current.tmp", "current.-1.tmp", "current.18446744073709551616.tmp",
			"current", "lock", "cluster.bin", "cluster.bin.A1B2C3D4E5F6", "cluster.bin.a1b2c3d4e5f",
			"cluster.bin.a1b2c3d4e5f6.bak", "current_config",
		}),
	)
	entryGen := rapid.Custom(func(t *rapid.T) DirEntry {
		return DirEntry{
			Name:    nameGen.Draw(t, "name"),
			Size:    rapid.Int64Range(0, 100).Draw(t, "size"),
			ModTime: rapid.Int64Range(0, 6).Draw(t, "mtime"), // small range: ties
		}
	})
	c := confTrimCase{
		entries: rapid.SliceOfDistinct(entryGen, func(e DirEntry) string { return e.Name }).Draw(t, "entries"),
		keepN:   rapid.IntRange(-1, 5).Draw(t, "keepN"),
	}
	var versions []string
	for _, e := range c.entries {
		if IsVersionName(e.Name) {
			versions = append(versions, e.Name)
		}
	}
	switch mode := rapid.IntRange(0, 2).Draw(t, "target mode"); {
	case mode == 0 && len(versions) > 0: // the usual case: conf/current names a listed file
		c.target = rapid.SampledFrom(versions).Draw(t, "target")
	case mode == 1: // no pointer yet
	default: // pointer names a file missing from the listing
		c.target = "cluster.bin.ffffffffffff"
	}
	if rapid.Bool().Draw(t, "has live") {
		c.live = map[uint64]bool{}
		for _, op := range rapid.SliceOf(opGen).Draw(t, "live ops") {
			c.live[op] = true
		}
	}
	// Listings come sorted by name (OpList); TrimPlan must not rely on it.
	if rapid.Bool().Draw(t, "sorted") {
		sort.Slice(c.entries, func(i, j int) bool { return c.entries[i].Name < c.entries[j].Name })
	}
	return c
}

// newer is the reference "newest first" order: mtime, then name.
func confNewer(a, b DirEntry) bool {
	if a.ModTime != b.ModTime {
		return a.ModTime > b.ModTime
	}
	return a.Name > b.Name
}

// refConfTrim is a deliberately different implementation of TrimPlan's
// contract: a version is deleted when at least "slots" other candidate
// versions are newer; a .tmp is deleted unless its op id parses and is live.
func refConfTrim(c confTrimCase) []string {
	k := max(c.keepN, 1)
	slots := k
	if c.target != "" {
		slots--
	}
	var del []string
	for _, e := range c.entries {
		if e.Name == c.target {
			continue
		}
		if IsVersionName(e.Name) {
			n := 0
			for _, o := range c.entries {
				if o.Name != c.target && IsVersionName(o.Name) && confNewer(o, e) {
					n++
				}
			}
			if n >= slots {
				del = append(del, e.Name)
			}
			continue
		}
		if !strings.HasSuffix(e.Name, ".tmp") {
			continue
		}
		f := strings.Split(strings.TrimSuffix(e.Name, ".tmp"), ".")
		var op uint64
		_, err := fmt.Sscanf(f[len(f)-1], "%d", &op)
		parsed := len(f) > 1 && err == nil && fmt.Sprint(op) == f[len(f)-1]
		if !(parsed && c.live != nil && c.live[op]) {
			del = append(del, e.Name)
		}
	}
	sort.Strings(del)
	return del
}

func TestTrimPlanProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genConfTrimCase(t)
		got := TrimPlan(slices.Clone(c.entries), c.target, c.keepN, c.liveFn())

		inInput := map[string]DirEntry{}
		for _, e := range c.entries {
			inInput[e.Name] = e
		}
		deleted := map[string]bool{}
		for i, name := range got {
			if _, ok := inInput[name]; !ok {
				t.Fatalf("deletes %q, which is not in the listing", name)
			}
			if deleted[name] {
				t.Fatalf("deletes %q twice", name)
			}
			deleted[name] = true
			if i > 0 && got[i-1] >= name {
				t.Fatalf("output not sorted: %q", got)
			}
		}
		if deleted[c.target] {
			t.Fatalf("deletes the pointer target %q", c.target)
		}

		var kept, dropped []DirEntry
		nVersions := 0
		for _, e := range c.entries {
			op, hasOp := tmpOwner(e.Name)
			switch {
			case e.Name == c.target:
				if IsVersionName(e.Name) {
					nVersions++
				}
			case IsVersionName(e.Name):
				nVersions++
				if deleted[e.Name] {
					dropped = append(dropped, e)
				} else {
					kept = append(kept, e)
				}
			case strings.HasSuffix(e.Name, ".tmp"):
				isLive := hasOp && c.live != nil && c.live[op]
				if isLive && deleted[e.Name] {
					t.Fatalf("deletes live temp file %q", e.Name)
				}
				if !isLive && !deleted[e.Name] {
					t.Fatalf("keeps stale temp file %q", e.Name)
				}
			default:
				if deleted[e.Name] {
					t.Fatalf("deletes %q, neither a version nor a temp file", e.Name)
				}
			}
		}

		// Kept versioned files: exactly min(keepN, #versions), the target
		// counted as kept. A target missing from the listing still holds
		// its slot (it is what conf/current names).
		_, targetListed := inInput[c.target]
		keptCount := len(kept)
		wantKept := min(max(c.keepN, 1), nVersions)
		if c.target != "" && !targetListed {
			wantKept = min(max(c.keepN, 1)-1, nVersions)
		}
		if c.target != "" && targetListed {
			keptCount++
		}
		if keptCount != wantKept {
			t.Fatalf("keeps %d versioned files (target %q listed=%v), want %d of %d with keepN=%d; plan %q",
				keptCount, c.target, targetListed, wantKept, nVersions, c.keepN, got)
		}
		// The kept ones are the newest by mtime.
		for _, k := range kept {
			for _, d := range dropped {
				if k.ModTime < d.ModTime {
					t.Fatalf("keeps %q (mtime %d) but deletes newer %q (mtime %d)", k.Name, k.ModTime, d.Name, d.ModTime)
				}
			}
		}

		if want := refConfTrim(c); !slices.Equal(got, want) {
			t.Fatalf("TrimPlan = %q, reference model = %q", got, want)
		}

		// Deterministic whatever the listing order.
		perm := rapid.Permutation(c.entries).Draw(t, "perm")
		if again := TrimPlan(perm, c.target, c.keepN, c.liveFn()); !slices.Equal(again, got) {
			t.Fatalf("TrimPlan depends on listing order: %q vs %q", again, got)
		}
	})
}

func TestTrimPlanExamples(t *testing.T) {
	v := func(s string, mt int64) DirEntry { return DirEntry{Name: VersionPfx + s, ModTime: mt} }
	live3 := func(op uint64) bool { return op == 3 }
	tests := []struct {
		name    string
		entries []DirEntry
		target  string
		keepN   int
		live    func(uint64) bool
		want    []string
	}{
		{"default keep 2: target plus newest other",
			[]DirEntry{v("000000000001", 1), v("000000000002", 2), v("000000000003", 3), {Name: "current"}},
			VersionPfx + "000000000003", 2, nil,
			[]string{VersionPfx + "000000000001"}},
		{"old target is kept over newer files",
			[]DirEntry{v("000000000001", 1), v("000000000002", 2), v("000000000003", 3)},
			VersionPfx + "000000000001", 2, nil,
			[]string{VersionPfx + "000000000002"}},
		{"keepN 0 acts as 1",
			[]DirEntry{v("000000000001", 1), v("000000000002", 2)},
			VersionPfx + "000000000001", 0, nil,
			[]string{VersionPfx + "000000000002"}},
		{"no target keeps newest keepN",
			[]DirEntry{v("000000000001", 1), v("000000000002", 2), v("000000000003", 3)},
			"", 2, nil,
			[]string{VersionPfx + "000000000001"}},
		{"mtime tie broken by name",
			[]DirEntry{v("00000000000a", 5), v("00000000000b", 5)},
			"", 1, nil,
			[]string{VersionPfx + "00000000000a"}},
		{"temp files: live kept, stale and unparsable deleted",
			[]DirEntry{{Name: "current.3.tmp"}, {Name: "current.4.tmp"}, {Name: VersionPfx + "000000000001.3.tmp"}, {Name: "junk.tmp"}, {Name: "notes.txt"}},
			"", 2, live3,
			[]string{"current.4.tmp", "junk.tmp"}},
		{"nil live: every temp file is stale",
			[]DirEntry{{Name: "current.3.tmp"}},
			"", 2, nil,
			[]string{"current.3.tmp"}},
		{"empty directory", nil, "", 2, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TrimPlan(tc.entries, tc.target, tc.keepN, tc.live); !slices.Equal(got, tc.want) {
				t.Fatalf("TrimPlan = %q, want %q", got, tc.want)
			}
		})
	}
}
