package schema

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// ReservedName is the synthetic queue and host created by the controller
// (seed 002 §6.5); configs may not use it.
const ReservedName = "lost_and_found"

// MaxBlobSize is CONF_MAX_SIZE (seed 002 §10.7).
const MaxBlobSize = 1 << 20

// Sentinel errors for config blobs; wrapped with detail. Three keep the
// seed's wording (capitalised, as operators will grep for it).
//
//lint:file-ignore ST1005 seed 002 §6.4/§6.5 error texts are kept verbatim
var (
	ErrEmptyBlob    = errors.New("config blob is empty")
	ErrBlobTooBig   = errors.New("config blob exceeds CONF_MAX_SIZE (1 MiB)")
	ErrBlobDecode   = errors.New("config blob is not a valid ClusterConfig")
	ErrReservedName = errors.New("Reserved name: 'lost_and_found' queue/host names are reserved by the controller. Rename the user-defined entry and retry.")
	ErrNoQueues     = errors.New("Config requires at least one queue")
	ErrBadPort      = errors.New("Config port out of valid range (1024–65535)")
	ErrDuplicate    = errors.New("duplicate name or id in config")
	ErrBadStamps    = errors.New("queue stamps no job can have")
	ErrBadWindow    = errors.New("idempotency window out of range")
)

// The idempotency window of a queue (Queue.idempotency_window_s), in
// seconds: how long a submit's key names its job. The default is the
// five minutes SQS keeps a deduplication id; the bounds keep a retry
// after a failover inside it and the keys a primary holds finite.
const (
	DefaultIdempotencyWindowS = 300
	MinIdempotencyWindowS     = 300
	MaxIdempotencyWindowS     = 7 * 24 * 3600
)

// IdempotencyWindowS is q's window in seconds, the default for 0.
func IdempotencyWindowS(q *Queue) uint32 {
	if w := q.GetIdempotencyWindowS(); w != 0 {
		return w
	}
	return DefaultIdempotencyWindowS
}

// DecodeClusterConfig is the one validating decode of a config blob:
// structural checks only (size, protobuf decode). It never panics.
func DecodeClusterConfig(b []byte) (*ClusterConfig, error) {
	if len(b) == 0 {
		return nil, ErrEmptyBlob
	}
	if len(b) > MaxBlobSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrBlobTooBig, len(b))
	}
	var c ClusterConfig
	if err := (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBlobDecode, err)
	}
	return &c, nil
}

// EntryError names the config entry a validation error is about, so a
// tool can point at its line (Section is "queues", "hosts" or "resources").
type EntryError struct {
	Section string
	Index   int
	Field   string // the entry's key the error is about ("name", "id", ...); "" for the whole entry
	Err     error
}

func (e *EntryError) Error() string { return fmt.Sprintf("%s[%d]: %v", e.Section, e.Index, e.Err) }

func (e *EntryError) Unwrap() error { return e.Err }

func entryErr(section string, i int, field string, err error) error {
	return &EntryError{Section: section, Index: i, Field: field, Err: err}
}

// CheckReservedNames rejects a config naming a queue or host
// "lost_and_found" (seed 002 §6.5, §7.1).
func CheckReservedNames(c *ClusterConfig) error {
	for i, q := range c.GetQueues() {
		if q.GetName() == ReservedName {
			return entryErr("queues", i, "name", ErrReservedName)
		}
	}
	for i, h := range c.GetHosts() {
		if h.GetName() == ReservedName {
			return entryErr("hosts", i, "name", ErrReservedName)
		}
	}
	return nil
}

// Validate is the minimum viability check of seed 002 §6.4 plus the
// admin tool's semantic checks: at least one queue, a port in range, no
// reserved names, every name by the name rule (CheckName), no duplicate
// queue names/ids, host names or resource ids.
// Errors about one entry are *EntryError.
func Validate(c *ClusterConfig) error {
	if len(c.GetQueues()) == 0 {
		return ErrNoQueues
	}
	if p := c.GetPort(); p < 1024 || p > 65535 {
		return fmt.Errorf("%w: %d", ErrBadPort, p)
	}
	if err := CheckReservedNames(c); err != nil {
		return err
	}
	if err := checkNames(c); err != nil {
		return err
	}
	qn, qi := map[string]int{}, map[uint32]int{}
	for i, q := range c.GetQueues() {
		// The queue contract refuses such stamps at every enqueue: a
		// queue with them could never hold a job.
		if q.GetMaxAttempts() == 0 {
			return entryErr("queues", i, "max_attempts", fmt.Errorf("%w: max_attempts 0 (at least 1: the attempt a claim uses)", ErrBadStamps))
		}
		if q.GetVisibilityTimeoutS() == 0 {
			return entryErr("queues", i, "visibility_timeout_s", fmt.Errorf("%w: visibility_timeout_s 0 (at least 1: a claim would lapse the moment it is made)", ErrBadStamps))
		}
		if w := q.GetIdempotencyWindowS(); w != 0 && (w < MinIdempotencyWindowS || w > MaxIdempotencyWindowS) {
			return entryErr("queues", i, "idempotency_window_s", fmt.Errorf("%w: idempotency_window_s %d (0 for the default %d, else %d to %d)",
				ErrBadWindow, w, DefaultIdempotencyWindowS, MinIdempotencyWindowS, MaxIdempotencyWindowS))
		}
		if j, ok := qn[q.GetName()]; ok {
			return entryErr("queues", i, "name", fmt.Errorf("%w: name %q already used by queues[%d]", ErrDuplicate, q.GetName(), j))
		}
		if j, ok := qi[q.GetId()]; ok {
			return entryErr("queues", i, "id", fmt.Errorf("%w: id %d already used by queues[%d]", ErrDuplicate, q.GetId(), j))
		}
		qn[q.GetName()], qi[q.GetId()] = i, i
	}
	hn := map[string]int{}
	for i, h := range c.GetHosts() {
		if j, ok := hn[h.GetName()]; ok {
			return entryErr("hosts", i, "name", fmt.Errorf("%w: name %q already used by hosts[%d]", ErrDuplicate, h.GetName(), j))
		}
		hn[h.GetName()] = i
	}
	ri := map[uint32]int{}
	for i, r := range c.GetResources() {
		if j, ok := ri[r.GetId()]; ok {
			return entryErr("resources", i, "id", fmt.Errorf("%w: id %d already used by resources[%d]", ErrDuplicate, r.GetId(), j))
		}
		ri[r.GetId()] = i
	}
	return nil
}

// checkNames applies the name rule (CheckName) to every queue, host and
// resource name.
func checkNames(c *ClusterConfig) error {
	for i, q := range c.GetQueues() {
		if err := CheckName("name", q.GetName()); err != nil {
			return entryErr("queues", i, "name", err)
		}
	}
	for i, h := range c.GetHosts() {
		if err := CheckName("name", h.GetName()); err != nil {
			return entryErr("hosts", i, "name", err)
		}
	}
	for i, r := range c.GetResources() {
		if err := CheckName("name", r.GetName()); err != nil {
			return entryErr("resources", i, "name", err)
		}
	}
	return nil
}

// Encode marshals a config deterministically (stable bytes for the same
// message within one binary, so tests and tools get stable tags).
func Encode(c *ClusterConfig) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode ClusterConfig: %w", err)
	}
	return b, nil
}
