package sm_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
	"github.com/xce-hpc/xce/sm"
	"github.com/xce-hpc/xce/sm/queue"
	"github.com/xce-hpc/xce/sm/wal"
)

// loadConfig has queue q0, host h0 and resource 1: a snapshot's queue
// "old", host "gone" and resource 77 are names it no longer has.
func loadConfig(t *testing.T) []byte {
	t.Helper()
	c := &schema.ClusterConfig{ConfigGeneration: 1, ClusterName: "load", Port: 7000,
		Queues: []*schema.Queue{{Id: 1, Name: "q0", VisibilityTimeoutS: 30, MaxAttempts: 5}},
		Hosts:  []*schema.Host{{Name: "h0"}}, Resources: []*schema.Resource{{Id: 1, Name: "gpu", Count: 1}}}
	b, err := schema.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// snapshotFile encodes a snapshot at lsn (term 1) of q.
func snapshotFile(t *testing.T, q *queue.Queues, lsn uint64) []byte {
	t.Helper()
	b, err := wal.EncodeSnapshot(sm.SnapshotOf(q, lsn, 1))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func enqueueTo(t *testing.T, q *queue.Queues, name, payload string, o queue.EnqueueOpts) {
	t.Helper()
	if _, err := q.Enqueue(100, name, []byte(payload), queue.Stamps{VisibilityTimeoutS: 30, MaxAttempts: 5}, o); err != nil {
		t.Fatal(err)
	}
}

// recoverDisk boots one node on d and waits for its recovery (or exit).
func recoverDisk(t *testing.T, d *simdisk.Disk) *hnode {
	t.Helper()
	h := newHarness(t, 1)
	hn := h.add(0, d, nil)
	h.boot(0)
	h.advanceUntil(10*time.Second, func() bool { _, _, ok := hn.n.JobState(); return ok || len(hn.exits) > 0 })
	return hn
}

// The executor's import routes a snapshot's names the config no longer
// has as replay does (seed 002 §6.5): the node logs each WARN, naming
// the snapshot, and counts the jobs routed to lost_and_found.
func TestSnapshotImportRoutesUnknownNames(t *testing.T) {
	q := queue.New()
	enqueueTo(t, q, "old", "a", queue.EnqueueOpts{})
	enqueueTo(t, q, "old", "a2", queue.EnqueueOpts{})
	enqueueTo(t, q, "q0", "b", queue.EnqueueOpts{Resource: 77})
	enqueueTo(t, q, "q0", "c", queue.EnqueueOpts{Host: "gone"})
	d := simdisk.New()
	install(t, d, loadConfig(t), epoch)
	snapPath := wal.SnapshotPath(4)
	if err := d.PutDurable(snapPath, snapshotFile(t, q, 4), epoch); err != nil {
		t.Fatal(err)
	}
	hn := recoverDisk(t, d)
	got, _, ok := hn.n.JobState()
	if !ok {
		t.Fatalf("not recovered:\n%s", hn.logDump())
	}
	by := map[string]queue.Job{}
	for _, j := range got.List("") {
		by[string(j.Payload)] = j
	}
	if by["a"].Queue != sm.LostAndFound || by["a2"].Queue != sm.LostAndFound || by["b"].Resource != 0 || by["b"].Queue != "q0" || by["c"].Pin != sm.LostAndFound {
		t.Fatalf("routed jobs: %+v", by)
	}
	if n := hn.n.LostAndFoundCount(); n != 2 {
		t.Errorf("lost_and_found_job_count %d, want 2", n)
	}
	for key, want := range map[string]string{"wal.unknown-queue": "unknown queue 'old' at offset 0 in " + snapPath,
		"wal.unknown-resource": "unknown resource id=77 at offset 0 in " + snapPath, "wal.unknown-host": "unknown host 'gone' at offset 0 in " + snapPath} {
		ls := hn.logsWithKey(key)
		if len(ls) == 0 || ls[0].Level != sm.Warn || !strings.Contains(ls[0].Text, want) {
			t.Errorf("%s: %v, want a WARN containing %q", key, ls, want)
		}
	}
	if ls := hn.logsWithKey("wal.lost-and-found"); len(ls) != 1 || !strings.Contains(ls[0].Text, "lost_and_found_job_count=2") {
		t.Errorf("summary %v, want lost_and_found_job_count=2", ls)
	}
}

// Replay routes a segment's names the config no longer has (seed 002
// §6.5) with a WARN naming each record's own offset in the segment.
func TestReplayWarnsAtEachRecordsOffset(t *testing.T) {
	st := &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 5}
	ops := []*schema.WalRecord{
		{Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "q0", Payload: []byte("ok"), Stamps: st}}},
		{Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "old", Payload: []byte("a"), Stamps: st}}},
		{Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "q0", Payload: []byte("b"), Stamps: st, Resource: 77}}},
		{Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "q0", Payload: []byte("c"), Stamps: st, Host: "gone"}}},
	}
	var data []byte
	var offs []int
	for i, rec := range ops {
		rec.Lsn, rec.Term, rec.Now = uint64(i+1), 1, 100
		offs = append(offs, len(data))
		var err error
		if data, err = wal.AppendFrame(data, rec); err != nil {
			t.Fatal(err)
		}
	}
	d := simdisk.New()
	install(t, d, loadConfig(t), epoch)
	seg := wal.SegmentPath(1)
	if err := d.PutDurable(seg, data, epoch); err != nil {
		t.Fatal(err)
	}
	hn := recoverDisk(t, d)
	if _, _, ok := hn.n.JobState(); !ok {
		t.Fatalf("not recovered:\n%s", hn.logDump())
	}
	for key, want := range map[string]string{
		"wal.unknown-queue":    fmt.Sprintf("unknown queue 'old' at offset %d in %s", offs[1], seg),
		"wal.unknown-resource": fmt.Sprintf("unknown resource id=77 at offset %d in %s", offs[2], seg),
		"wal.unknown-host":     fmt.Sprintf("unknown host 'gone' at offset %d in %s", offs[3], seg),
	} {
		ls := hn.logsWithKey(key)
		if len(ls) != 1 || ls[0].Level != sm.Warn || !strings.Contains(ls[0].Text, want) {
			t.Errorf("%s: %v, want one WARN containing %q", key, ls, want)
		}
	}
}

// A newest snapshot that does not import is dropped for the next older
// one, and the log after that must reach the dropped one's LSN: with the
// segment that does, recovery rebuilds everything; without it, it stops.
func TestSnapshotImportFallsBack(t *testing.T) {
	older := queue.New()
	enqueueTo(t, older, "q0", "j1", queue.EnqueueOpts{})
	enqueueTo(t, older, "q0", "j2", queue.EnqueueOpts{})
	newest := snapshotFile(t, older, 3)
	newest[len(newest)-1] ^= 0xff // its CRC no longer matches
	var seg []byte
	for lsn := uint64(3); lsn <= 4; lsn++ {
		rec := &schema.WalRecord{Lsn: lsn, Term: 1, Now: 100, Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "q0", QueueId: 1, Payload: []byte("r"),
			Stamps: &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 5}}}}
		var err error
		if seg, err = wal.AppendFrame(seg, rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, reach := range []bool{true, false} {
		d := simdisk.New()
		install(t, d, loadConfig(t), epoch)
		files := map[string][]byte{wal.SnapshotPath(2): snapshotFile(t, older, 2), wal.SnapshotPath(3): newest}
		if reach {
			files[wal.SegmentPath(3)] = seg
		}
		for p, data := range files {
			if err := d.PutDurable(p, data, epoch); err != nil {
				t.Fatal(err)
			}
		}
		hn := recoverDisk(t, d)
		if !reach {
			if len(hn.exits) == 0 || hn.exits[0].Code == 0 {
				t.Fatalf("recovered from a log that does not reach the corrupt snapshot's lsn:\n%s", hn.logDump())
			}
			continue
		}
		got, _, ok := hn.n.JobState()
		if !ok || hn.n.RecoveredLSN() != 4 || len(got.List("")) != 4 {
			t.Fatalf("recovered %v to lsn %d:\n%s", ok, hn.n.RecoveredLSN(), hn.logDump())
		}
		if ls := hn.logsWithKey("wal.snapshot-invalid"); len(ls) != 1 || !strings.Contains(ls[0].Text, wal.SnapshotPath(3)) {
			t.Fatalf("no wal.snapshot-invalid for %s:\n%s", wal.SnapshotPath(3), hn.logDump())
		}
	}
}

// The import skips the checksum only of the bytes the boot scan verified:
// a newest snapshot whose contents decode but whose CRC32C does not match
// (a flipped bit in a payload) is refused by the scan, and so by the
// import, which falls back to the older snapshot and the log, as before
// the hand-off (none of the rotten payload reaches the state).
func TestSnapshotWithBadChecksumRefusedAfterTheScan(t *testing.T) {
	older := queue.New()
	enqueueTo(t, older, "q0", "j1", queue.EnqueueOpts{})
	enqueueTo(t, older, "q0", "j2", queue.EnqueueOpts{})
	newer := queue.New()
	for _, p := range []string{"j1", "j2", "ROTTEN"} {
		enqueueTo(t, newer, "q0", p, queue.EnqueueOpts{})
	}
	newest := snapshotFile(t, newer, 3)
	at := strings.Index(string(newest), "ROTTEN")
	newest[at] ^= 0x20 // "rOTTEN": still valid UTF-8 and protobuf; the CRC no longer matches
	if _, err := wal.SnapshotPosition(newest); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("the rotten snapshot: %v, want a checksum mismatch", err)
	}
	rec := &schema.WalRecord{Lsn: 3, Term: 1, Now: 100, Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{Queue: "q0", QueueId: 1, Payload: []byte("from-log"),
		Stamps: &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 5}}}}
	seg, err := wal.AppendFrame(nil, rec)
	if err != nil {
		t.Fatal(err)
	}
	d := simdisk.New()
	install(t, d, loadConfig(t), epoch)
	for p, data := range map[string][]byte{wal.SnapshotPath(2): snapshotFile(t, older, 2), wal.SnapshotPath(3): newest, wal.SegmentPath(3): seg} {
		if err := d.PutDurable(p, data, epoch); err != nil {
			t.Fatal(err)
		}
	}
	hn := recoverDisk(t, d)
	got, _, ok := hn.n.JobState()
	if !ok || hn.n.RecoveredLSN() != 3 {
		t.Fatalf("recovered %v to lsn %d:\n%s", ok, hn.n.RecoveredLSN(), hn.logDump())
	}
	var payloads []string
	for _, j := range got.List("") {
		payloads = append(payloads, string(j.Payload))
	}
	if strings.Join(payloads, ",") != "j1,j2,from-log" {
		t.Fatalf("recovered payloads %q, want j1, j2 and the log's record:\n%s", payloads, hn.logDump())
	}
	if ls := hn.logsWithKey("wal.snapshot-invalid"); len(ls) != 1 || !strings.Contains(ls[0].Text, "checksum mismatch") {
		t.Fatalf("no wal.snapshot-invalid naming the checksum:\n%s", hn.logDump())
	}
}
