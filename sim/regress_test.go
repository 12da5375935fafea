package sim

import "testing"

// Schedules of long runs (-schedules 15000 and more) that once failed, beyond
// the seeds TestSimulate runs by default: each replays in milliseconds.
var regressionSeeds = []struct {
	seed uint64
	why  string
}{
	{6460, "L3: a standby's config save failed (no space) and its next fetch attempt went out at once, so it gave up 0.8 s before the retry window"},
	{247729, "S12: a promotion abandoned a standby checkpoint while its bulk read of a segment ran; after a step-down an install removed that segment with the read still in flight (sm/bulkfence.go holds such a change until the read completes)"},
	{274838, "S5: an install cut short (a newer sync) left a segment older than the snapshot; as primary, the node read only that segment for a standby whose log matched its own and told the standby its log was longer than its own, to cut it back to lsn 2; a second standby the same; the primary died and a cut standby won, an acknowledged write lost (sm/catchup.go: a snapshot instead)"},
	{22044, "S5: a standby resynced 867 times by a lossy link began a segment at each and, counting records per sync, never checkpointed: promoted, it was still reading its 960 segments 3.5 s after the kill (sm: the count is the log's, and 64 segments make a checkpoint due too)"},
	{417214, "L5: with 2 of 5 nodes lost, a standby never saw the start of the sync the primary began with it (lost before the faults ended), acked the older one's, and the primary, needing its acks for a majority, held its next write for good (sm: records of an unseen sync make the standby ask again at the next heartbeat)"},
	{495489, "S5 (the checker's own mistake): rot struck a standby's base snapshot while it was down after acknowledging lsn 15; fsync faults at its next boots stopped it before it read the rot, and the start limit kept it down; its acknowledgement reached the primary, paused 7.9 s, only then; the checker counted the rotted node's pre-rot log only for a node stopped by the rot itself, and judged its disk as it was now"},
	{675225, "S2 (the checker's own mistake): a kill left a config repair's pointer renamed but its directory unsynced; rot struck that new pointer; two boots could not read it (the second with no excuse of its own, so the checker took the durable config for none); a power loss then brought back the intact older pointer, and the checker called loading it a config never saved"},
	{806634, "L5 (seed mode): a clogged link released a standby's ack of term 1 with sync epoch 1 while the same node, primary again in term 3, sent it a snapshot in its own sync 1; taken for an ack of that sync it ended the transfer, and the standby waited for the rest of the chunks for good (sm: a sync's epoch carries the term of its promotion, so the old ack names another sync; a primary also ignores acks sent in a term below its own)"},
	{893143, "S4 (the checker's own mistake): rot flipped a bit in data/term at a boot that died (an fsync fault) before reading it, and flipped it back at the next; the checker noted the restored, intact bytes as rotted and called reading them rot"},
	{804879, "S8 (the checker's own mistake, seed mode): a primary replicated a claim record and was killed before its reply went out; a forged retry named exactly the handle that claim made, and the new primary rightly took it; a claim record names no jobs, so the checker took the handle for an invented one (sim/handles.go: unknowable)"},
	{1011091, "S5 (the checker's own mistake): a standby of 7 acknowledged lsn 135, was killed, and restarted with rot in an older segment of its log; before it read that segment the primary committed lsn 133 on the old acknowledgement, and the checker, judging the restarted node's rotted disk rather than its log before the rot, counted 3 of 7 disks (sim/chain.go: a rotted node not yet past reading the rot counts as it was before it)"},
	{1097166, "L2: the nemesis clogged the primary's links and L2 then killed it (power loss); the clog's end delivered its backlog, a heartbeat and records sent before the last heartbeat a standby had from it, to that standby, a candidate by then, which followed the dead primary again for another failure timeout: no failover within 5 s (sm: a candidate takes nothing its lost primary sent no later than that heartbeat's round for a sign of life)"},
	{202020, "S4 (the checker's own mistake): rot flipped a bit in data/term just renamed, its directory not yet fsynced; a power loss brought back the intact file before it, and the checker, which had noted the durable entry's bytes as the rotted ones, called reading them rot"},
}

func TestRegressionSeeds(t *testing.T) {
	for _, r := range regressionSeeds {
		_, fails := runSeeds(r.seed, 1, nil)
		for _, f := range fails {
			if f != nil {
				t.Errorf("seed %d (%s): %v", r.seed, r.why, f)
			}
		}
	}
}
