package compute

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

var importCfg = &schema.ClusterConfig{
	Queues: []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 30, MaxAttempts: 3}},
	Hosts:  []*schema.Host{{Name: "h0"}},
}

// snapshotJobs is a snapshot of n pending jobs, every seventh in a queue
// the config does not have and every eleventh pinned to an unknown host
// (routed, with warnings), a schedule after every 300th job; bad, if >= 0,
// makes job bad refused by the build (pending with its attempts
// exhausted), dup, if >= 0, gives job dup the id of job 0 (refused by the
// decode).
func snapshotJobs(t *testing.T, n, bad, dup int) []byte {
	t.Helper()
	st := &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 3}
	s := &schema.Snapshot{Lsn: 10, Term: 1, NextId: uint64(n) + 1, NextSeq: uint64(n) + 1}
	var p []byte
	add := func(m proto.Message, field string) {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		num := s.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(field)).Number()
		p = protowire.AppendBytes(protowire.AppendTag(p, num, protowire.BytesType), b)
	}
	head, err := proto.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	p = append(p, head...)
	for i := range n {
		j := &schema.SnapshotJob{Id: uint64(i) + 1, Seq: uint64(i) + 1, Queue: "q0", Payload: []byte{byte(i), byte(i >> 8)}, State: schema.JobState_JOB_STATE_PENDING, EnqueuedAt: 100, RunAt: 100, Stamps: st}
		if i%7 == 3 {
			j.Queue = fmt.Sprintf("gone%d", i%3)
		}
		if i%11 == 5 {
			j.Pin = "gone-host"
		}
		if i == bad {
			j.Attempts, j.Claims, j.ClaimLsn, j.ClaimTerm = 3, 3, 1, 1
		}
		if i == dup {
			j.Id = 1
		}
		add(j, "jobs")
		if i%300 == 299 {
			add(&schema.SnapshotSchedule{Name: fmt.Sprintf("s%d", i), Spec: "@every 60s", Queue: "gone-q", NextFire: 200,
				Stamps: st, Fire: &schema.WalFireOpts{}}, "schedules")
		}
	}
	f := make([]byte, wal.SnapshotHeaderSize, wal.SnapshotHeaderSize+len(p))
	copy(f, wal.SnapshotMagic)
	binary.LittleEndian.PutUint32(f[8:], wal.Checksum(p))
	binary.LittleEndian.PutUint64(f[12:], uint64(len(p)))
	return append(f, p...)
}

// The piped import is the sequential one: the same state, routing
// warnings and counts, and for a snapshot refused part way the same first
// error in file order, whichever stage met it and however the goroutines
// ran.
func TestImportPipedIsImport(t *testing.T) {
	for _, c := range []struct{ n, bad, dup int }{
		{0, -1, -1}, {1, -1, -1}, {255, -1, -1}, {256, -1, -1}, {2000, -1, -1},
		{2000, 700, -1}, {2000, -1, 1500}, {2000, 700, 1500}, {2000, 1500, 700}, {2000, 0, -1}, {2000, 1999, -1}, {2000, -1, 257},
	} {
		data := snapshotJobs(t, c.n, c.bad, c.dup)
		for range 5 {
			want := sm.NewSnapshotLoad(importCfg).Import(data)
			if refused := c.bad >= 0 || c.dup >= 0; (want.Err() != nil) != refused {
				t.Fatalf("%+v: sequential import: %v, want refused %v", c, want.Err(), refused)
			}
			got := importPiped(sm.NewSnapshotLoad(importCfg), data)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%+v: piped import %+v, sequential %+v", c, got, want)
			}
		}
	}
}

// BenchmarkSnapshotImportPiped is sm's BenchmarkSnapshotImport (1,000,000
// pending 200-byte jobs) sequential and as the executor runs it.
func BenchmarkSnapshotImportPiped(b *testing.B) {
	const jobs = 1_000_000
	q := queue.New()
	payload := make([]byte, 200)
	for i := range jobs {
		payload[0], payload[1], payload[2] = byte(i), byte(i>>8), byte(i>>16)
		if _, err := q.Enqueue(1000, "q0", payload, queue.Stamps{VisibilityTimeoutS: 30, MaxAttempts: 3}, queue.EnqueueOpts{}); err != nil {
			b.Fatal(err)
		}
	}
	data, err := wal.EncodeSnapshot(sm.SnapshotOf(q, jobs, 1))
	if err != nil {
		b.Fatal(err)
	}
	q = nil
	for _, c := range []struct {
		name string
		run  func(*sm.SnapshotLoad, []byte) *sm.LoadedSnapshot
	}{{"sequential", (*sm.SnapshotLoad).Import}, {"piped", importPiped}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if err := c.run(sm.NewSnapshotLoad(importCfg), data).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
