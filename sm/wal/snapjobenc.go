package wal

import (
	"math/bits"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/xce-hpc/xce/schema"
)

// A snapshot holds one SnapshotJob per job, and a checkpoint encodes them
// all: through proto's generic marshal (a size pass, then an append pass,
// both driven by the message's reflection tables) that was most of a
// checkpoint's CPU. appendSnapshotJob writes the same bytes directly: the
// deterministic marshal of a proto3 message is its set fields in number
// order, each scalar omitted when zero, a message field present when
// non-nil. TestSnapshotJobEncodingMatchesProto checks it against
// proto.Marshal on random jobs; a field added to SnapshotJob or
// WalStamps must be added here (the test fails until it is).

// varintSize is protowire.SizeVarint, inlined.
func varintSize(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// appendVarint is protowire.AppendVarint, small enough to inline (the
// library's unrolled switch is not, and its calls were a third of the
// encoding).
func appendVarint(out []byte, v uint64) []byte {
	for v >= 0x80 {
		out = append(out, byte(v)|0x80)
		v >>= 7
	}
	return append(out, byte(v))
}

// tagSize is the size of a tag of field num (numbers here are below 2^11).
func tagSize(num protowire.Number) int {
	if num < 16 {
		return 1
	}
	return 2
}

// sizeVarintField is the size of field num as a varint of v, 0 when v is 0.
func sizeVarintField(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return tagSize(num) + varintSize(v)
}

// sizeBytesField is the size of field num holding n bytes, 0 when n is 0.
func sizeBytesField(num protowire.Number, n int) int {
	if n == 0 {
		return 0
	}
	return tagSize(num) + varintSize(uint64(n)) + n
}

func appendTag(out []byte, num protowire.Number, typ protowire.Type) []byte {
	return appendVarint(out, uint64(num)<<3|uint64(typ))
}

func appendVarintField(out []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return out
	}
	return appendVarint(appendTag(out, num, protowire.VarintType), v)
}

func appendStringField(out []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return out
	}
	return append(appendVarint(appendTag(out, num, protowire.BytesType), uint64(len(s))), s...)
}

// int32 and enum fields are varints of their sign-extended 64 bits.
func i32(v int32) uint64 { return uint64(int64(v)) }

func stampsSize(st *schema.WalStamps) int {
	return sizeVarintField(1, uint64(st.VisibilityTimeoutS)) + sizeVarintField(2, uint64(st.MaxAttempts)) +
		sizeVarintField(3, uint64(st.BackoffBaseS)) + sizeVarintField(4, uint64(st.DeadLetterRetentionS))
}

func snapshotJobSize(j *schema.SnapshotJob) int {
	n := sizeVarintField(1, j.Id) + sizeBytesField(2, len(j.Queue)) + sizeVarintField(3, uint64(j.QueueId)) +
		sizeBytesField(4, len(j.Payload)) + sizeVarintField(5, i32(j.Priority)) + sizeVarintField(6, i32(int32(j.State))) +
		sizeVarintField(7, uint64(j.RunAt)) + sizeVarintField(8, j.Seq) + sizeVarintField(9, uint64(j.EnqueuedAt)) +
		sizeVarintField(10, uint64(j.ExpiresAt)) + sizeVarintField(11, uint64(j.Attempts))
	if j.Stamps != nil { // present even when empty: its tag and length
		m := stampsSize(j.Stamps)
		n += tagSize(12) + varintSize(uint64(m)) + m
	}
	return n + sizeBytesField(13, len(j.Host)) + sizeVarintField(14, uint64(j.Resource)) +
		sizeVarintField(15, uint64(j.ClaimedAt)) + sizeVarintField(16, uint64(j.ClaimExpiresAt)) +
		sizeBytesField(17, len(j.LastError)) + sizeVarintField(18, uint64(j.DiedAt)) + sizeBytesField(19, len(j.Pin)) +
		sizeVarintField(20, uint64(j.Claims)) + sizeVarintField(21, j.ClaimTerm) + sizeVarintField(22, j.ClaimLsn)
}

// SnapshotJobSize is the bytes j takes in a snapshot file: its tag, its
// length and the message (a checkpoint sizes its buffer with it).
func SnapshotJobSize(j *schema.SnapshotJob) int {
	n := snapshotJobSize(j)
	return tagSize(4) + varintSize(uint64(n)) + n
}

// appendSnapshotJob appends j as field num of the snapshot (tag, length,
// message), as proto's deterministic marshal would, and refuses what it
// would refuse: a string field that is not UTF-8, or unknown fields it
// would copy (a job the encoder is handed is built, never decoded).
func appendSnapshotJob(out []byte, num protowire.Number, j *schema.SnapshotJob) ([]byte, error) {
	for _, s := range [...]struct{ name, v string }{{"queue", j.Queue}, {"host", j.Host}, {"last_error", j.LastError}, {"pin", j.Pin}} {
		if !utf8.ValidString(s.v) {
			return nil, badSnap("encode: job %d: string field %s contains invalid UTF-8", j.Id, s.name)
		}
	}
	if len(j.ProtoReflect().GetUnknown()) > 0 || j.Stamps != nil && len(j.Stamps.ProtoReflect().GetUnknown()) > 0 {
		return appendMessage(out, num, j)
	}
	size := snapshotJobSize(j)
	out = slices.Grow(out, tagSize(num)+varintSize(uint64(size))+size)
	out = appendVarint(appendTag(out, num, protowire.BytesType), uint64(size))
	out = appendVarintField(out, 1, j.Id)
	out = appendStringField(out, 2, j.Queue)
	out = appendVarintField(out, 3, uint64(j.QueueId))
	if len(j.Payload) > 0 {
		out = append(appendVarint(appendTag(out, 4, protowire.BytesType), uint64(len(j.Payload))), j.Payload...)
	}
	out = appendVarintField(out, 5, i32(j.Priority))
	out = appendVarintField(out, 6, i32(int32(j.State)))
	out = appendVarintField(out, 7, uint64(j.RunAt))
	out = appendVarintField(out, 8, j.Seq)
	out = appendVarintField(out, 9, uint64(j.EnqueuedAt))
	out = appendVarintField(out, 10, uint64(j.ExpiresAt))
	out = appendVarintField(out, 11, uint64(j.Attempts))
	if st := j.Stamps; st != nil {
		out = appendVarint(appendTag(out, 12, protowire.BytesType), uint64(stampsSize(st)))
		out = appendVarintField(out, 1, uint64(st.VisibilityTimeoutS))
		out = appendVarintField(out, 2, uint64(st.MaxAttempts))
		out = appendVarintField(out, 3, uint64(st.BackoffBaseS))
		out = appendVarintField(out, 4, uint64(st.DeadLetterRetentionS))
	}
	out = appendStringField(out, 13, j.Host)
	out = appendVarintField(out, 14, uint64(j.Resource))
	out = appendVarintField(out, 15, uint64(j.ClaimedAt))
	out = appendVarintField(out, 16, uint64(j.ClaimExpiresAt))
	out = appendStringField(out, 17, j.LastError)
	out = appendVarintField(out, 18, uint64(j.DiedAt))
	out = appendStringField(out, 19, j.Pin)
	out = appendVarintField(out, 20, uint64(j.Claims))
	out = appendVarintField(out, 21, j.ClaimTerm)
	out = appendVarintField(out, 22, j.ClaimLsn)
	return out, nil
}
