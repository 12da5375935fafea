package wal

import (
	"fmt"
	"testing"

	"github.com/xce-hpc/xce/schema"
)

// smallEnqueue is the record the replay benchmarks decode: an enqueue with
// stamps, a short payload and a host.
func smallEnqueue(lsn uint64) *schema.WalRecord {
	return &schema.WalRecord{Lsn: lsn, Now: 1_700_000_000 + int64(lsn/100), Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{
		Queue: "default", QueueId: 1, Payload: []byte(fmt.Sprintf("job-%08d", lsn)), Stamps: stamps(), Priority: int32(lsn % 10),
	}}}
}

func buildSegment(b *testing.B, n int) []byte {
	b.Helper()
	var data []byte
	for i := 1; i <= n; i++ {
		var err error
		if data, err = AppendFrame(data, smallEnqueue(uint64(i))); err != nil {
			b.Fatal(err)
		}
	}
	return data
}

func benchScan(b *testing.B, n int) {
	data := buildSegment(b, n)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		recs, valid, err := Scan(data)
		if err != nil || valid != len(data) || len(recs) != n {
			b.Fatalf("%d records, %d/%d bytes, %v", len(recs), valid, len(data), err)
		}
	}
	reportPerRecord(b, n)
}

func benchWalk(b *testing.B, n int) {
	data := buildSegment(b, n)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		count := 0
		valid, err := Walk(data, func(int, *schema.WalRecord) error { count++; return nil })
		if err != nil || valid != len(data) || count != n {
			b.Fatalf("%d records, %d/%d bytes, %v", count, valid, len(data), err)
		}
	}
	reportPerRecord(b, n)
}

func reportPerRecord(b *testing.B, n int) {
	b.StopTimer()
	total := float64(b.N) * float64(n)
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(total/s, "records/s")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/record")
	}
}

// BenchmarkScan10k: replay decode of 10,000 small enqueue records (DESIGN
// §6 target: <= 20 ms).
func BenchmarkScan10k(b *testing.B) { benchScan(b, 10_000) }

// BenchmarkScan1M: 1,000,000 records (target <= 2 s).
func BenchmarkScan1M(b *testing.B) { benchScan(b, 1_000_000) }

// The streaming form the replayer uses (one reused record, no slice).
func BenchmarkWalk10k(b *testing.B) { benchWalk(b, 10_000) }
func BenchmarkWalk1M(b *testing.B)  { benchWalk(b, 1_000_000) }

func BenchmarkAppendFrame(b *testing.B) {
	rec := smallEnqueue(1)
	buf := make([]byte, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendFrame(buf[:0], rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshotPosition is the boot scan's pass over a snapshot of
// 1,000,000 200-byte jobs (header, CRC32C, the head's walk of the top
// level), beside the CRC32C alone.
func BenchmarkSnapshotPosition(b *testing.B) {
	s := &schema.Snapshot{Lsn: 1_000_000, Term: 1, NextId: 1_000_001, NextSeq: 1_000_001}
	payload := make([]byte, 200)
	for i := range 1_000_000 {
		s.Jobs = append(s.Jobs, &schema.SnapshotJob{Id: uint64(i) + 1, Seq: uint64(i) + 1, Queue: "q0", Payload: payload, Stamps: stamps(), EnqueuedAt: 1_700_000_000})
	}
	data, err := EncodeSnapshot(s)
	if err != nil {
		b.Fatal(err)
	}
	s = nil
	b.SetBytes(int64(len(data)))
	b.Run("checksum", func(b *testing.B) {
		for b.Loop() {
			Checksum(data[SnapshotHeaderSize:])
		}
	})
	b.Run("position", func(b *testing.B) {
		for b.Loop() {
			if h, err := SnapshotPosition(data); err != nil || h.Jobs != 1_000_000 {
				b.Fatalf("%+v %v", h, err)
			}
		}
	})
}
