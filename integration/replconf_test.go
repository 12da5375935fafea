package integration

// Seed 002 §14.2, the rows that do not need OP_upgradeConfig, each with
// real xcecontroller processes on loopback.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/sm"
)

// test_standby_receives_config_on_first_boot: a fresh standby with no
// conf/ receives the config; conf/current is created and the file's
// SHA-256 verifies.
func TestStandbyReceivesConfigOnFirstBoot(t *testing.T) {
	c := newCluster(t, 2, fastTimings...)
	blob := configBlob(t, "first-boot", 3, 8)
	install(t, c, 0, blob)
	if _, err := os.Stat(confDir(c, 1)); !os.IsNotExist(err) {
		t.Fatalf("n1 has a conf/ before its first boot: %v", err)
	}
	start(t, c, 0, 1)
	rows, p := converge(t, c, -1, 15*time.Second)
	if p != 0 {
		t.Fatalf("primary %s, want n0:\n%s", rows[p].Name, fmtRows(rows))
	}
	info := verifyConf(t, c, 1, blob)
	if rows[1].ConfigTag != tagHex(blob) || info.Generation != 1 {
		t.Fatalf("n1 serves tag %s generation %d, want %s generation 1", rows[1].ConfigTag, info.Generation, tagHex(blob))
	}
	ptr, err := os.ReadFile(filepath.Join(confDir(c, 1), "current"))
	if err != nil || !bytes.Equal(ptr, sm.PointerContents(sm.VersionName(sumOf(blob)))) {
		t.Fatalf("n1 conf/current = %q, %v", ptr, err)
	}
	waitLog(t, c, 1, 0, "HA: config received and saved (tag="+tagHex(blob)+")", time.Second)
}

// test_standby_skips_fetch_on_tag_match: a restarted standby whose saved
// tag matches gets up_to_date and does no file I/O on conf/ — same files,
// same inodes, same mtimes.
func TestStandbySkipsFetchOnTagMatch(t *testing.T) {
	c := newCluster(t, 2, fastTimings...)
	blob := configBlob(t, "tag-match", 3, 8)
	install(t, c, 0, blob)
	start(t, c, 0, 1)
	converge(t, c, -1, 15*time.Second)
	if code := stop(t, c, 1, syscall.SIGTERM); code != 0 {
		t.Fatalf("n1 exit code %d after SIGTERM, want 0", code)
	}
	before := snapshotDir(t, confDir(c, 1))
	off := logOffset(c, 1)
	start(t, c, 1)
	waitLog(t, c, 1, off, "HA: saved config tag="+tagHex(blob)+" matches primary — proceeding with full init", 10*time.Second)
	rows, p := converge(t, c, -1, 10*time.Second)
	if p != 0 || rows[1].ConfigTag != tagHex(blob) {
		t.Fatalf("after restart:\n%s", fmtRows(rows))
	}
	if d := diffSnapshots(before, snapshotDir(t, confDir(c, 1))); d != "" {
		t.Fatalf("n1 conf/ changed on a tag match: %s", d)
	}
	if l := logSince(c, 1, off); strings.Contains(l, "conf/current updated") || strings.Contains(l, "differs from primary") {
		t.Fatalf("n1 saved a config on a tag match:\n%s", l)
	}
}

// test_standby_updates_config_on_tag_mismatch: a standby restarted with a
// different saved config (installed while it was stopped) logs the §10.8
// WARN, ends on the primary's version, and keeps the previous one.
func TestStandbyUpdatesConfigOnTagMismatch(t *testing.T) {
	c := newCluster(t, 2, fastTimings...)
	a := configBlob(t, "primary-version", 3, 8)
	b := configBlob(t, "standby-version", 4, 8)
	install(t, c, 0, a)
	start(t, c, 0, 1)
	converge(t, c, -1, 15*time.Second)
	stop(t, c, 1, syscall.SIGTERM)
	install(t, c, 1, b)
	verifyConf(t, c, 1, b)
	off := logOffset(c, 1)
	start(t, c, 1)
	want := "Standby saved config tag=" + tagHex(b) + " differs from primary tag=" + tagHex(a) + " — saved config may be stale, updating from primary"
	if line := waitLog(t, c, 1, off, want, 10*time.Second); !strings.Contains(line, "WARN") {
		t.Fatalf("§10.8 line is not a WARN: %s", line)
	}
	rows, p := converge(t, c, -1, 10*time.Second)
	if p != 0 || rows[1].ConfigTag != tagHex(a) {
		t.Fatalf("after restart:\n%s", fmtRows(rows))
	}
	verifyConf(t, c, 1, a)
	prev := filepath.Join(confDir(c, 1), sm.VersionName(sumOf(b)))
	got, err := os.ReadFile(prev)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("previous version %s not retained intact: %v", prev, err)
	}
	if v, _ := checkVersionedFiles(t, confDir(c, 1)); v != 2 {
		t.Fatalf("n1 keeps %d versioned files, want 2 (conf_keep_n)", v)
	}
}

// test_primary_missing_config_aborts: a lone primary with no conf/ exits
// non-zero with the §10.1 FATAL.
func TestPrimaryMissingConfigAborts(t *testing.T) {
	c := newCluster(t, 1)
	start(t, c, 0)
	if code := waitExit(t, c, 0, 10*time.Second); code <= 0 {
		t.Fatalf("exit code %d, want a non-zero exit", code)
	}
	line := waitLog(t, c, 0, 0, "/n0/conf/current' — provision the config before starting the primary controller", time.Second)
	if !strings.Contains(line, "FATAL") || !strings.Contains(line, "xce-config install --workdir") {
		t.Fatalf("not the §10.1 FATAL with its remedy: %s", line)
	}
	if _, err := os.Stat(filepath.Join(confDir(c, 0), "current")); !os.IsNotExist(err) {
		t.Fatalf("the failed primary created conf/current: %v", err)
	}
}

// test_primary_recomputes_hash_before_send: the primary's versioned file
// is corrupted on disk while it runs; a fresh standby's fetch makes the
// primary re-hash it, refuse, and rewrite it from memory; the standby ends
// with the correct config.
func TestPrimaryRecomputesHashBeforeSend(t *testing.T) {
	c := newCluster(t, 2, fastTimings...)
	blob := configBlob(t, "recompute", 3, 8)
	install(t, c, 0, blob)
	start(t, c, 0)
	waitRole(t, c, 0, "primary", 10*time.Second)

	file := filepath.Join(confDir(c, 0), sm.VersionName(sumOf(blob)))
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	off := logOffset(c, 0)
	start(t, c, 1)
	line := waitLog(t, c, 0, off, "Config file changed since startup — refusing to send stale hash", 10*time.Second)
	if !strings.Contains(line, "ERROR") {
		t.Fatalf("not an ERROR: %s", line)
	}
	waitLog(t, c, 0, off, "rewriting "+sm.VersionName(sumOf(blob))+" from the verified in-memory copy", 5*time.Second)
	rows, p := converge(t, c, -1, 15*time.Second)
	if p != 0 || rows[1].ConfigTag != tagHex(blob) {
		t.Fatalf("after the refusal:\n%s", fmtRows(rows))
	}
	verifyConf(t, c, 1, blob)
	verifyConf(t, c, 0, blob) // the primary healed its own copy
	if got := logSince(c, 1, 0); !strings.Contains(got, "config file changed since startup") {
		t.Errorf("n1 never saw the refusal (the fetch succeeded at once?)")
	}
}
