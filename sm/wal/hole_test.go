package wal

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/xce-hpc/xce/schema"
)

// bigRecs are n enqueues of about 300 bytes each, LSNs 1..n.
func bigRecs(n int) []*schema.WalRecord {
	recs := make([]*schema.WalRecord, n)
	for i := range recs {
		r := enqueueRec(uint64(i + 1))
		p := []byte("payload-")
		for len(p) < 300 {
			p = append(p, byte('a'+(i+len(p))%26))
		}
		r.GetEnqueue().Payload = p
		recs[i] = r
	}
	return recs
}

// TestHoleBeforeLaterDataIsTorn: an unsynced append whose later sectors
// reached the disk before an earlier one leaves a zeroed sector and then
// valid frames. That is a torn tail (validLen at the first bad frame), not
// corruption; and a tail ending in garbage is torn too, never a record.
func TestHoleBeforeLaterDataIsTorn(t *testing.T) {
	recs := bigRecs(30)
	data, offs := segment(t, recs)
	for s := SectorSize; s+SectorSize < len(data)-SectorSize; s += SectorSize {
		in := append([]byte(nil), data...)
		clear(in[s : s+SectorSize])
		got, n, err := Scan(in)
		if err != nil {
			t.Fatalf("hole at %d: %v", s, err)
		}
		k := 0
		for k+1 < len(offs) && offs[k+1] <= s {
			k++
		}
		if n != offs[k] || len(got) != k {
			t.Fatalf("hole at %d: validLen %d with %d records, want %d with %d", s, n, len(got), offs[k], k)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for s := SectorSize; s < len(data); s += SectorSize {
		in := append([]byte(nil), data[:s]...)
		for len(in) < len(data) {
			in = append(in, byte(r.Uint32()))
		}
		got, n, err := Scan(in)
		if err != nil || n > s || len(got) > len(recs) {
			t.Fatalf("garbage from %d: %d records, validLen %d, %v", s, len(got), n, err)
		}
		for i, g := range got {
			if g.GetLsn() != uint64(i+1) || offs[i+1] > s {
				t.Fatalf("garbage from %d: record %d (lsn %d) accepted beyond the good prefix", s, i, g.GetLsn())
			}
		}
	}
	// A flipped bit is never taken for a hole: mid-log it stays corruption.
	in := append([]byte(nil), data...)
	in[offs[10]+20] ^= 4
	if _, _, err := Scan(in); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bit flip in record 11: %v, want corruption", err)
	}
	// A short hole (less than a sector of zeros) before valid frames is
	// corruption, as before.
	in = append([]byte(nil), data...)
	clear(in[offs[10] : offs[10]+HeaderSize])
	if _, _, err := Scan(in); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("zeroed header of record 11: %v, want corruption", err)
	}
}
