package daemon

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestSlowSyncLoggedPastSlowStep(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	observe := slowSyncLogger(zap.New(core), nil)
	observe(false, 10*time.Millisecond)
	observe(true, 49*time.Millisecond)
	observe(false, 120*time.Millisecond)
	observe(true, 70*time.Millisecond)
	got := logs.All()
	if len(got) != 2 {
		t.Fatalf("%d lines logged, want the 2 fsyncs over 50 ms: %v", len(got), got)
	}
	for i, want := range []string{"slow fsync: a file took 120ms", "slow fsync: a directory took 70ms"} {
		e := got[i]
		if e.Message != want || e.Level != zapcore.WarnLevel || e.ContextMap()["key"] != "files.slow-fsync" {
			t.Errorf("line %d: %v %q %v, want WARN %q key files.slow-fsync", i, e.Level, e.Message, e.ContextMap(), want)
		}
	}
}
