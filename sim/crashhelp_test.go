package sim

import (
	"testing"

	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/sim/simdisk"
)

// enqueueRecord is the WAL record of an enqueue to q0 (queue id 1 of
// sampleConfig) with payload p, as the crash enumerations write logs by
// hand.
func enqueueRecord(lsn, term uint64, p string) *schema.WalRecord {
	return &schema.WalRecord{Lsn: lsn, Now: 1767225600, Term: term, Op: &schema.WalRecord_Enqueue{Enqueue: &schema.WalEnqueue{
		Queue: "q0", QueueId: 1, Payload: []byte(p), Stamps: &schema.WalStamps{VisibilityTimeoutS: 30, MaxAttempts: 5}}}}
}

// crashBase is a disk provisioned with sampleConfig(1, 3), and that
// config decoded.
func crashBase(t *testing.T) (*schema.ClusterConfig, *simdisk.Disk) {
	t.Helper()
	blob := sampleConfig(1, 3)
	cfg, err := schema.DecodeClusterConfig(blob)
	if err != nil {
		t.Fatal(err)
	}
	base := simdisk.New()
	mustProvision(t, base, blob, epoch)
	return cfg, base
}
