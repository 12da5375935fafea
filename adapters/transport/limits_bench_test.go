package transport

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/wire"
)

// BenchmarkStalledFramesMemory is the attack of issue 8 defect 3 on the
// API: 300 client connections each send a near-maximum request body but
// its last bytes, and hold it, while the handler reads it whole (as
// Connect does). It reports the server's extra heap while they hold, with
// the default buffer bound (64 MiB) and without one, in the same run.
func BenchmarkStalledFramesMemory(b *testing.B) {
	for _, c := range []struct {
		name  string
		bound int64
	}{{"bounded", DefaultMaxBuffered}, {"unbounded", 1 << 40}} {
		b.Run(c.name, func(b *testing.B) {
			pk, _ := certs(b)
			peers := peersOf(freeAddrs(b, 2))
			start(b, 0, peers, pk.mats["n0"], func(cfg *Config) {
				cfg.HTTP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.ReadAll(r.Body) // held whole, as a Connect handler holds a message
				})
				cfg.MaxConns, cfg.MaxConnsPerClient = 1000, 1000 // the buffer bound alone
				cfg.MaxBuffered = c.bound
				cfg.BodyTimeout = time.Minute
			})
			const conns = 300
			frame := fmt.Appendf(nil, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", wire.MaxFrameSize-8)
			frame = append(frame, make([]byte, wire.MaxFrameSize-8-64)...) // all but the last 64 bytes
			for range b.N {
				var before runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				var open []*tls.Conn
				for range conns {
					cl := rawDialALPN(b, peers[0].Addr, pk.mats["operator"], "http/1.1", nil)
					open = append(open, cl)
					go func() {
						_ = cl.SetWriteDeadline(time.Now().Add(5 * time.Second))
						_, _ = cl.Write(frame) // blocks once the server stops reading
					}()
				}
				time.Sleep(3 * time.Second)
				var held runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&held)
				b.ReportMetric(float64(int64(held.HeapInuse)-int64(before.HeapInuse))/(1<<20), "MiB-held")
				for _, cl := range open {
					cl.Close()
				}
			}
		})
	}
}
