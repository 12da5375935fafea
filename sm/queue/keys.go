package queue

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxKeyLen bounds an idempotency key, in bytes (SQS's deduplication id
// has the same bound).
const MaxKeyLen = 128

// ErrKeyReused is returned when an idempotency key still in its window
// names a job whose submit had a different payload or different options:
// the new submit is refused, so a client bug cannot silently drop a job.
var ErrKeyReused = errors.New("queue: idempotency key already used for a different job")

// Key is an idempotency key held by the state: the job its first submit
// made, the digest of that submit (Sum), and the time from which the key
// names no job (ExpiresAt, Unix seconds).
type Key struct {
	Queue     string
	Key       string
	ID        uint64
	Sum       [sha256.Size]byte
	ExpiresAt int64
}

type keyName struct{ queue, key string }

// keyTable holds the keys in their submits' order (fifo[head:]), so that
// expired keys leave from the front, and an index for lookups. An entry of
// fifo is never written once appended and the slice only grows at its end
// or is replaced whole, so a View shares fifo[head:] as it is.
type keyTable struct {
	fifo  []Key
	head  int
	index map[keyName]Key // the latest entry of each key
}

// keySum is the digest a reused key is compared by: the payload and every
// option of the submit, so that only a true retry is answered with the
// first job.
func keySum(payload []byte, o EnqueueOpts) [sha256.Size]byte {
	h := sha256.New()
	var b [8 * 5]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(int64(o.Priority)))
	binary.LittleEndian.PutUint64(b[8:], uint64(o.Delay))
	binary.LittleEndian.PutUint64(b[16:], uint64(o.RunAt))
	binary.LittleEndian.PutUint64(b[24:], uint64(o.Expires))
	binary.LittleEndian.PutUint64(b[32:], uint64(o.Resource))
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[0:], uint64(len(o.Host)))
	h.Write(b[:8])
	h.Write([]byte(o.Host))
	h.Write(payload)
	var s [sha256.Size]byte
	h.Sum(s[:0])
	return s
}

// KeyedJob reports whether o.Key names a job of queue at now: the job's
// id, and ErrKeyReused if that job's submit differed from this one
// (payload or options). A submit without a key names none.
func (q *Queues) KeyedJob(now int64, queue string, payload []byte, o EnqueueOpts) (uint64, bool, error) {
	if o.Key == "" {
		return 0, false, nil
	}
	k, ok := q.keys.index[keyName{queue, o.Key}]
	if !ok || k.ExpiresAt <= now {
		return 0, false, nil
	}
	if k.Sum != keySum(payload, o) {
		return k.ID, true, fmt.Errorf("%w: key %q of queue %q names job %d, submitted with another payload or other options",
			ErrKeyReused, o.Key, queue, k.ID)
	}
	return k.ID, true, nil
}

// holdKey records that the job id was made by a submit with o.Key, held
// until now + o.KeyWindow. Keys expired at now leave first: only a logged
// submit calls it, so what the table holds is a function of the log.
func (q *Queues) holdKey(now int64, queue string, id uint64, payload []byte, o EnqueueOpts) {
	t := &q.keys
	for t.head < len(t.fifo) && t.fifo[t.head].ExpiresAt <= now {
		old := t.fifo[t.head]
		if cur, ok := t.index[keyName{old.Queue, old.Key}]; ok && cur.ID == old.ID && cur.ExpiresAt == old.ExpiresAt {
			delete(t.index, keyName{old.Queue, old.Key})
		}
		t.head++ // the entry stays: a View taken before may still read it
	}
	if t.head > 1024 && 2*t.head > len(t.fifo) {
		// A new array: a View still reads the old one.
		t.fifo = append(make([]Key, 0, 2*(len(t.fifo)-t.head)), t.fifo[t.head:]...)
		t.head = 0
	}
	k := Key{Queue: queue, Key: o.Key, ID: id, Sum: keySum(payload, o), ExpiresAt: addSat(now, o.KeyWindow)}
	t.fifo = append(t.fifo, k)
	if t.index == nil {
		t.index = make(map[keyName]Key)
	}
	t.index[keyName{queue, o.Key}] = k
}

// heldKeys is the table's entries, oldest first, as a Snapshot carries
// them (shared: entries are never written).
func (t *keyTable) heldKeys() []Key { return t.fifo[t.head:len(t.fifo):len(t.fifo)] }

// KeyCount is the number of idempotency keys held (expired ones included
// until a later keyed submit drops them).
func (q *Queues) KeyCount() int { return len(q.keys.fifo) - q.keys.head }

// ErrKeyTooLong: an idempotency key over MaxKeyLen bytes.
var ErrKeyTooLong = fmt.Errorf("idempotency key longer than %d bytes", MaxKeyLen)

// CheckKey is the one check of a client's idempotency key ("" = none).
func CheckKey(key string) error {
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes", ErrKeyTooLong, len(key))
	}
	return nil
}

func checkKey(k Key) error {
	switch {
	case k.Queue == "":
		return errors.New("empty queue name")
	case k.Key == "" || len(k.Key) > MaxKeyLen:
		return fmt.Errorf("key of %d bytes (1 to %d)", len(k.Key), MaxKeyLen)
	case k.ID == 0:
		return errors.New("job id 0")
	}
	return nil
}

// Key adds k (a snapshot's keys come oldest first), checked as Import does.
func (im *Importer) Key(k Key) error {
	if err := checkKey(k); err != nil {
		return bad("idempotency key %q: %v", k.Key, err)
	}
	if k.ID >= im.q.nextID {
		return bad("idempotency key %q: job id %d >= next id %d", k.Key, k.ID, im.q.nextID)
	}
	t := &im.q.keys
	t.fifo = append(t.fifo, k)
	if t.index == nil {
		t.index = make(map[keyName]Key)
	}
	t.index[keyName{k.Queue, k.Key}] = k
	return nil
}
