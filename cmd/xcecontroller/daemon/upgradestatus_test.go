package daemon

import (
	"testing"

	"connectrpc.com/connect"

	"github.com/xce-hpc/xce/adapters/api"
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

// A switchover's outcome gives the client's code as the API documents it
// (schema/api.proto, docs/client-api.md): the daemon's status, then the
// API's code of that status (what the client is told and the metrics
// count).
func TestSwitchoverCodeFromOutcome(t *testing.T) {
	req := &wire.Request{Switchover: &sm.Switchover{To: -1}}
	for _, tc := range []struct {
		o    sm.SwitchoverOutcome
		want connect.Code
	}{
		{sm.SwitchoverNotPrimary, connect.CodeUnavailable},
		{sm.SwitchoverDisabled, connect.CodeFailedPrecondition},
		{sm.SwitchoverBusy, connect.CodeAborted},
		{sm.SwitchoverInvalid, connect.CodeInvalidArgument},
		{sm.SwitchoverNotInSync, connect.CodeFailedPrecondition},
		{sm.SwitchoverFailed, connect.CodeAborted},
		{sm.SwitchoverOutcome(200), connect.CodeInvalidArgument},
	} {
		rep := &wire.Reply{Status: switchoverStatus(tc.o), Switchover: &sm.SwitchoverReply{Outcome: tc.o, Primary: -1}}
		if got := api.CodeOf(req, rep); got != tc.want {
			t.Errorf("outcome %v: code %v, want %v", tc.o, got, tc.want)
		}
	}
	if got := api.CodeOf(req, &wire.Reply{Switchover: &sm.SwitchoverReply{Outcome: sm.SwitchoverOK, Primary: 1, Term: 4}}); got != api.CodeOK {
		t.Errorf("a switchover done: code %v, want ok", got)
	}
}
