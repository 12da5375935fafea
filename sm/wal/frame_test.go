package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/xce-hpc/xce/schema"
)

func TestAppendFrameLayout(t *testing.T) {
	rec := enqueueRec(1)
	data, err := AppendFrame([]byte("prefix"), rec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("prefix")) {
		t.Fatal("dst prefix lost")
	}
	f := data[len("prefix"):]
	n := binary.LittleEndian.Uint32(f)
	if int(n) != len(f)-HeaderSize {
		t.Fatalf("length %d, payload %d", n, len(f)-HeaderSize)
	}
	if got, want := binary.LittleEndian.Uint32(f[4:]), Checksum(f[HeaderSize:]); got != want {
		t.Fatalf("crc %08x, want %08x", got, want)
	}
	// CRC32C, not IEEE: the check value of "123456789" is e3069283.
	if c := Checksum([]byte("123456789")); c != 0xe3069283 {
		t.Fatalf("Checksum is not CRC32C: %08x", c)
	}
}

func TestAppendFrameRefusals(t *testing.T) {
	big := enqueueRec(1)
	big.GetEnqueue().Payload = make([]byte, MaxRecordSize)
	justFits := enqueueRec(1)
	justFits.GetEnqueue().Payload = nil
	justFits.GetEnqueue().Payload = make([]byte, MaxRecordSize-justFitsOverhead(t, justFits))
	for _, tc := range []struct {
		name string
		rec  *schema.WalRecord
		want error
	}{
		{"nil", nil, ErrBadRecord},
		{"lsn0", &schema.WalRecord{Now: 5}, ErrBadRecord},
		{"too big", big, ErrRecordTooBig},
		{"exactly max", justFits, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte{1, 2, 3}
			out, err := AppendFrame(dst, tc.rec)
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if err != nil {
				if !bytes.Equal(out, dst) {
					t.Fatalf("dst changed on error: %x", out)
				}
				return
			}
			if len(out)-3-HeaderSize != MaxRecordSize {
				t.Fatalf("payload %d, want exactly %d", len(out)-3-HeaderSize, MaxRecordSize)
			}
			recs, n, err := Scan(out[3:])
			if err != nil || n != len(out)-3 || len(recs) != 1 {
				t.Fatalf("Scan of a max-size frame: %d recs, %d, %v", len(recs), n, err)
			}
		})
	}
}

// justFitsOverhead is the encoded size of rec minus its payload bytes.
func justFitsOverhead(t *testing.T, rec *schema.WalRecord) int {
	t.Helper()
	// A payload of ~1 MiB needs a 3-byte length varint; measure with one.
	rec.GetEnqueue().Payload = make([]byte, 1<<20)
	return marshalOpts.Size(rec) - 1<<20
}

func TestScanRoundTrip(t *testing.T) {
	want := sampleRecs()
	data, _ := segment(t, want)
	got, n, err := Scan(data)
	if err != nil || n != len(data) {
		t.Fatalf("Scan: n=%d/%d err=%v", n, len(data), err)
	}
	sameRecs(t, got, want)

	if recs, n, err := Scan(nil); err != nil || n != 0 || len(recs) != 0 {
		t.Fatalf("Scan(nil) = %v, %d, %v", recs, n, err)
	}
}

func TestWalkOffsetsAndStop(t *testing.T) {
	recs := sampleRecs()
	data, offs := segment(t, recs)
	var seen []int
	n, err := Walk(data, func(off int, rec *schema.WalRecord) error {
		if rec.GetLsn() != uint64(len(seen)+1) {
			t.Fatalf("offset %d: LSN %d", off, rec.GetLsn())
		}
		seen = append(seen, off)
		return nil
	})
	if err != nil || n != len(data) {
		t.Fatal(n, err)
	}
	if !equalInts(seen, offs[:len(offs)-1]) {
		t.Fatalf("offsets %v, want %v", seen, offs[:len(offs)-1])
	}
	stop := errors.New("stop")
	n, err = Walk(data, func(off int, rec *schema.WalRecord) error {
		if rec.GetLsn() == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != offs[2] {
		t.Fatalf("stop: n=%d err=%v, want %d, stop", n, err, offs[2])
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Cutting a segment at every byte offset (and zero-filling the rest, as a
// torn write of a preallocated or zeroed page leaves it) yields the
// records whose frames end at or before the cut, never an error.
func TestTornTailEveryOffset(t *testing.T) {
	want := sampleRecs()
	data, offs := segment(t, want)
	for cut := 0; cut <= len(data); cut++ {
		for _, tail := range []string{"cut", "zeroed", "ones"} {
			in := append([]byte(nil), data[:cut]...)
			switch tail {
			case "zeroed":
				in = append(in, make([]byte, len(data)-cut+4096)...)
			case "ones":
				in = append(in, bytes.Repeat([]byte{0xff}, len(data)-cut)...)
			}
			// Frames wholly intact: normally those ending at or before the
			// cut, but a fill byte can equal the lost one (an empty
			// message ends in 0x00).
			full := 0
			for full+1 < len(offs) && offs[full+1] <= len(in) && bytes.Equal(in[:offs[full+1]], data[:offs[full+1]]) {
				full++
			}
			if full < len(offs)-1 && offs[full+1] <= cut {
				t.Fatalf("cut %d: frame %d ends before the cut but differs", cut, full)
			}
			got, n, err := Scan(in)
			if err != nil {
				t.Fatalf("cut %d %s: %v", cut, tail, err)
			}
			if n != offs[full] {
				t.Fatalf("cut %d %s: validLen %d, want %d", cut, tail, n, offs[full])
			}
			sameRecs(t, got, want[:full])
		}
	}
}

func TestZeroedTail(t *testing.T) {
	want := sampleRecs()
	data, _ := segment(t, want)
	in := append(append([]byte(nil), data...), make([]byte, 1<<16)...)
	got, n, err := Scan(in)
	if err != nil || n != len(data) {
		t.Fatalf("n=%d/%d err=%v", n, len(data), err)
	}
	sameRecs(t, got, want)
	// An all-zero segment (preallocated, nothing written) is empty.
	if recs, n, err := Scan(make([]byte, 4096)); err != nil || n != 0 || len(recs) != 0 {
		t.Fatalf("zero segment: %d recs, %d, %v", len(recs), n, err)
	}
}

// A flipped bit anywhere in a middle frame, with valid frames after it, is
// corruption reported at that frame's offset.
func TestFlippedBitInMiddleRecord(t *testing.T) {
	want := sampleRecs()
	data, offs := segment(t, want)
	mid := len(want) / 2
	for pos := offs[mid]; pos < offs[mid+1]; pos++ {
		for bit := 0; bit < 8; bit++ {
			in := append([]byte(nil), data...)
			in[pos] ^= 1 << bit
			got, n, err := Scan(in)
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d bit %d: err %v, want *CorruptError", pos, bit, err)
			}
			if ce.Offset != offs[mid] || ce.ValidAt != offs[mid+1] || n != offs[mid] {
				t.Fatalf("byte %d bit %d: %+v n=%d, want offset %d, valid at %d", pos, bit, ce, n, offs[mid], offs[mid+1])
			}
			sameRecs(t, got, want[:mid])
			if !strings.Contains(err.Error(), "offset") {
				t.Fatalf("message names no offset: %v", err)
			}
		}
	}
	// The same flip in the last frame is indistinguishable from a torn
	// write: the tail is dropped, no error.
	last := len(want) - 1
	in := append([]byte(nil), data...)
	in[offs[last]+HeaderSize+2] ^= 0x10
	got, n, err := Scan(in)
	if err != nil || n != offs[last] {
		t.Fatalf("flip in last frame: n=%d err=%v", n, err)
	}
	sameRecs(t, got, want[:last])
}

func header(n, crc uint32) []byte {
	h := make([]byte, HeaderSize)
	binary.LittleEndian.PutUint32(h, n)
	binary.LittleEndian.PutUint32(h[4:], crc)
	return h
}

// rawFrame frames an arbitrary payload (bypassing AppendFrame's checks).
func rawFrame(p []byte) []byte { return append(header(uint32(len(p)), Checksum(p)), p...) }

func mustMarshal(t *testing.T, r *schema.WalRecord) []byte {
	t.Helper()
	b, err := marshalOpts.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestScanCorruptionCases(t *testing.T) {
	good, offs := segment(t, sampleRecs()[:3])
	after, _ := segment(t, []*schema.WalRecord{enqueueRec(10)})
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name    string
		data    []byte
		recs    int
		valid   int
		corrupt bool // else a tail
		offset  int
		validAt int
		reason  string
	}{
		{name: "huge length tail", data: cat(good, header(0xffffffff, 0), []byte("abc")), recs: 3, valid: len(good)},
		{name: "huge length then valid", data: cat(good, header(0xffffffff, 0), after), recs: 3, valid: len(good),
			corrupt: true, offset: len(good), validAt: len(good) + HeaderSize, reason: "exceeds the maximum"},
		{name: "max+1 length then valid", data: cat(good, header(MaxRecordSize+1, 0), after), recs: 3, valid: len(good),
			corrupt: true, offset: len(good), validAt: len(good) + HeaderSize, reason: "exceeds the maximum"},
		{name: "length past end tail", data: cat(good, header(1000, 0), make([]byte, 100)), recs: 3, valid: len(good)},
		{name: "zero length then valid", data: cat(good, header(0, 0), after), recs: 3, valid: len(good),
			corrupt: true, offset: len(good), validAt: len(good) + HeaderSize, reason: "zero length"},
		{name: "garbage between frames", data: cat(good, []byte("garbage!!"), after), recs: 3, valid: len(good),
			corrupt: true, offset: len(good), validAt: len(good) + 9},
		{name: "lsn repeats", data: cat(good, rawFrame(mustMarshal(t, enqueueRec(3)))), recs: 3, valid: len(good),
			corrupt: true, offset: len(good), validAt: -1, reason: "LSN 3 does not increase (previous 3)"},
		{name: "lsn goes back", data: cat(good, rawFrame(mustMarshal(t, enqueueRec(1)))), recs: 3, valid: len(good),
			corrupt: true, offset: len(good), validAt: -1, reason: "LSN 1 does not increase"},
		{name: "lsn 0 first", data: rawFrame(mustMarshal(t, &schema.WalRecord{Now: 1, Op: &schema.WalRecord_Tick{Tick: &schema.WalTick{}}})),
			corrupt: true, offset: 0, validAt: -1, reason: "LSN 0 does not increase"},
		{name: "crc ok but undecodable", data: cat(good, rawFrame([]byte{0xff, 0xff, 0xff})), recs: 3, valid: len(good),
			corrupt: true, offset: len(good), validAt: -1, reason: "does not decode"},
		{name: "second frame's crc wrong", data: func() []byte {
			d := append([]byte(nil), good...)
			d[offs[1]+4] ^= 1
			return d
		}(), recs: 1, valid: offs[1], corrupt: true, offset: offs[1], validAt: offs[2], reason: "checksum mismatch"},
		{name: "lower lsn after garbage is not a valid frame", data: cat(good, []byte("xx"), rawFrame(mustMarshal(t, enqueueRec(2)))),
			recs: 3, valid: len(good)},
		{name: "header only", data: cat(good, header(5, 0)), recs: 3, valid: len(good)},
		{name: "short header", data: cat(good, []byte{5, 0, 0}), recs: 3, valid: len(good)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, n, err := Scan(tc.data)
			if len(recs) != tc.recs || n != tc.valid {
				t.Fatalf("%d records, validLen %d; want %d, %d (err %v)", len(recs), n, tc.recs, tc.valid, err)
			}
			if !tc.corrupt {
				if err != nil {
					t.Fatalf("want a tail, got %v", err)
				}
				return
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err %v, want *CorruptError", err)
			}
			if ce.Offset != tc.offset || ce.ValidAt != tc.validAt || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("%+v, want offset %d validAt %d reason ~%q", ce, tc.offset, tc.validAt, tc.reason)
			}
		})
	}
}

// A bogus length is never allocated: scanning 16 bytes that claim a 1 MiB
// record allocates far less than that.
func TestBogusLengthDoesNotAllocate(t *testing.T) {
	in := append(header(MaxRecordSize, 0), make([]byte, 8)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 10; i++ {
		if _, _, err := Scan(in); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 64<<10 {
		t.Fatalf("10 scans of a 16-byte input allocated %d bytes", d)
	}
}

func TestDecodeRecord(t *testing.T) {
	for _, want := range sampleRecs() {
		got, err := DecodeRecord(mustMarshal(t, want))
		if err != nil {
			t.Fatal(err)
		}
		sameRecs(t, []*schema.WalRecord{got}, []*schema.WalRecord{want})
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrBadRecord},
		{"lsn 0", mustMarshal(t, &schema.WalRecord{Now: 9}), ErrBadRecord},
		{"garbage", []byte{0xff, 0xff}, ErrBadRecord},
		{"bad utf8", []byte{0x08, 0x01, 0xaa, 0x01, 0x03, 0x0a, 0x01, 0xff}, ErrBadRecord},
		{"unknown op", []byte{0x08, 0x01, 0xfa, 0x3e, 0x00}, nil}, // field 1007: a future op
		{"too big", make([]byte, MaxRecordSize+1), ErrRecordTooBig},
	} {
		rec, err := DecodeRecord(tc.in)
		if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) || (rec == nil) != (err != nil) {
			t.Errorf("%s: %v, %v; want %v", tc.name, rec, err, tc.want)
		}
	}
}
