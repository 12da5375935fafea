//go:build linux

package main

import (
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkFirstTouch measures what the machine charges for a page of
// memory a process touches for the first time: it maps anonymous memory
// and writes one byte in each 4 KiB page, then does it again on the same
// pages after MADV_DONTNEED has handed them back (as Go's scavenger
// does), and, with hugepages, on memory advised MADV_HUGEPAGE. A fresh
// node's first round grows its heap by this many pages; on the
// benchmark's VM a page cost 11-16 µs (docs/performance.md, the warm-up
// round).
//
//	cd bench/peers && go test -run '^$' -bench FirstTouch -benchtime 1x
func BenchmarkFirstTouch(b *testing.B) {
	const size, page, huge = 256 << 20, 4 << 10, 2 << 20
	for _, c := range []struct {
		name  string
		huge  bool
		again bool
	}{{"fresh", false, false}, {"after-dontneed", false, true}, {"hugepage", true, false}} {
		b.Run(c.name, func(b *testing.B) {
			var per time.Duration
			for range b.N {
				raw, err := syscall.Mmap(-1, 0, size+huge, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
				if err != nil {
					b.Fatal(err)
				}
				off := (huge - int(uintptr(unsafe.Pointer(&raw[0]))%huge)) % huge // hugepage-aligned
				mem := raw[off : off+size]
				if c.huge {
					if err := syscall.Madvise(mem, 14); err != nil { // MADV_HUGEPAGE
						b.Fatal(err)
					}
				}
				touch := func() time.Duration {
					t := time.Now()
					for i := 0; i < size; i += page {
						mem[i] = 1
					}
					return time.Since(t)
				}
				d := touch()
				if c.again {
					if err := syscall.Madvise(mem, syscall.MADV_DONTNEED); err != nil {
						b.Fatal(err)
					}
					d = touch()
				}
				per += d / (size / page)
				if err := syscall.Munmap(raw); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(per.Nanoseconds())/float64(b.N)/1e3, "µs/page")
		})
	}
}
