package sim

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sm"
)

// Faults of issue 21 item 7a, and the checker they feed.
//
//   - Corruption in flight (Scenario.CorruptMsg): while the faults are on,
//     a message carrying a payload (a config in a fetch reply or an
//     upgrade's push, a snapshot chunk, WAL records) may arrive with one
//     bit of it flipped. TLS makes that unlikely on a real link; the
//     protocol carries a SHA-256 with every config (seed 002 §5), CRCs
//     with every WAL frame and a checksum with every snapshot anyway, and
//     a receiver that trusts the bytes over them must be caught.
//   - Bit rot in the conf/ of a running primary (Scenario.ConfRotLive):
//     when a standby asks the primary for its config, the primary's file
//     may have a bit flipped since it loaded it, so the re-read it serves
//     from (§5.4) finds the rot. (Sim's older CorruptConf rots a down
//     node's conf/ before a boot, which the boot's verification meets;
//     a running primary re-reads only to serve, so rot there needs a
//     fetch to follow it.)
//   - Admin upgrades (Scenario.Upgrades, TargetUpgrade): OP_upgradeConfig
//     sent to whoever is primary, so that config pushes (§6) run, and can
//     be corrupted, in the default run.
//
// The checker, S1 issued: every config a node runs is one some node
// issued: provisioned before the run, sent by a node (hashed as it left,
// before the network could flip it) or saved by a primary from an admin
// upgrade. A receiver that saves corrupted bytes runs a config whose name
// matches its own bytes (S1's older check passes) but that nobody issued.

// blindFaults is the world's state for these faults and the checker.
type blindFaults struct {
	rng      *rand.Rand        // its own stream: the rest of a schedule keeps its draws
	genuine  map[[32]byte]bool // SHA-256 of every config issued
	running  []string          // per node: the config name last judged
	upgrades int               // upgrades sent
	// spoof, set by a test only, sees every message sent (synccheck_test.go).
	spoof func(from, to int, m sm.Msg)
}

func (b *blindFaults) init(w *World) {
	if b.genuine != nil {
		return
	}
	b.rng = rand.New(rand.NewPCG(w.sc.Seed, 0xb11d))
	b.genuine = map[[32]byte]bool{sha256.Sum256(w.config): true, sha256.Sum256(w.old): true}
	b.running = make([]string, len(w.nodes))
}

// drawBlindFaults draws the faults above (after every other draw, so older
// seeds keep the rest of their schedules).
func drawBlindFaults(s *Scenario, d drawer) {
	safetyMS := int(s.Safety / time.Millisecond)
	if d.coin(0.25, "corrupt-msgs") {
		s.CorruptMsg = 0.02 + d.float(0.2, "corrupt-msg")
	}
	if d.coin(0.25, "conf-rot-live") {
		s.ConfRotLive = 0.2 + d.float(0.6, "conf-rot-live-rate")
	}
	if d.coin(0.25, "upgrades") && s.Nodes > 1 {
		s.Upgrades = 1 + d.intn(3, "upgrade-count")
		for k := 0; k < s.Upgrades; k++ {
			s.PrimaryFaults = append(s.PrimaryFaults, PrimaryFault{At: ms(d.intn(safetyMS, "upgrade-at")), Kind: TargetUpgrade})
		}
	}
}

// inFlight is what the network does to m on its way from -> to: it may
// flip a bit of its payload, and a config fetch may find rot in the
// primary's conf/ (both only while the faults are on).
func (w *World) inFlight(from, to int, m sm.Msg) sm.Msg {
	if w.bf.spoof != nil {
		w.bf.spoof(from, to, m)
	}
	if !w.net.faultsOn || w.liveness || from == to || w.sc.CorruptMsg == 0 && w.sc.ConfRotLive == 0 {
		return m
	}
	b := &w.bf
	b.init(w)
	if m.Type == sm.MsgReplConfig && w.sc.ConfRotLive > 0 {
		w.rotServedConfig(w.nodes[to], m)
	}
	rate := w.sc.CorruptMsg
	if m.Type == sm.MsgReplConfigReply || m.Type == sm.MsgReplConfigPush {
		rate = min(3*rate, 0.66) // rare messages: a config push runs only after an upgrade
	}
	if len(m.Bytes) == 0 || rate == 0 || b.rng.Float64() >= rate {
		return m
	}
	c := slices.Clone(m.Bytes)
	bit := b.rng.IntN(len(c) * 8)
	c[bit/8] ^= 1 << (bit % 8)
	m.Bytes = c
	w.tr.line(w.now, -1, fmt.Sprintf("corrupted in flight: n%d -> n%d %s, bit %d of %d bytes", from, to, m.Type, bit, len(c)))
	return m
}

// rotServedConfig: the primary nd, asked by m for its config, will re-read
// its file (the asker's tag differs from its own); rot may have struck it.
func (w *World) rotServedConfig(nd *simNode, m sm.Msg) {
	if !nd.up || nd.node.Role() != sm.RolePrimary || m.ConfigTag == nd.node.ConfigTag() {
		return
	}
	_, name, ok := nd.node.Config()
	if !ok || w.bf.rng.Float64() >= w.sc.ConfRotLive {
		return
	}
	p := sm.ConfDir + "/" + name
	if nd.disk.Corrupt(p, w.bf.rng) {
		nd.chk.excuse() // its next boot may find no config
		w.tr.line(w.now, nd.id, "bit rot in "+p+" while it runs")
	}
}

// upgradeConfig sends the primary p an admin's OP_upgradeConfig: its own
// config with another port (the queues, which the workload uses, stay).
func (w *World) upgradeConfig(p int) {
	nd := w.nodes[p]
	if w.paused(p) || !nd.up {
		return // the call waits on a stopped process; the admin gives up
	}
	blob, _, ok := nd.node.Config()
	if !ok {
		return
	}
	c, err := schema.DecodeClusterConfig(blob)
	if err != nil {
		w.violate("S1", "n%d runs a config that does not decode: %v", p, err)
		return
	}
	w.bf.init(w)
	w.bf.upgrades++
	c.Port = 7000 + uint32(w.bf.upgrades)
	up, err := schema.Encode(c)
	if err != nil {
		w.violate("S7", "encoding n%d's config with port %d: %v", p, c.Port, err)
		return
	}
	// What the primary will save if it accepts: the same config with the
	// next generation (it is the generation's sole authority), encoded
	// deterministically, as sm does. A save of it cut short by a crash
	// can surface at the next boot without its upgrade.saved.
	c.ConfigGeneration = nd.node.ConfigGeneration() + 1
	if next, err := schema.Encode(c); err == nil {
		w.bf.genuine[sha256.Sum256(next)] = true
	}
	sum := sha256.Sum256(up)
	w.tr.line(w.now, p, fmt.Sprintf("admin: upgradeConfig #%d (port %d, %d bytes)", w.bf.upgrades, c.Port, len(up)))
	w.deliver(p, sm.UpgradeConfig{ID: uint64(w.bf.upgrades), Bytes: up, SHA256: sum[:], Peer: "admin"})
}

// checkConfigIssued: S1 issued (see above), after every step of a node,
// before its effects run (so the configs it sends are hashed as sent).
func (w *World) checkConfigIssued(nd *simNode, effs []sm.Effect) {
	if !nd.up || nd.node == nil {
		return
	}
	b := &w.bf
	b.init(w)
	for _, e := range effs {
		switch x := e.(type) {
		case sm.Send:
			if len(x.Msg.Bytes) > 0 && (x.Msg.Type == sm.MsgReplConfigReply || x.Msg.Type == sm.MsgReplConfigPush) {
				b.genuine[sha256.Sum256(x.Msg.Bytes)] = true
			}
		case sm.Log:
			if x.Key == "upgrade.saved" {
				if blob, _, ok := nd.node.Config(); ok {
					b.genuine[sha256.Sum256(blob)] = true
				}
			}
		}
	}
	blob, name, ok := nd.node.Config()
	if !ok || name == b.running[nd.id] {
		return
	}
	b.running[nd.id] = name
	if !b.genuine[sha256.Sum256(blob)] {
		w.violate("S1", "n%d (%s) runs config %s, which no node issued: not provisioned, not sent by a node, not saved from an upgrade (bytes corrupted on their way in?)", nd.id, nd.node.Role(), name)
	}
}
