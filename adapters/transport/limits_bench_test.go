package transport

import (
	"crypto/tls"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"xce/adapters/wire"
	"xce/schema"
)

// BenchmarkStalledFramesMemory is the attack of issue 8 defect 3: 300
// client connections each send a near-maximum frame but its last bytes,
// and hold it. It reports the server's extra heap while they hold, with
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
				cfg.Client = func(string, *schema.ClientRequest) *schema.ClientReply { return &schema.ClientReply{} }
				cfg.MaxConns, cfg.MaxConnsPerClient = 1000, 1000 // the buffer bound alone
				cfg.MaxBuffered = c.bound
				cfg.BodyTimeout = time.Minute
			})
			hello := &schema.Hello{Kind: schema.Hello_CLIENT, Name: "op"}
			const conns = 300
			frame := binary.BigEndian.AppendUint32(nil, wire.MaxFrameSize-8)
			frame = append(frame, make([]byte, wire.MaxFrameSize-8-64)...) // all but the last 64 bytes
			for range b.N {
				var before runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				var open []*tls.Conn
				for range conns {
					cl := rawDial(b, peers[0].Addr, pk.mats["operator"], hello)
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
