package daemon

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/xce-hpc/xce/adapters/metrics"
	"github.com/xce-hpc/xce/adapters/runner"
)

// slowSyncLogger is the file executor's fsync observer: every fsync goes
// to the metrics (when served), and one slower than runner.SlowStep is
// logged (files.slow-fsync, WARN): a reply waits for its record's fsync,
// so a slow disk stalls requests, and the log says when and how long.
func slowSyncLogger(log *zap.Logger, mx *metrics.Metrics) func(dir bool, took time.Duration) {
	return func(dir bool, took time.Duration) {
		if mx != nil {
			mx.ObserveSync(dir, took)
		}
		if took > runner.SlowStep {
			what := "a file"
			if dir {
				what = "a directory"
			}
			log.Warn(fmt.Sprintf("slow fsync: %s took %v", what, took.Round(time.Millisecond)), zap.String("key", "files.slow-fsync"))
		}
	}
}
