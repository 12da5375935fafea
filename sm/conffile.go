package sm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Paths of the config store, relative to the node's base directory
// (seed 002 §3.1).
const (
	ConfDir      = "conf"
	PointerPath  = "conf/current"
	VersionPfx   = "cluster.bin."
	pointerName  = "current"
	tmpSuffix    = ".tmp"
	hexTagLen    = 12
	nameMaxBytes = 255 // NAME_MAX: the seed reads the pointer with fgets into a NAME_MAX buffer
)

// Sentinel errors of the pointer-file read procedure (seed 002 §3.2).
var (
	ErrPointerEmpty     = errors.New("conf/current is empty")
	ErrPointerSeparator = errors.New("conf/current contains path separator — corrupted pointer file")
	ErrPointerPrefix    = errors.New("conf/current filename does not start with 'cluster.bin.'")
	ErrPointerSuffix    = errors.New("conf/current suffix is not 12 hex chars")
)

// ParsePointer validates the contents of conf/current exactly as the seed's
// conf_read_current_filename: first line only, trailing newline stripped, no
// '/', the "cluster.bin." prefix and exactly 12 lowercase hex chars. It
// returns the versioned file name.
func ParsePointer(data []byte) (string, error) {
	if len(data) == 0 {
		return "", ErrPointerEmpty
	}
	line := data
	if len(line) > nameMaxBytes-1 {
		line = line[:nameMaxBytes-1] // fgets stops at outsz-1 bytes
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	name := string(line)
	if strings.Contains(name, "/") {
		return "", ErrPointerSeparator
	}
	if !strings.HasPrefix(name, VersionPfx) {
		return "", fmt.Errorf("%w: %q", ErrPointerPrefix, name)
	}
	if !isHexTag(name[len(VersionPfx):]) {
		return "", fmt.Errorf("%w: %q", ErrPointerSuffix, name[len(VersionPfx):])
	}
	return name, nil
}

// PointerContents is what conf/current holds for versioned file name.
func PointerContents(name string) []byte { return []byte(name + "\n") }

func isHexTag(s string) bool {
	if len(s) != hexTagLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// IsVersionName reports whether name is a versioned config file name.
func IsVersionName(name string) bool {
	return strings.HasPrefix(name, VersionPfx) && isHexTag(name[len(VersionPfx):])
}

// Tag is the config version tag: the first 8 bytes of the SHA-256,
// big-endian (seed 002 §4). Zero means "no config".
func Tag(sum [32]byte) uint64 { return binary.BigEndian.Uint64(sum[:8]) }

// TagOf hashes blob and returns its tag.
func TagOf(blob []byte) uint64 { return Tag(sha256.Sum256(blob)) }

// VersionName is the versioned file name for a config with hash sum: the
// first 12 hex chars of the SHA-256.
func VersionName(sum [32]byte) string { return VersionPfx + hex.EncodeToString(sum[:6]) }

// NameMatches reports whether versioned file name is the right name for
// contents with hash sum.
func NameMatches(name string, sum [32]byte) bool { return name == VersionName(sum) }

// TagHex formats a tag as the seed's %016x.
func TagHex(tag uint64) string { return fmt.Sprintf("%016x", tag) }

// versionTmpName is a per-operation temp name for a versioned file; op makes
// it unique across concurrent saves (seed 002 §10.11, pthread_self there).
func versionTmpName(sum [32]byte, op uint64) string {
	return VersionName(sum) + "." + strconv.FormatUint(op, 10) + tmpSuffix
}

func pointerTmpName(op uint64) string {
	return pointerName + "." + strconv.FormatUint(op, 10) + tmpSuffix
}

// tmpOwner returns the operation id embedded in a temp name, if any.
func tmpOwner(name string) (uint64, bool) {
	if !strings.HasSuffix(name, tmpSuffix) {
		return 0, false
	}
	base := strings.TrimSuffix(name, tmpSuffix)
	i := strings.LastIndexByte(base, '.')
	if i < 0 {
		return 0, false
	}
	op, err := strconv.ParseUint(base[i+1:], 10, 64)
	return op, err == nil
}

// TrimPlan decides which conf/ entries the trim pass deletes (seed 002 §3.3,
// §10.9): versioned files beyond the newest keepN by mtime, never target
// (the file conf/current names, counted as one of the keepN), and every
// stale .tmp file whose operation is not live. The result is sorted.
func TrimPlan(entries []DirEntry, target string, keepN int, live func(op uint64) bool) []string {
	if keepN < 1 {
		keepN = 1
	}
	var versions []DirEntry
	var del []string
	for _, e := range entries {
		switch {
		case e.Name == target:
		case IsVersionName(e.Name):
			versions = append(versions, e)
		case strings.HasSuffix(e.Name, tmpSuffix):
			if op, ok := tmpOwner(e.Name); ok && live != nil && live(op) {
				continue
			}
			del = append(del, e.Name)
		}
	}
	sort.Slice(versions, func(i, j int) bool {
		if versions[i].ModTime != versions[j].ModTime {
			return versions[i].ModTime > versions[j].ModTime
		}
		return versions[i].Name > versions[j].Name
	})
	keep := keepN
	if target != "" {
		keep-- // the pointer target is always kept and counts toward keepN
	}
	for i, e := range versions {
		if i >= keep {
			del = append(del, e.Name)
		}
	}
	sort.Strings(del)
	return del
}
