package sim

import (
	"fmt"

	"github.com/xce-hpc/xce/sm"
)

// noteSwitchover traces an answered switchover.
func (w *World) noteSwitchover(nd *simNode, x sm.SwitchoverReply) {
	w.tr.line(w.now, nd.id, fmt.Sprintf("admin: switchover #%d answered %s (primary n%d, term %d) %s", x.ID, x.Outcome, x.Primary, x.Term, x.Error))
}
