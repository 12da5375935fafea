package daemon

import (
	"testing"

	"github.com/xce-hpc/xce/adapters/authz"
	"github.com/xce-hpc/xce/adapters/wire"
	"github.com/xce-hpc/xce/sm"
)

// An upgrade's status comes from sm's outcome code, never from its text:
// an upgrade abandoned by a primary stepping down may have been saved, so
// it is "outcome unknown", not a refusal of the request.
func TestUpgradeStatusFromOutcome(t *testing.T) {
	for _, tc := range []struct {
		o    sm.UpgradeOutcome
		want int32
	}{
		{sm.UpgradeNotPrimary, sm.StatusEAGAIN},
		{sm.UpgradeDisabled, authz.StatusForbidden},
		{sm.UpgradeBusy, wire.StatusBusy},
		{sm.UpgradeSaveFailed, sm.StatusEIO},
		{sm.UpgradeInvalid, sm.StatusEINVAL},
		{sm.UpgradeUnknown, sm.StatusOutcomeUnknown},
	} {
		if got := upgradeStatus(tc.o); got != tc.want {
			t.Errorf("outcome %d: status %d, want %d", tc.o, got, tc.want)
		}
	}
}
