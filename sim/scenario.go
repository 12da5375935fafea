package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// BootOrder is how the nodes are started in the safety phase.
type BootOrder uint8

const (
	BootSimultaneous BootOrder = iota // all within the 200 ms jitter window
	BootStaggered                     // in priority order, seconds apart
	BootReversed                      // lowest priority first
	BootOneMissing                    // one node never starts until liveness
	bootOrders
)

func (b BootOrder) String() string {
	return [...]string{"simultaneous", "staggered", "reversed", "one-missing"}[b]
}

// PartitionKind is a network fault shape.
type PartitionKind uint8

const (
	PartIsolate    PartitionKind = iota // one node cut off both ways
	PartSymmetric                       // a group split from the rest
	PartAsymmetric                      // one direction of one link dropped
	PartClog                            // one link held, then delivered
	partKinds
)

func (p PartitionKind) String() string {
	return [...]string{"isolate", "symmetric", "asymmetric", "clog"}[p]
}

// NetFault is a partition or clog during the safety phase.
type NetFault struct {
	At, Dur time.Duration
	Kind    PartitionKind
	A, B    int // node(s) involved
}

// Scenario is one schedule: everything the run does is drawn from it and
// its Seed, so a seed reproduces it exactly. Generation can also be driven
// by rapid (rapid_test.go) so that failing scenarios shrink.
type Scenario struct {
	Seed  uint64
	Nodes int
	Order BootOrder
	// Offsets of each node's first start from t=0.
	Start []time.Duration
	// ConfigOn marks nodes provisioned with the config before boot;
	// OldConfigOn marks nodes holding an older, different config.
	ConfigOn, OldConfigOn []bool
	ConfigAge             time.Duration // mtime age of provisioned configs (stale if > StaleTimeout)
	StaleTimeout          time.Duration
	SeedLiteralP0         bool
	// Safety phase length, then the liveness phase (faults off).
	Safety time.Duration

	// Swarm rates.
	CrashPerEffect float64       // kill -9 at an effect boundary
	RestartDelay   time.Duration // systemd RestartSec
	WipeOnRestart  float64
	DiskWriteErr   float64
	DiskNoSpace    float64
	DiskFsyncErr   float64
	DiskReadErr    float64
	CorruptConf    float64 // chance per restart of silent bit rot in the node's conf/
	MinDelay       time.Duration
	MaxDelay       time.Duration
	Loss, Dup      float64
	NetFaults      []NetFault
	Drift          []float64       // per-node timer rate error (e.g. 0.01 = 1% fast)
	WallOffset     []time.Duration // per-node wall clock offset
	WallSteps      []WallStep      // wall clock steps (NTP jumps, operator mistakes)

	// SeedMode runs every node in the seed's availability mode (DESIGN
	// §4.4): acknowledged writes may be lost, and the durability checker
	// counts the loss instead of failing. Otherwise quorum mode, where any
	// loss of an acknowledged write is an S5 violation.
	SeedMode bool
	// MaxWALRecords is the checkpoint trigger (0: the default 10,000,
	// which a schedule's workload never reaches). BUGGIFY-style: half the
	// schedules use the minimum, 100, so checkpoints, segment rolls and
	// the removal of old segments run under the faults.
	MaxWALRecords int
	// RetainWALRecords, with MaxWALRecords set, is how far behind a
	// checkpoint the primary keeps segments for its standbys (0, 50 or
	// 300), so catch-up meets both retained and removed records.
	RetainWALRecords int
	// SnapshotChunk, when set, is a tiny snapshot chunk (BUGGIFY: half the
	// schedules), so a standby's snapshot sync takes many chunks, each
	// waiting for the standby's progress ack, under the faults.
	SnapshotChunk int
	// Clients is how many simulated clients run the job workload, each
	// with one request outstanding at a time.
	Clients int
	// Pauses freeze a process (SIGSTOP) and thaw it (SIGCONT).
	Pauses []Pause
	// PrimaryFaults strike whoever is primary at the time (nemesis.go).
	PrimaryFaults []PrimaryFault
	// PowerLossAt, when non-zero, cuts the power of every node at once at
	// that time of the safety phase (unsynced data lost on every disk).
	PowerLossAt time.Duration
	// Disk faults of issue 7 B3 (drawn by generateDiskNet).
	// FsyncGate: a failed fsync drops the file's dirty data (simdisk).
	FsyncGate bool
	// ShortWrite: chance that a failing write first stored a prefix.
	ShortWrite float64
	// TornGarbage: power loss may leave unsynced appended tails ending in
	// garbage, or with a zeroed hole before later data.
	TornGarbage bool
	// CorruptData: chance per restart of a down node of one flipped bit in
	// a durable file of its data/ (WAL segment, snapshot, data/term). Only
	// in quorum mode with 3+ nodes, and in at most a minority of the nodes
	// (MaxRotted): rot in every copy is data loss by definition.
	CorruptData float64
	// LinkRate is each directed link's rate in bytes/s (index from*n+to),
	// nil for unlimited links (link.go).
	LinkRate []float64
	// Resets are connection resets of one directed link (link.go).
	Resets []LinkReset
	// PayloadPad (BUGGIFY) pads every enqueued payload with that many
	// bytes: WAL batches span disk sectors (torn tails with garbage and
	// holes) and snapshots and batches are big on rate-limited links.
	PayloadPad int
	// FsyncWindowCut (BUGGIFY) is the chance that a node loses power the
	// moment it issues the fsync of a WAL append: the append is only in
	// the page cache, so the crash tears it.
	FsyncWindowCut float64
	// DiskStall (BUGGIFY) is the chance that a file operation stalls the
	// node's disk for 0.2–4 s (a slow device, a RAID rebuild, a full
	// journal): everything queued behind it waits, so long sequences —
	// a standby's install, truncation or checkpoint — overlap elections.
	DiskStall float64
	// StrikeLogWork (BUGGIFY) is the chance that a standby's long log
	// sequence — a snapshot install's fsync and read-back, a truncation, its own
	// checkpoint — stalls its disk for 2.5–6 s while a targeted fault
	// strikes the primary (nemesis.go): the node may be promoted, or follow
	// a new primary, with the sequence still in flight.
	StrikeLogWork float64
	// SyncBuffer, when set, is a tiny bound (BUGGIFY: 3 schedules in 10,
	// 1–2048 bytes) on the records a primary holds for a standby while
	// that standby's snapshot is encoded (Options.SyncBufferBytes): past
	// it they are dropped, and the standby must find the gap after its
	// install and be caught up from the log, under the faults.
	SyncBuffer int
	// SendQueue, when set, is a tiny send queue per link (BUGGIFY: 2
	// schedules in 10, 2–16 messages, while the faults are on; the
	// transport's is 64): a backlogged link drops its oldest messages, as
	// the transport does, far more often. The flow control of snapshots
	// and catch-ups keeps them under 64, so without it the drop-oldest path
	// was never taken.
	SendQueue int
	// FinalPowerLoss: the full restart at the end of the run, which the
	// durability check reads the state back after, is a power loss of
	// every node rather than a kill -9 of every process.
	FinalPowerLoss bool
	// Faults of issue 21 item 7 (corrupt.go, drawn by drawBlindFaults).
	// CorruptMsg: chance that a message carrying a payload (a config, a
	// snapshot chunk, WAL records) has a bit of it flipped in flight,
	// while the faults are on.
	CorruptMsg float64
	// ConfRotLive: chance that a primary asked to serve its config finds
	// a bit of its conf/ file flipped by rot since it loaded it.
	ConfRotLive float64
	// Upgrades: how many admin upgrades of the config (OP_upgradeConfig)
	// the schedule sends its primary (TargetUpgrade in PrimaryFaults).
	Upgrades int
	// Switchovers: how many admin switchovers (switchover.go) the schedule
	// asks of its primary (TargetSwitchover in PrimaryFaults), quorum mode.
	Switchovers int
}

// Pause freezes node Node from At for Dur: its inputs, timer fires and
// I/O completions are held and then delivered in one burst, its monotonic
// clock jumping by Dur, as SIGSTOP/SIGCONT (or a long GC or VM stall) do.
type Pause struct {
	At, Dur time.Duration
	Node    int
}

// WallStep moves one node's wall clock by By at time At.
type WallStep struct {
	At   time.Duration
	Node int
	By   time.Duration
}

func (s Scenario) String() string {
	mode := "quorum"
	if s.SeedMode {
		mode = "seed"
	}
	return fmt.Sprintf("seed=%d nodes=%d mode=%s clients=%d order=%s config=%v old=%v literalP0=%v safety=%v crash/effect=%.4f loss=%.3f delay=%v..%v netfaults=%d pauses=%d powerloss=%v final-powerloss=%v fsyncgate=%v short-write=%.2f torn-garbage=%v data-rot=%.3f rated=%v resets=%d pad=%d disk-stall=%.4f strike-log-work=%.2f sync-buffer=%d send-queue=%d corrupt-msg=%.3f conf-rot-live=%.2f upgrades=%d",
		s.Seed, s.Nodes, mode, s.Clients, s.Order, s.ConfigOn, s.OldConfigOn, s.SeedLiteralP0, s.Safety, s.CrashPerEffect, s.Loss, s.MinDelay, s.MaxDelay, len(s.NetFaults), len(s.Pauses), s.PowerLossAt, s.FinalPowerLoss,
		s.FsyncGate, s.ShortWrite, s.TornGarbage, s.CorruptData, s.LinkRate != nil, len(s.Resets), s.PayloadPad, s.DiskStall, s.StrikeLogWork, s.SyncBuffer, s.SendQueue, s.CorruptMsg, s.ConfRotLive, s.Upgrades) + s.switchoverString()
}

// drawer abstracts the source of choices: a seeded PRNG or rapid.
type drawer interface {
	intn(n int, label string) int
	float(max float64, label string) float64
	coin(p float64, label string) bool
}

type rngDrawer struct{ r *rand.Rand }

func (d rngDrawer) intn(n int, _ string) int { return d.r.IntN(n) }
func (d rngDrawer) float(m float64, _ string) float64 {
	return d.r.Float64() * m
}
func (d rngDrawer) coin(p float64, _ string) bool { return d.r.Float64() < p }

// Generate draws the scenario for a seed (swarm testing: each schedule
// draws its own fault rates, and many draw none of some kinds).
func Generate(seed uint64) Scenario {
	return generate(seed, rngDrawer{rand.New(rand.NewPCG(seed, 0x5ce))})
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func generate(seed uint64, d drawer) Scenario {
	s := Scenario{Seed: seed}
	// 1..7 nodes, favouring the sizes operators run (3 and 5).
	sizes := []int{1, 2, 3, 3, 3, 3, 4, 5, 5, 5, 6, 7}
	s.Nodes = sizes[d.intn(len(sizes), "nodes")]
	s.Order = BootOrder(d.intn(int(bootOrders), "order"))
	s.Start = make([]time.Duration, s.Nodes)
	for i := range s.Start {
		switch s.Order {
		case BootSimultaneous, BootOneMissing:
			s.Start[i] = ms(d.intn(200, "start"))
		case BootStaggered:
			s.Start[i] = time.Duration(i)*ms(500+d.intn(3000, "gap")) + ms(d.intn(100, "start"))
		case BootReversed:
			s.Start[i] = time.Duration(s.Nodes-1-i)*ms(500+d.intn(3000, "gap")) + ms(d.intn(100, "start"))
		}
	}
	s.ConfigOn = make([]bool, s.Nodes)
	s.OldConfigOn = make([]bool, s.Nodes)
	switch d.intn(4, "provision") {
	case 0: // as the seed intends: only priority 0
		s.ConfigOn[0] = true
	case 1: // P0 without config (a lone node has nobody else to hold it)
		if s.Nodes == 1 {
			s.ConfigOn[0] = true
			break
		}
		s.ConfigOn[1+d.intn(s.Nodes-1, "holder")] = true
	default:
		for i := range s.ConfigOn {
			s.ConfigOn[i] = d.coin(0.5, "has-config")
			if !s.ConfigOn[i] {
				s.OldConfigOn[i] = d.coin(0.3, "old-config")
			}
		}
		if !anyTrue(s.ConfigOn) {
			s.ConfigOn[d.intn(s.Nodes, "holder")] = true
		}
	}
	s.StaleTimeout = 24 * time.Hour
	if d.coin(0.2, "short-stale") {
		s.StaleTimeout = time.Hour
	}
	s.ConfigAge = time.Duration(d.intn(48, "age-h")) * time.Hour
	s.Safety = ms(5000 + d.intn(25000, "safety"))
	if d.coin(0.05, "long-safety") {
		s.Safety = ms(100000 + d.intn(30000, "safety")) // spans the ~88 s fetch window
	}
	if d.coin(0.6, "crashes") {
		s.CrashPerEffect = d.float(0.01, "crash-rate")
	}
	s.RestartDelay = ms(200 + d.intn(3000, "restart"))
	if d.coin(0.2, "wipes") {
		s.WipeOnRestart = d.float(0.3, "wipe")
	}
	if d.coin(0.3, "disk-faults") {
		s.DiskWriteErr = d.float(0.02, "write-err")
		s.DiskNoSpace = d.float(0.02, "nospace")
		s.DiskFsyncErr = d.float(0.005, "fsync-err")
		s.DiskReadErr = d.float(0.02, "read-err")
	}
	if d.coin(0.2, "corrupt") {
		s.CorruptConf = d.float(0.3, "corrupt")
	}
	s.MinDelay = time.Duration(d.intn(2000, "min-delay")) * time.Microsecond
	s.MaxDelay = s.MinDelay + time.Duration(d.intn(30000, "delay-span"))*time.Microsecond
	if d.coin(0.4, "lossy") {
		s.Loss = d.float(0.2, "loss")
	}
	if d.coin(0.2, "dups") {
		s.Dup = d.float(0.1, "dup")
	}
	nf := d.intn(5, "netfaults")
	for i := 0; i < nf; i++ {
		f := NetFault{
			At:   ms(d.intn(int(s.Safety/time.Millisecond), "nf-at")),
			Dur:  ms(100 + d.intn(8000, "nf-dur")),
			Kind: PartitionKind(d.intn(int(partKinds), "nf-kind")),
			A:    d.intn(s.Nodes, "nf-a"),
			B:    d.intn(s.Nodes, "nf-b"),
		}
		if s.Safety > 100*time.Second && d.coin(0.5, "nf-long") {
			f.Dur = ms(90000 + d.intn(10000, "nf-dur"))
		}
		s.NetFaults = append(s.NetFaults, f)
	}
	drawPrimaryFaults(&s, d)
	s.Drift = make([]float64, s.Nodes)
	s.WallOffset = make([]time.Duration, s.Nodes)
	for i := range s.Drift {
		s.Drift[i] = d.float(0.02, "drift") - 0.01
		s.WallOffset[i] = ms(d.intn(20000, "wall")) - 10*time.Second
	}
	if d.coin(0.3, "wall-steps") {
		for k := d.intn(3, "wall-step-count") + 1; k > 0; k-- {
			by := time.Duration(1+d.intn(48*60, "wall-step-min")) * time.Minute
			if d.coin(0.5, "wall-step-back") {
				by = -by
			}
			s.WallSteps = append(s.WallSteps, WallStep{At: ms(d.intn(int(s.Safety/time.Millisecond), "wall-step-at")), Node: d.intn(s.Nodes, "wall-step-node"), By: by})
		}
	}
	generateWorkload(&s, d)
	generateDiskNet(&s, d)
	if d.coin(0.5, "tiny-snapshot-chunks") {
		s.SnapshotChunk = 64 + d.intn(448, "snapshot-chunk")
	}
	if d.coin(0.3, "disk-stalls") { // drawn last: older seeds keep the rest
		s.DiskStall = 0.001 + d.float(0.01, "disk-stall")
	}
	if d.coin(0.4, "log-work-strikes") && s.Nodes > 1 {
		s.StrikeLogWork = 0.2 + d.float(0.6, "log-work-strike")
	}
	if d.coin(0.3, "tiny-sync-buffer") && s.Nodes > 1 { // drawn after the rest: older seeds keep it
		s.SyncBuffer = 1 + d.intn(2048, "sync-buffer")
	}
	if d.coin(0.2, "tiny-send-queue") && s.Nodes > 1 { // drawn last: older seeds keep the rest
		s.SendQueue = 2 + d.intn(15, "send-queue")
	}
	drawBlindFaults(&s, d)
	drawSwitchovers(&s, d)
	drawClogs(&s, d) // drawn last: older seeds keep the rest
	return s
}

// MaxRotted is how many nodes of a cluster bit rot in data/ may hit: a
// minority, so that a majority keeps every committed record.
func (s Scenario) MaxRotted() int {
	if s.SeedMode || s.SeedLiteralP0 || s.Nodes < 3 {
		return 0
	}
	return (s.Nodes - 1) / 2
}

// generateDiskNet draws the faults of issue 7 B3, after every other draw
// so that older seeds keep their schedules otherwise: fsyncgate, short
// writes, garbage and holes in torn tails, bit rot in data/, link rates
// and connection resets.
func generateDiskNet(s *Scenario, d drawer) {
	s.FsyncGate = d.coin(0.5, "fsyncgate")
	if d.coin(0.5, "short-writes") {
		s.ShortWrite = d.float(1, "short-write")
	}
	s.TornGarbage = d.coin(0.5, "torn-garbage")
	if d.coin(0.25, "data-rot") && s.MaxRotted() > 0 {
		s.CorruptData = d.float(0.5, "data-rot-rate")
	}
	if d.coin(0.5, "link-rates") {
		// Log-uniform from 4 MiB/s to 1 GiB/s per directed link. Slower
		// links starve a rejoining standby: its whole snapshot travels as
		// one message, heartbeats queue behind it and its failure timeout
		// fires (at 256 KiB/s with padded payloads the old primary never
		// rejoined) — catch-up by records is issue 9.
		s.LinkRate = make([]float64, s.Nodes*s.Nodes)
		for i := range s.LinkRate {
			s.LinkRate[i] = float64(4<<20) * math.Pow(2, d.float(8, "link-rate"))
		}
	}
	if d.coin(0.4, "big-payloads") {
		s.PayloadPad = 200 + d.intn(1800, "payload-pad")
	}
	if d.coin(0.4, "fsync-window-cuts") {
		s.FsyncWindowCut = d.float(0.03, "fsync-window-cut")
	}
	if d.coin(0.3, "resets") && s.Nodes > 1 {
		safetyMS := int(s.Safety / time.Millisecond)
		for k := d.intn(6, "reset-count") + 1; k > 0; k-- {
			r := LinkReset{At: ms(d.intn(safetyMS, "reset-at")), From: d.intn(s.Nodes, "reset-from"), To: d.intn(s.Nodes-1, "reset-to")}
			if r.To >= r.From {
				r.To++
			}
			s.Resets = append(s.Resets, r)
		}
	}
}

// generateWorkload draws the durability mode, the clients and the faults
// that hit the job data path: pauses and a power loss of every node.
func generateWorkload(s *Scenario, d drawer) {
	// sm.DefaultOptions picks seed mode for 2 nodes (a 2-node majority
	// cannot lose a node); keep that unless the draw says otherwise.
	if s.Nodes == 2 {
		s.SeedMode = !d.coin(0.2, "two-node-quorum")
	} else {
		s.SeedMode = d.coin(0.2, "seed-mode")
	}
	if d.coin(0.5, "tiny-wal") {
		s.MaxWALRecords = 100
		s.RetainWALRecords = []int{0, 50, 300}[d.intn(3, "retain-wal")]
	}
	s.Clients = 2 + d.intn(3, "clients")
	safetyMS := int(s.Safety / time.Millisecond)
	if d.coin(0.4, "pauses") {
		for k := d.intn(3, "pause-count") + 1; k > 0; k-- {
			p := Pause{Dur: ms(200 + d.intn(9800, "pause-dur")), Node: d.intn(s.Nodes, "pause-node")}
			// A pause ends inside the safety phase: the liveness phase
			// starts with every process running.
			if room := safetyMS - int(p.Dur/time.Millisecond); room > 0 {
				p.At = ms(d.intn(room, "pause-at"))
				s.Pauses = append(s.Pauses, p)
			}
		}
	}
	if d.coin(0.2, "power-loss") {
		s.PowerLossAt = ms(1 + d.intn(safetyMS-1, "power-loss-at"))
	}
	s.FinalPowerLoss = d.coin(0.5, "final-power-loss")
}

func anyTrue(b []bool) bool {
	for _, x := range b {
		if x {
			return true
		}
	}
	return false
}

// Demo is the visible boot `make run` shows: three nodes started within
// the jitter window, the config provisioned on n0 only, no faults; the
// liveness phase then kills the primary and restarts it.
func Demo(seed uint64) Scenario {
	s := Scenario{
		Seed:         seed,
		Nodes:        3,
		Order:        BootSimultaneous,
		ConfigOn:     []bool{true, false, false},
		OldConfigOn:  []bool{false, false, false},
		StaleTimeout: 24 * time.Hour,
		Safety:       6 * time.Second,
		RestartDelay: 2 * time.Second,
		MinDelay:     200 * time.Microsecond,
		MaxDelay:     2 * time.Millisecond,
		Drift:        make([]float64, 3),
		WallOffset:   make([]time.Duration, 3),
		Clients:      2,
	}
	r := rand.New(rand.NewPCG(seed, 0xde70))
	for i := 0; i < 3; i++ {
		s.Start = append(s.Start, time.Duration(r.IntN(200))*time.Millisecond)
	}
	return s
}
