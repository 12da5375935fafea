package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/xce-hpc/xce/schema"
)

type framePos struct {
	off       int
	lsn, term uint64
}

// damage applies one of the faults a segment meets: none, a cut (torn
// tail), a flipped byte (rot), a zeroed run, appended garbage.
func damage(t *rapid.T, data []byte) []byte {
	data = append([]byte(nil), data...)
	switch rapid.IntRange(0, 4).Draw(t, "fault") {
	case 1:
		data = data[:rapid.IntRange(0, len(data)).Draw(t, "cut")]
	case 2:
		if len(data) > 0 {
			data[rapid.IntRange(0, len(data)-1).Draw(t, "pos")] ^= rapid.ByteRange(1, 255).Draw(t, "xor")
		}
	case 3:
		if len(data) > 0 {
			from := rapid.IntRange(0, len(data)-1).Draw(t, "from")
			clear(data[from:rapid.IntRange(from, len(data)).Draw(t, "to")])
		}
	case 4:
		data = append(data, rapid.SliceOfN(rapid.Byte(), 1, 600).Draw(t, "garbage")...)
	}
	return data
}

// The boot scan's reader and recovery's see the same segment: the same
// records' positions at the same offsets, the same valid length and the
// same corruption, whatever the damage.
func TestPropWalkPositionsAgreesWithWalk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		recs := genRecs(t)
		for _, r := range recs {
			r.Term = rapid.Uint64Range(0, 1<<40).Draw(t, "term")
		}
		data, _ := segment(t, recs)
		data = damage(t, data)
		var full, pos []framePos
		n1, err1 := Walk(data, func(off int, r *schema.WalRecord) error {
			full = append(full, framePos{off, r.GetLsn(), r.GetTerm()})
			return nil
		})
		n2, err2 := WalkPositions(data, func(off int, lsn, term uint64) error {
			pos = append(pos, framePos{off, lsn, term})
			return nil
		})
		if n1 != n2 || !sameCorruption(err1, err2) || len(full) != len(pos) {
			t.Fatalf("Walk: %d bytes, %d records, %v; WalkPositions: %d bytes, %d records, %v", n1, len(full), err1, n2, len(pos), err2)
		}
		for i := range full {
			if full[i] != pos[i] {
				t.Fatalf("record %d: Walk %+v, WalkPositions %+v", i, full[i], pos[i])
			}
		}
	})
}

// Recovery's walk of the frames the boot scan checked is Walk's: on a
// segment damaged or not, with checked anywhere up to the valid length
// WalkPositions found, the same records at the same offsets, the same
// valid length and the same error.
func TestPropWalkCheckedIsWalk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		recs := genRecs(t)
		data, _ := segment(t, recs)
		data = damage(t, data)
		scanned, _ := WalkPositions(data, func(int, uint64, uint64) error { return nil })
		checked := scanned
		if rapid.Bool().Draw(t, "less") {
			checked = rapid.IntRange(0, scanned).Draw(t, "checked")
		}
		type seen struct {
			off int
			rec *schema.WalRecord
		}
		collect := func(out *[]seen) func(int, *schema.WalRecord) error {
			return func(off int, r *schema.WalRecord) error {
				*out = append(*out, seen{off, proto.Clone(r).(*schema.WalRecord)})
				return nil
			}
		}
		var want, got []seen
		n1, err1 := Walk(data, collect(&want))
		n2, err2 := WalkChecked(data, checked, collect(&got))
		if n1 != n2 || fmt.Sprint(err1) != fmt.Sprint(err2) || len(want) != len(got) {
			t.Fatalf("checked %d: Walk %d bytes, %d records, %v; WalkChecked %d bytes, %d records, %v", checked, n1, len(want), err1, n2, len(got), err2)
		}
		for i := range want {
			if want[i].off != got[i].off || !proto.Equal(want[i].rec, got[i].rec) {
				t.Fatalf("record %d: Walk %d %v, WalkChecked %d %v", i, want[i].off, want[i].rec, got[i].off, got[i].rec)
			}
		}
	})
}

// The boot scan's reader of a record's position reads every payload as
// eachField's walk of the top level does: the same LSN and term (the last
// of each, varints only) and the same error, on the records of the
// decoder's property, damaged or not.
func TestRecordPositionIsSlow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := wireMessage(t, (&schema.WalRecord{}).ProtoReflect().Descriptor(), 0, rapid.Bool().Draw(t, "noisy"))
		if len(b) > 0 && rapid.Bool().Draw(t, "damage") {
			i := rapid.IntRange(0, len(b)-1).Draw(t, "at")
			if rapid.Bool().Draw(t, "cut") {
				b = b[:i]
			} else {
				b[i] ^= byte(rapid.IntRange(1, 255).Draw(t, "flip"))
			}
		}
		lsn, term, err := recordPosition(b)
		wl, wt, werr := recordPositionSlow(b)
		if lsn != wl || term != wt || fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Fatalf("%x: recordPosition %d, %d, %v; eachField %d, %d, %v", b, lsn, term, err, wl, wt, werr)
		}
	})
}

func sameCorruption(a, b error) bool {
	var ca, cb *CorruptError
	if errors.As(a, &ca) != errors.As(b, &cb) {
		return false
	}
	if ca == nil {
		return a == nil && b == nil
	}
	return ca.Offset == cb.Offset && ca.ValidAt == cb.ValidAt
}

// A frame whose CRC verifies but whose top level does not parse is
// corruption to both readers, at its offset.
func TestWalkPositionsRefusesUndecodableFrame(t *testing.T) {
	data, offs := segment(t, sampleRecs()[:3])
	bad := []byte{0xff, 0xff, 0xff} // a tag that never ends
	frame := binary.LittleEndian.AppendUint32(nil, uint32(len(bad)))
	frame = binary.LittleEndian.AppendUint32(frame, Checksum(bad))
	data = append(append(data[:offs[1]:offs[1]], append(frame, bad...)...), data[offs[1]:]...)
	n, err := WalkPositions(data, func(int, uint64, uint64) error { return nil })
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Offset != offs[1] || n != offs[1] || ce.ValidAt != -1 {
		t.Fatalf("WalkPositions: %d, %v; want corruption at %d", n, err, offs[1])
	}
	if _, err := Walk(data, func(int, *schema.WalRecord) error { return nil }); !sameCorruption(err, ce) {
		t.Fatalf("Walk: %v, WalkPositions: %v", err, ce)
	}
}

// genSnapshot draws a snapshot, valid or not (ids and seqs may collide or
// exceed next_id and next_seq, names may repeat or be empty).
func genSnapshot(t *rapid.T) *schema.Snapshot {
	s := &schema.Snapshot{Lsn: rapid.Uint64().Draw(t, "lsn"), Term: rapid.Uint64().Draw(t, "term"),
		NextId: rapid.Uint64Range(0, 60).Draw(t, "nextID"), NextSeq: rapid.Uint64Range(0, 60).Draw(t, "nextSeq")}
	for i := rapid.IntRange(0, 12).Draw(t, "jobs"); i > 0; i-- {
		s.Jobs = append(s.Jobs, &schema.SnapshotJob{Id: rapid.Uint64Range(0, 60).Draw(t, "id"), Queue: genName.Draw(t, "queue"),
			Payload: genBytes.Draw(t, "payload"), State: schema.JobState(rapid.Int32Range(0, 4).Draw(t, "state")),
			Seq: rapid.Uint64Range(0, 60).Draw(t, "seq"), Stamps: genStamps(t), Host: genName.Draw(t, "host"),
			ClaimTerm: rapid.Uint64().Draw(t, "claimTerm"), ClaimLsn: rapid.Uint64().Draw(t, "claimLSN")})
	}
	for i := rapid.IntRange(0, 3).Draw(t, "schedules"); i > 0; i-- {
		s.Schedules = append(s.Schedules, &schema.SnapshotSchedule{Name: rapid.StringN(0, 2, -1).Draw(t, "name"),
			Spec: genName.Draw(t, "spec"), Payload: genBytes.Draw(t, "payload")})
	}
	for i := rapid.IntRange(0, 3).Draw(t, "keys"); i > 0; i-- {
		sum := make([]byte, rapid.SampledFrom([]int{0, 31, 32, 32}).Draw(t, "sumLen"))
		s.Keys = append(s.Keys, &schema.SnapshotKey{Queue: genName.Draw(t, "queue"), Key: genName.Draw(t, "key"),
			Id: rapid.Uint64Range(0, 60).Draw(t, "id"), Sum: sum, ExpiresAt: rapid.Int64().Draw(t, "expiresAt")})
	}
	return s
}

// snapshotFile frames payload as a snapshot file (header and CRC).
func snapshotFile(p []byte) []byte {
	out := []byte(SnapshotMagic)
	out = binary.LittleEndian.AppendUint32(out, Checksum(p))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(p)))
	return append(out, p...)
}

// The stream reader and the position reader agree with DecodeSnapshot on
// any snapshot file: valid or not, fields in any order, damaged or not.
func TestPropSnapshotReadersAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		p, err := marshalOpts.Marshal(s) // no EncodeSnapshot: invalid states too
		if err != nil {
			t.Fatal(err)
		}
		if rapid.Bool().Draw(t, "scalarsLast") {
			// Another writer may put the scalars after the jobs; a
			// field of the wrong wire type is an unknown field.
			var head, rest []byte
			_ = eachField(p, func(num protowire.Number, typ protowire.Type, v []byte) error {
				f := protowire.AppendTag(nil, num, typ)
				if typ == protowire.VarintType {
					head = append(append(head, f...), v...)
				} else {
					rest = append(append(rest, f...), v...)
				}
				return nil
			})
			p = append(append(rest, head...), protowire.AppendTag(nil, snapNextIDField, protowire.BytesType)...)
			p = protowire.AppendBytes(p, []byte("x"))
		}
		data := snapshotFile(p)
		if rapid.Bool().Draw(t, "damaged") {
			data = damage(t, data)
		}
		if rapid.Bool().Draw(t, "rechecksummed") && len(data) >= SnapshotHeaderSize {
			// Damage the CRC cannot see: only a writer bug makes it.
			data = snapshotFile(data[SnapshotHeaderSize:])
		}

		want, wantErr := DecodeSnapshot(data)
		got, payloads, gotErr := readStream(ReadSnapshot, data)
		if (wantErr == nil) != (gotErr == nil) || gotErr != nil && !errors.Is(gotErr, ErrBadSnapshot) {
			t.Fatalf("DecodeSnapshot: %v; ReadSnapshot: %v", wantErr, gotErr)
		}
		head, posErr := SnapshotPosition(data)
		lsn, term := head.LSN, head.Term
		if _, hdrErr := snapshotPayload(data); hdrErr != nil && (fmt.Sprint(posErr) != hdrErr.Error() || fmt.Sprint(gotErr) != hdrErr.Error()) {
			// The header's and the checksum's errors come first, as
			// when the checksum was a pass of its own.
			t.Fatalf("header or checksum: %v; SnapshotPosition: %v; ReadSnapshot: %v", hdrErr, posErr, gotErr)
		}
		if posErr == nil {
			// Bytes the boot scan accepted read the same without their
			// checksum computed again.
			c, _, cErr := readStream(checkedWith(head), data)
			if fmt.Sprint(cErr) != fmt.Sprint(gotErr) || !proto.Equal(c, got) {
				t.Fatalf("ReadCheckedSnapshot: %v, %v; ReadSnapshot: %v, %v", c, cErr, got, gotErr)
			}
		}
		// A file read a window at a time: the same visits and the same
		// error, whatever the window (one byte, or a field cut anywhere).
		window := rapid.IntRange(1, 64).Draw(t, "window")
		// (Its visitor keeps nothing: readStream clones each message.)
		at, _, atErr := readStream(func(b []byte, v SnapshotVisitor) error {
			return readSnapshotAt(bytes.NewReader(b), int64(len(b)), window, v)
		}, data)
		if fmt.Sprint(atErr) != fmt.Sprint(gotErr) || !proto.Equal(at, got) {
			t.Fatalf("window %d: ReadSnapshotAt: %v, %v; ReadSnapshot: %v, %v", window, at, atErr, got, gotErr)
		}
		if wantErr != nil {
			return
		}
		want.ProtoReflect().SetUnknown(nil) // a stream has no message to keep them in
		if !proto.Equal(got, want) {
			t.Fatalf("ReadSnapshot:\n got %v\nwant %v", got, want)
		}
		for i, pl := range payloads {
			if !bytes.Equal(pl, want.GetJobs()[i].GetPayload()) {
				t.Fatalf("job %d's kept payload changed under the stream: %x, want %x", i, pl, want.GetJobs()[i].GetPayload())
			}
		}
		if posErr != nil || lsn != want.GetLsn() || term != want.GetTerm() {
			t.Fatalf("SnapshotPosition: (%d, %d) %v, want (%d, %d)", lsn, term, posErr, want.GetLsn(), want.GetTerm())
		}
	})
}

// readStream collects what read streams of data, each job's payload as
// the visitor was handed it.
func readStream(read func([]byte, SnapshotVisitor) error, data []byte) (*schema.Snapshot, [][]byte, error) {
	got := &schema.Snapshot{}
	var payloads [][]byte
	err := read(data, SnapshotVisitor{
		Head: func(h SnapshotHead) error {
			got.Lsn, got.Term, got.NextId, got.NextSeq = h.LSN, h.Term, h.NextID, h.NextSeq
			return nil
		},
		Job: func(j *schema.SnapshotJob) error {
			got.Jobs = append(got.Jobs, proto.Clone(j).(*schema.SnapshotJob))
			payloads = append(payloads, j.GetPayload()) // kept, not copied
			return nil
		},
		Schedule: func(sc *schema.SnapshotSchedule) error {
			got.Schedules = append(got.Schedules, proto.Clone(sc).(*schema.SnapshotSchedule))
			return nil
		},
		Key: func(k *schema.SnapshotKey) error {
			got.Keys = append(got.Keys, proto.Clone(k).(*schema.SnapshotKey))
			return nil
		},
	})
	return got, payloads, err
}

// checkedWith is ReadCheckedSnapshot with the head h.
func checkedWith(h SnapshotHead) func([]byte, SnapshotVisitor) error {
	return func(data []byte, v SnapshotVisitor) error { return ReadCheckedSnapshot(data, h, v) }
}

// ReadCheckedSnapshot skips only the checksum and the head's pass: a file
// whose CRC32C does not match reads (only bytes SnapshotPosition accepted
// are handed to it), a broken header is refused as by ReadSnapshot.
func TestReadCheckedSnapshotSkipsOnlyTheChecksum(t *testing.T) {
	data, err := EncodeSnapshot(sampleSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := readStream(ReadSnapshot, data)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(data)
	bad[8] ^= 1 // the stored checksum
	if _, _, err := readStream(ReadSnapshot, bad); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("ReadSnapshot of a bad checksum: %v, want a checksum mismatch", err)
	}
	head, err := SnapshotPosition(data)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := readStream(checkedWith(head), bad)
	if err != nil || !proto.Equal(got, want) {
		t.Fatalf("ReadCheckedSnapshot: %v, %v; want %v", got, err, want)
	}
	for name, b := range map[string][]byte{"magic": append([]byte("XCESNAP2"), data[8:]...), "length": data[:len(data)-1], "header": data[:10]} {
		if _, _, err := readStream(checkedWith(head), b); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("ReadCheckedSnapshot of a bad %s: %v, want ErrBadSnapshot", name, err)
		}
	}
}

// A visitor's error stops the stream and comes back as is.
func TestReadSnapshotVisitorError(t *testing.T) {
	data, err := EncodeSnapshot(sampleSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	jobs := 0
	err = ReadSnapshot(data, SnapshotVisitor{
		Head:     func(h SnapshotHead) error { return nil },
		Job:      func(*schema.SnapshotJob) error { jobs++; return stop },
		Schedule: func(*schema.SnapshotSchedule) error { return nil },
	})
	if err != stop || jobs != 1 {
		t.Fatalf("err %v after %d jobs, want stop after 1", err, jobs)
	}
}

// A Walker walks as Walk does, one walk after another with the same
// decoder: the same offsets, records, valid lengths and errors, for
// segments damaged or not, walked in any order.
func TestPropWalkerIsWalk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var w Walker
		for n := rapid.IntRange(1, 4).Draw(t, "walks"); n > 0; n-- {
			data, _ := segment(t, genRecs(t))
			data = damage(t, data)
			type seen struct {
				off int
				rec *schema.WalRecord
			}
			collect := func(out *[]seen) func(int, *schema.WalRecord) error {
				return func(off int, r *schema.WalRecord) error {
					*out = append(*out, seen{off, proto.Clone(r).(*schema.WalRecord)})
					return nil
				}
			}
			var want, got []seen
			n1, err1 := Walk(data, collect(&want))
			n2, err2 := w.Walk(data, collect(&got))
			if n1 != n2 || fmt.Sprint(err1) != fmt.Sprint(err2) || len(want) != len(got) {
				t.Fatalf("Walk %d bytes, %d records, %v; Walker %d bytes, %d records, %v", n1, len(want), err1, n2, len(got), err2)
			}
			for i := range want {
				if want[i].off != got[i].off || !proto.Equal(want[i].rec, got[i].rec) {
					t.Fatalf("record %d: Walk %d %v, Walker %d %v", i, want[i].off, want[i].rec, got[i].off, got[i].rec)
				}
			}
		}
	})
}
