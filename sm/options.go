package sm

import (
	"errors"
	"fmt"
	"time"
)

// Options are a node's static settings: its place in --peers and timings.
// Defaults follow seed 002 §5.5, §9.0 and DESIGN §4.
type Options struct {
	Self  int      // this node's index in Peers (its priority; 0 = highest)
	Peers []string // peer names in --peers order
	// PeersHash identifies the whole --peers list (names and addresses,
	// normalised; 0 = not checked): every message carries it, and a
	// message from a node whose list differs is dropped (seed §11.2).
	PeersHash uint64
	// BaseDir is ${workdir}/${name}, only for messages (paths in effects
	// are relative to it); Workdir is the --workdir it came from.
	BaseDir, Workdir string

	ElectionTimeout   time.Duration // 2000 ms
	PriorityStep      time.Duration // 500 ms
	JitterMax         time.Duration // 200 ms
	ProbeInterval     time.Duration // candidates re-probe this often; 500 ms
	HeartbeatInterval time.Duration // 500 ms
	FailureTimeout    time.Duration // standby: primary silent this long; 1500 ms

	FetchInitialDelay time.Duration // 500 ms
	FetchMaxDelay     time.Duration // 5 s
	FetchMaxAttempts  int           // 20

	KeepN        int           // conf_keep_n; 2
	StaleTimeout time.Duration // conf_stale_timeout; 24 h; 0 disables

	// MaxWALRecords triggers a checkpoint (seed 002 §13; default 10,000,
	// at least 100).
	MaxWALRecords int
	// RetainWALRecords bounds how far behind the newest checkpoint a
	// primary keeps WAL segments that a standby it syncs has not acked
	// yet, so the standby catches up from the log after a restart or a
	// pause instead of by snapshot (default 40,000; 0 keeps none).
	RetainWALRecords int
	// SnapshotChunk bounds one chunk of a snapshot sent to a standby
	// (default 512 KiB; at least 64 bytes, at most 768 KiB: a chunk and
	// its message fit in one frame).
	SnapshotChunk int
	// SyncBufferBytes bounds the records a primary holds for a standby
	// while that standby's snapshot is encoded (they follow its first
	// chunk), or while it reads its log for a catch-up (they follow the
	// records read). Past it they are dropped: after a snapshot the
	// standby, finding the gap after its install, catches up from the
	// log; a catch-up reads them from the log in one more round (default
	// 32 MiB; 0 holds none).
	SyncBufferBytes int
	// MaintenanceInterval: how often a primary runs a due sweep_expired and
	// scheduler tick on its own (0 disables; then clients must).
	MaintenanceInterval time.Duration
	// SyncStandbys: a client reply waits for this many live standbys to
	// hold its record (fewer if fewer are live and synced). DESIGN §4.4.
	SyncStandbys int
	// EnableUpgrade accepts OP_upgradeConfig. The daemon sets it when an
	// admin allowlist (--admin-cn) is configured: that replaces the seed's
	// compile-time gate of §5.3, and callers are authorised before the
	// request reaches the node.
	EnableUpgrade bool
	// WALRepair truncates the WAL at a corruption instead of refusing to
	// start (an operator's explicit choice: records after it are lost).
	WALRepair bool

	// SeedMode selects the seed's availability over quorum safety (DESIGN
	// §4.4): a node that wins the priority election serves alone and a
	// write may be acknowledged with no standby. The default (false) is
	// quorum mode: promotion needs a majority of votes and a write is
	// acknowledged once durable on a majority. Only for clusters where an
	// operator asked for it (DefaultOptions picks it for 2 nodes).
	SeedMode bool

	// SeedLiteralP0 enables seed 002 §9.1 literally: priority 0 is primary at
	// once, never probes and never steps down. Unsafe: kept so the simulator
	// can show the split brain it allows.
	SeedLiteralP0 bool
}

// DefaultOptions returns the defaults for node self of peers.
func DefaultOptions(self int, peers []string) Options {
	return Options{
		Self:                self,
		Peers:               peers,
		ElectionTimeout:     2000 * time.Millisecond,
		PriorityStep:        500 * time.Millisecond,
		JitterMax:           200 * time.Millisecond,
		ProbeInterval:       500 * time.Millisecond,
		HeartbeatInterval:   500 * time.Millisecond,
		FailureTimeout:      1500 * time.Millisecond,
		FetchInitialDelay:   500 * time.Millisecond,
		FetchMaxDelay:       5 * time.Second,
		FetchMaxAttempts:    20,
		KeepN:               2,
		StaleTimeout:        24 * time.Hour,
		MaxWALRecords:       10000,
		RetainWALRecords:    40000,
		SnapshotChunk:       512 << 10,
		SyncBufferBytes:     32 << 20,
		MaintenanceInterval: time.Second,
		SyncStandbys:        1,
		SeedMode:            len(peers) == 2, // a 2-node majority cannot lose a node
	}
}

// Majority is the number of nodes whose agreement quorum mode needs.
func (o Options) Majority() int { return len(o.Peers)/2 + 1 }

// ErrBadOptions is returned by Validate for an unusable option set.
var ErrBadOptions = errors.New("invalid node options")

// Validate checks the options before a node is built.
func (o Options) Validate() error {
	switch {
	case len(o.Peers) == 0:
		return fmt.Errorf("%w: empty peers list", ErrBadOptions)
	case o.Self < 0 || o.Self >= len(o.Peers):
		return fmt.Errorf("%w: self index %d outside peers [0,%d)", ErrBadOptions, o.Self, len(o.Peers))
	case o.JitterMax <= 0:
		return fmt.Errorf("%w: election jitter must be > 0", ErrBadOptions)
	case o.HeartbeatInterval <= 0 || o.ProbeInterval <= 0:
		return fmt.Errorf("%w: heartbeat and probe intervals must be > 0", ErrBadOptions)
	case o.FailureTimeout <= o.HeartbeatInterval:
		return fmt.Errorf("%w: failure timeout %v must exceed heartbeat interval %v", ErrBadOptions, o.FailureTimeout, o.HeartbeatInterval)
	case o.FetchMaxAttempts < 1 || o.FetchInitialDelay <= 0 || o.FetchMaxDelay < o.FetchInitialDelay:
		return fmt.Errorf("%w: bad config fetch backoff", ErrBadOptions)
	case o.KeepN < 1:
		return fmt.Errorf("%w: conf keep_n must be >= 1", ErrBadOptions)
	case o.SyncStandbys < 0:
		return fmt.Errorf("%w: negative sync standbys", ErrBadOptions)
	case o.MaintenanceInterval < 0:
		return fmt.Errorf("%w: negative maintenance interval", ErrBadOptions)
	case o.MaxWALRecords < 100:
		return fmt.Errorf("%w: max_wal_records %d below the minimum of 100 (seed 002 §13.5)", ErrBadOptions, o.MaxWALRecords)
	case o.RetainWALRecords < 0:
		return fmt.Errorf("%w: negative retain_wal_records %d", ErrBadOptions, o.RetainWALRecords)
	case o.SyncBufferBytes < 0:
		return fmt.Errorf("%w: negative sync buffer of %d bytes", ErrBadOptions, o.SyncBufferBytes)
	case o.SnapshotChunk < 64 || o.SnapshotChunk > 768<<10:
		return fmt.Errorf("%w: snapshot chunk of %d bytes outside 64..%d", ErrBadOptions, o.SnapshotChunk, 768<<10)
	case o.StaleTimeout < 0:
		return fmt.Errorf("%w: negative stale timeout", ErrBadOptions)
	}
	return nil
}

// FetchWindow is the whole §5.5 retry window (~87.5 s with the defaults).
func (o Options) FetchWindow() time.Duration {
	var d time.Duration
	for a := 0; a < o.FetchMaxAttempts; a++ {
		d += o.FetchDelay(a)
	}
	return d
}

// FetchDelay is the §5.5 backoff before attempt n (0-based) is retried:
// min(initial * 2^n, max).
func (o Options) FetchDelay(n int) time.Duration {
	d := o.FetchInitialDelay
	for i := 0; i < n && d < o.FetchMaxDelay; i++ {
		d *= 2
	}
	if d > o.FetchMaxDelay {
		d = o.FetchMaxDelay
	}
	return d
}
