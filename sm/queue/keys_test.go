package queue

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

var keySt = Stamps{VisibilityTimeoutS: 10, MaxAttempts: 2}

func TestKeyedJob(t *testing.T) {
	q := New()
	o := EnqueueOpts{Key: "k1", KeyWindow: 300, Priority: 2}
	j, err := q.Enqueue(1000, "a", []byte("p"), keySt, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		now     int64
		queue   string
		payload string
		o       EnqueueOpts
		id      uint64
		found   bool
		reused  bool
	}{
		{"same submit", 1001, "a", "p", o, j.ID, true, false},
		{"last second of the window", 1299, "a", "p", o, j.ID, true, false},
		{"window over", 1300, "a", "p", o, 0, false, false},
		{"other queue", 1001, "b", "p", o, 0, false, false},
		{"other key", 1001, "a", "p", EnqueueOpts{Key: "k2", KeyWindow: 300, Priority: 2}, 0, false, false},
		{"no key", 1001, "a", "p", EnqueueOpts{Priority: 2}, 0, false, false},
		{"other payload", 1001, "a", "q", o, j.ID, true, true},
		{"other priority", 1001, "a", "p", EnqueueOpts{Key: "k1", KeyWindow: 300, Priority: 3}, j.ID, true, true},
		{"other pin", 1001, "a", "p", EnqueueOpts{Key: "k1", KeyWindow: 300, Priority: 2, Host: "h"}, j.ID, true, true},
		{"the window is not part of the submit", 1001, "a", "p", EnqueueOpts{Key: "k1", KeyWindow: 900, Priority: 2}, j.ID, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, found, err := q.KeyedJob(c.now, c.queue, []byte(c.payload), c.o)
			if id != c.id || found != c.found || errors.Is(err, ErrKeyReused) != c.reused || (err != nil) != c.reused {
				t.Fatalf("KeyedJob = %d, %v, %v; want %d, %v, reused %v", id, found, err, c.id, c.found, c.reused)
			}
		})
	}
	if _, err := q.Enqueue(1001, "a", []byte("p"), keySt, o); !errors.Is(err, ErrKeyHeld) {
		t.Fatalf("a second enqueue with a held key: %v, want ErrKeyHeld", err)
	}
	if _, err := q.Enqueue(1001, "a", []byte("p"), keySt, EnqueueOpts{Key: string(make([]byte, MaxKeyLen+1)), KeyWindow: 1}); !errors.Is(err, ErrBadKey) {
		t.Fatalf("a key of %d bytes: %v, want ErrBadKey", MaxKeyLen+1, err)
	}
	if _, err := q.Enqueue(1001, "a", []byte("p"), keySt, EnqueueOpts{Key: "k9"}); !errors.Is(err, ErrBadKey) {
		t.Fatalf("a key without a window: %v, want ErrBadKey", err)
	}
	// Past the window the key is free again and names the new job.
	j2, err := q.Enqueue(1300, "a", []byte("other"), keySt, o)
	if err != nil {
		t.Fatal(err)
	}
	if id, found, err := q.KeyedJob(1301, "a", []byte("other"), o); id != j2.ID || !found || err != nil {
		t.Fatalf("after reuse past the window: %d, %v, %v; want %d", id, found, err, j2.ID)
	}
	if n := q.KeyCount(); n != 1 {
		t.Fatalf("KeyCount = %d, want 1 (the expired entry left at the next keyed submit)", n)
	}
}

// TestKeysInSnapshotsAndViews: the keys survive Export/Import, and a View
// keeps the keys of its moment while later submits expire and compact the
// live table.
func TestKeysInSnapshotsAndViews(t *testing.T) {
	q := New()
	for i := range 10 {
		if _, err := q.Enqueue(int64(100+i), "a", []byte{byte(i)}, keySt, EnqueueOpts{Key: fmt.Sprint("k", i), KeyWindow: 50}); err != nil {
			t.Fatal(err)
		}
	}
	v := q.View()
	want := append([]Key(nil), v.Keys()...)
	if len(want) != 10 {
		t.Fatalf("view holds %d keys, want 10", len(want))
	}
	// Enough later submits to expire every early key and compact twice.
	for i := range 5000 {
		if _, err := q.Enqueue(int64(1000+i), "a", nil, keySt, EnqueueOpts{Key: fmt.Sprint("late", i), KeyWindow: 50}); err != nil {
			t.Fatal(err)
		}
	}
	if got := v.Keys(); !reflect.DeepEqual(got, want) {
		t.Fatalf("the view's keys changed after later submits")
	}
	if n := q.KeyCount(); n > 51 {
		t.Fatalf("live table holds %d keys, want <= 51 (the window's)", n)
	}
	back, err := Import(v.Export())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if id, found, err := back.KeyedJob(110, "a", []byte{byte(i)}, EnqueueOpts{Key: fmt.Sprint("k", i), KeyWindow: 50}); !found || err != nil || id != uint64(i+1) {
			t.Fatalf("imported key k%d: %d, %v, %v", i, id, found, err)
		}
	}
	if !reflect.DeepEqual(back.Export().Keys, want) {
		t.Fatal("Export(Import(s)).Keys != s.Keys")
	}
}

func TestImportRefusesBadKeys(t *testing.T) {
	for _, c := range []struct {
		name string
		k    Key
	}{
		{"no queue", Key{Key: "k", ID: 1}},
		{"no key", Key{Queue: "a", ID: 1}},
		{"long key", Key{Queue: "a", Key: string(make([]byte, MaxKeyLen+1)), ID: 1}},
		{"id 0", Key{Queue: "a", Key: "k"}},
		{"id not handed out", Key{Queue: "a", Key: "k", ID: 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Import(Snapshot{NextID: 5, NextSeq: 1, Keys: []Key{c.k}})
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("Import = %v, want ErrBadSnapshot", err)
			}
		})
	}
}

// TestKeysProperty: under any sequence of keyed submits (retries, reuse
// with other payloads, time going on), a key names at most one job within
// its window; a retry answers that job; a snapshot taken at any point
// answers as the live state does.
func TestKeysProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := New()
		type first struct {
			id      uint64
			payload byte
			at      int64
		}
		firsts := map[string]first{} // the model: key -> the submit that made its job
		now := int64(1000)
		const window = 30
		for step := range rapid.IntRange(1, 200).Draw(t, "steps") {
			now += rapid.Int64Range(0, 5).Draw(t, "dt")
			key := fmt.Sprint("k", rapid.IntRange(0, 6).Draw(t, "key"))
			p := byte(rapid.IntRange(0, 1).Draw(t, "payload"))
			o := EnqueueOpts{Key: key, KeyWindow: window}
			id, found, err := q.KeyedJob(now, "a", []byte{p}, o)
			f, live := firsts[key]
			live = live && now < f.at+window
			switch {
			case live && f.payload == p:
				if !found || err != nil || id != f.id {
					t.Fatalf("step %d: retry of %s: %d, %v, %v; want job %d", step, key, id, found, err, f.id)
				}
			case live:
				if !errors.Is(err, ErrKeyReused) || id != f.id {
					t.Fatalf("step %d: reuse of %s with another payload: %d, %v; want ErrKeyReused naming %d", step, key, id, err, f.id)
				}
			default:
				if found || err != nil {
					t.Fatalf("step %d: %s past its window or new: %d, %v, %v", step, key, id, found, err)
				}
				j, err := q.Enqueue(now, "a", []byte{p}, keySt, o)
				if err != nil {
					t.Fatal(err)
				}
				firsts[key] = first{id: j.ID, payload: p, at: now}
			}
			if rapid.IntRange(0, 20).Draw(t, "snapshot") == 0 {
				back, err := Import(q.Export())
				if err != nil {
					t.Fatal(err)
				}
				for k, f := range firsts {
					o := EnqueueOpts{Key: k, KeyWindow: window}
					a1, a2, a3 := q.KeyedJob(now, "a", []byte{f.payload}, o)
					b1, b2, b3 := back.KeyedJob(now, "a", []byte{f.payload}, o)
					if a1 != b1 || a2 != b2 || (a3 == nil) != (b3 == nil) {
						t.Fatalf("step %d: key %s: live %d %v %v, imported %d %v %v", step, k, a1, a2, a3, b1, b2, b3)
					}
				}
			}
		}
	})
}
