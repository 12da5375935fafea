package sm_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/wal"
)

// TestTermFileRotRefused: data/term carries a CRC32C, so bit rot that
// would lower the term or change the vote is refused (the node stops with
// fatal.term naming the file) instead of letting it vote twice in a term.
// Files without the checksum, written before it existed, still parse.
func TestTermFileRotRefused(t *testing.T) {
	for _, body := range []string{"1", "3 1", "17 0", "123456 4"} {
		file := []byte(fmt.Sprintf("%s crc32c=%08x\n", body, wal.Checksum([]byte(body))))
		wantT, wantV, err := sm.ParseTermVote([]byte(body + "\n"))
		if err != nil {
			t.Fatalf("legacy %q: %v", body, err)
		}
		if gt, gv, err := sm.ParseTermVote(file); err != nil || gt != wantT || gv != wantV {
			t.Fatalf("%q: term %d vote %d err %v, want %d %d", file, gt, gv, err, wantT, wantV)
		}
		for i := range file {
			for bit := range 8 {
				rot := append([]byte(nil), file...)
				rot[i] ^= 1 << bit
				gt, gv, err := sm.ParseTermVote(rot)
				if !errors.Is(err, sm.ErrBadTermFile) {
					t.Fatalf("%q with byte %d bit %d flipped (%q): accepted as term %d vote %d", file, i, bit, rot, gt, gv)
				}
			}
		}
	}
}
