package fuzz

import (
	"errors"
	"strings"
	"testing"

	"github.com/xce-hpc/xce/sm"
)

var pointerErrs = []error{sm.ErrPointerEmpty, sm.ErrPointerSeparator, sm.ErrPointerPrefix, sm.ErrPointerSuffix}

// FuzzParsePointer: ParsePointer never panics; every error is one of its
// sentinels; a success is a version name, taken from the first line of the
// input, that re-parses from PointerContents.
func FuzzParsePointer(f *testing.F) {
	f.Add([]byte("cluster.bin.a1b2c3d4e5f6\n"))
	f.Add([]byte("cluster.bin.a1b2c3d4e5f6"))
	f.Add([]byte(""))
	f.Add([]byte("/"))
	f.Add([]byte("cluster.bin.A1B2C3D4E5F6\n"))
	f.Add([]byte("cluster.bin.a1b2c3d4e5f6\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		name, err := sm.ParsePointer(data)
		if err != nil {
			if !isOneOf(err, pointerErrs) {
				t.Fatalf("ParsePointer(%q): error %v wraps no sentinel", data, err)
			}
			if name != "" {
				t.Fatalf("ParsePointer(%q) = %q with error %v", data, name, err)
			}
			if len(data) == 0 != errors.Is(err, sm.ErrPointerEmpty) {
				t.Fatalf("ParsePointer(%q): ErrPointerEmpty iff empty input, got %v", data, err)
			}
			return
		}
		if !sm.IsVersionName(name) {
			t.Fatalf("ParsePointer(%q) = %q, not a version name", data, name)
		}
		if !strings.HasPrefix(string(data), name) || len(data) > len(name) && data[len(name)] != '\n' {
			t.Fatalf("ParsePointer(%q) = %q, not the input's first line", data, name)
		}
		again, err := sm.ParsePointer(sm.PointerContents(name))
		if err != nil || again != name {
			t.Fatalf("ParsePointer(PointerContents(%q)) = %q, %v", name, again, err)
		}
	})
}

func isOneOf(err error, sentinels []error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
