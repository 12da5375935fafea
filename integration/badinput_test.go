package integration

// Bad inputs give the documented errors (seed 002 §10) and lose nothing.

import (
	"bytes"
	"context"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xce-hpc/xce/adapters/tlsconf"
	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/sm"
)

// A standby whose conf/current is corrupt, empty, holds a path separator
// or is a symbolic link logs the WARN/ERROR, fetches from the primary and
// ends with a verifying config in a regular pointer file; the versioned
// file it had is still there.
func TestStandbyBadPointerRefetches(t *testing.T) {
	c := newCluster(t, 2, fastTimings...)
	blob := configBlob(t, "bad-pointer", 3, 8)
	name := sm.VersionName(sumOf(blob))
	install(t, c, 0, blob)
	start(t, c, 0, 1)
	converge(t, c, -1, 15*time.Second)
	for _, tc := range []struct {
		name, level, want string
		pointer           []byte
		link              bool // conf/current a symbolic link to a file holding pointer
	}{
		{"corrupt", "ERROR", "conf/current filename does not start with 'cluster.bin.'", []byte("\x00\x9c\xffnot a pointer\n"), false},
		{"corrupt-suffix", "ERROR", "conf/current suffix is not 12 hex chars", []byte("cluster.bin.NOTHEX\n"), false},
		{"dangling", "ERROR", "conf/current names 'conf/cluster.bin.0123456789ab' which is not readable", []byte("cluster.bin.0123456789ab\n"), false},
		{"empty", "WARN", "Config pointer file 'conf/current' exists but is empty — treating as missing config. This can occur if the controller crashed during a config write.", nil, false},
		{"path-separator", "ERROR", "conf/current contains path separator — corrupted pointer file", []byte("../../n0/conf/" + name + "\n"), false},
		// A link, even to the right pointer, is a hand edit (issue 20
		// item 9); the save replaces it with a regular file.
		{"symlink", "ERROR", "conf/current: is a symbolic link (the controller reads only the files it wrote, never through a link)", sm.PointerContents(name), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop(t, c, 1, syscall.SIGTERM)
			ptr := filepath.Join(confDir(c, 1), "current")
			if tc.link {
				if err := os.WriteFile(filepath.Join(confDir(c, 1), "pointer.copy"), tc.pointer, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(ptr); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("pointer.copy", ptr); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(ptr, tc.pointer, 0o600); err != nil {
				t.Fatal(err)
			}
			off := logOffset(c, 1)
			start(t, c, 1)
			line := waitLog(t, c, 1, off, tc.want, 10*time.Second)
			if !strings.Contains(line, "\t"+tc.level+"\t") {
				t.Fatalf("want a %s line: %s", tc.level, line)
			}
			waitLog(t, c, 1, off, "HA: config received and saved (tag="+tagHex(blob)+")", 10*time.Second)
			rows, p := converge(t, c, -1, 10*time.Second)
			if p != 0 || rows[1].ConfigTag != tagHex(blob) {
				t.Fatalf("after the refetch:\n%s", fmtRows(rows))
			}
			verifyConf(t, c, 1, blob)
			if st, err := os.Lstat(ptr); err != nil || !st.Mode().IsRegular() {
				t.Fatalf("conf/current after the refetch: %v, %v", st.Mode(), err)
			}
			if v, _ := checkVersionedFiles(t, confDir(c, 1)); v != 1 {
				t.Fatalf("n1 holds %d versioned files, want 1", v)
			}
			verifyConf(t, c, 0, blob)
		})
	}
}

// A lone primary with an empty pointer: the §10.6a WARN, then the §10.1
// FATAL, exit non-zero, conf/ untouched.
func TestLonePrimaryEmptyPointerFatal(t *testing.T) {
	c := newCluster(t, 1)
	install(t, c, 0, configBlob(t, "empty-pointer", 2, 8))
	if err := os.Truncate(filepath.Join(confDir(c, 0), "current"), 0); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, confDir(c, 0))
	start(t, c, 0)
	if code := waitExit(t, c, 0, 10*time.Second); code <= 0 {
		t.Fatalf("exit code %d, want non-zero", code)
	}
	log := logSince(c, 0, 0)
	warn := strings.Index(log, "Config pointer file 'conf/current' exists but is empty — treating as missing config.")
	fatal := strings.Index(log, "/n0/conf/current' — provision the config before starting the primary controller")
	if warn < 0 || fatal < 0 || warn > fatal {
		t.Fatalf("want the §10.6a WARN, then the §10.1 FATAL:\n%s", log)
	}
	if !strings.Contains(findLine(log, "exists but is empty"), "\tWARN\t") || !strings.Contains(findLine(log, "has no config file"), "\tFATAL\t") {
		t.Fatalf("levels:\n%s", log)
	}
	if d := diffSnapshots(before, snapshotDir(t, confDir(c, 0))); d != "" {
		t.Fatalf("conf/ changed: %s", d)
	}
}

// A lone primary whose versioned file is empty, oversize, garbage (named
// by its own hash, so it fails the decode) or bit-flipped (fails the
// hash): exit non-zero naming the problem; conf/ untouched.
func TestLonePrimaryBadConfigFileFatal(t *testing.T) {
	garbage := make([]byte, 4096)
	if _, err := rand.Read(garbage); err != nil {
		t.Fatal(err)
	}
	garbageName := sm.VersionName(sumOf(garbage))
	for _, tc := range []struct {
		name string
		// spoil damages conf/ (good is the installed blob's versioned
		// name) and returns the text the FATAL must contain.
		spoil func(t *testing.T, dir, good string) string
	}{
		{"empty", func(t *testing.T, dir, good string) string {
			if err := os.Truncate(filepath.Join(dir, good), 0); err != nil {
				t.Fatal(err)
			}
			return "Config file '" + good + "' is empty — not a valid ClusterConfig blob"
		}},
		{"oversize", func(t *testing.T, dir, good string) string {
			if err := os.WriteFile(filepath.Join(dir, good), bytes.Repeat([]byte{0x0a}, sm.MaxConfigSize+1), 0o600); err != nil {
				t.Fatal(err)
			}
			return "Config file 'conf/" + good + "' exceeds CONF_MAX_SIZE (1048576 bytes)"
		}},
		{"garbage", func(t *testing.T, dir, good string) string {
			if err := os.WriteFile(filepath.Join(dir, garbageName), garbage, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "current"), sm.PointerContents(garbageName), 0o600); err != nil {
				t.Fatal(err)
			}
			return "Config file '" + garbageName + "': "
		}},
		{"bit-flip", func(t *testing.T, dir, good string) string {
			p := filepath.Join(dir, good)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/3] ^= 0x40
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return "Config file '" + good + "' does not match its SHA-256"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1)
			blob := configBlob(t, "bad-file", 2, 8)
			install(t, c, 0, blob)
			want := tc.spoil(t, confDir(c, 0), sm.VersionName(sumOf(blob)))
			before := snapshotDir(t, confDir(c, 0))
			fatal, log := startExpectFatal(t, c, 0, "cannot use its config") // the file is there: the FATAL says what is wrong with it (issue 8 defect 8)
			if !strings.Contains(fatal, want) || strings.Contains(fatal, "has no config file") {
				t.Fatalf("want a FATAL naming %q (not 'has no config file'):\n%s", want, log)
			}
			if !strings.Contains(findLine(log, want), "\tERROR\t") {
				t.Fatalf("want an ERROR line naming %q before the FATAL:\n%s", want, log)
			}
			if d := diffSnapshots(before, snapshotDir(t, confDir(c, 0))); d != "" {
				t.Fatalf("conf/ changed: %s", d)
			}
		})
	}
}

// A node presenting a certificate from another CA never joins: n0 and n1
// keep their primary and term, the rogue n2 (which trusts both CAs, so it
// starts and can be asked) stays a candidate and, having no config, ends
// in the §10.1 FATAL.
func TestForeignCANodeNeverJoins(t *testing.T) {
	c := newCluster(t, 3, fastTimings...)
	blob := configBlob(t, "foreign-ca", 3, 8)
	install(t, c, 0, blob)

	// The rogue: same --peers, its own dir, a node certificate for "n2"
	// signed by a foreign CA, and a CA bundle of both CAs.
	rogue := clitool.NewClusterPorts(t.TempDir(), binDir, c.Ports)
	rogue.Args = append(append([]string(nil), fastTimings...), "--election-timeout=3s", "--log-level=debug")
	t.Cleanup(rogue.Stop)
	certs := filepath.Join(rogue.Dir, "certs")
	caPEM, caKey, err := tlsconf.GenerateCA("foreign CA", 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := tlsconf.GenerateCert(caPEM, caKey, "n2", []string{"127.0.0.1", "localhost"}, 365*24*time.Hour, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlsconf.WriteFiles(certs, "n2", crt, key); err != nil {
		t.Fatal(err)
	}
	clusterCA, err := os.ReadFile(filepath.Join(c.Dir, "certs", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	bundle := append(append([]byte(nil), caPEM...), clusterCA...)
	if err := os.WriteFile(filepath.Join(certs, "ca.crt"), bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	adminCrt, err1 := os.ReadFile(filepath.Join(c.Dir, "certs", "admin.crt"))
	adminKey, err2 := os.ReadFile(filepath.Join(c.Dir, "certs", "admin.key"))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	rogueAdmin, err := tlsconf.FromPEM(adminCrt, adminKey, bundle)
	if err != nil {
		t.Fatal(err)
	}

	start(t, c, 0, 1)
	if err := rogue.Start(2); err != nil {
		t.Fatal(err)
	}
	rows, p := converge(t, c, 2, 15*time.Second)
	if p != 0 {
		t.Fatalf("primary %s, want n0", rows[p].Name)
	}
	term := rows[0].Term

	exited := rogue.Exited(2)
	roles := map[string]int{}
	code := 0
poll:
	for deadline := time.Now().Add(20 * time.Second); ; {
		select {
		case code = <-exited:
			break poll
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("rogue n2 still running after 20 s; roles seen %v", roles)
		}
		st, err := clitool.Statuses(context.Background(), peersOf(rogue, 2), rogueAdmin, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].Up {
			roles[st[0].Role]++
		}
		time.Sleep(50 * time.Millisecond)
	}
	// booting and stopped bracket its life; it must never get further
	// than candidate.
	if roles["candidate"] == 0 || roles["standby"]+roles["primary"] > 0 {
		t.Fatalf("rogue n2 roles seen %v, want candidate only", roles)
	}
	if code <= 0 {
		t.Fatalf("rogue n2 exit code %d, want non-zero (§10.1: no config)", code)
	}
	if line := findLine(logSince(rogue, 2, 0), "has no config file"); !strings.Contains(line, "\tFATAL\t") {
		t.Fatalf("rogue n2 did not end in the §10.1 FATAL:\n%s", logSince(rogue, 2, 0))
	}
	// Its handshakes failed: its dials to the others with "unknown
	// certificate authority" (they reject its certificate).
	if !strings.Contains(logSince(rogue, 2, 0), "tls: unknown certificate authority") {
		t.Errorf("rogue n2's debug log shows no rejected handshake:\n%s", logSince(rogue, 2, 0))
	}
	rows, p = converge(t, c, 2, 5*time.Second)
	if p != 0 || rows[0].Term != term || rows[1].Role != "standby" {
		t.Fatalf("the cluster changed while the rogue ran (term was %d):\n%s", term, fmtRows(rows))
	}
	if strings.Contains(logSince(c, 0, 0), "controller n2 joined") {
		t.Fatal("n0 accepted the rogue n2 as a standby")
	}
	if _, err := os.Stat(filepath.Join(rogue.NodeDir(2), "conf", "current")); !os.IsNotExist(err) {
		t.Fatalf("the rogue got a config: %v", err)
	}
	verifyConf(t, c, 0, blob)
	verifyConf(t, c, 1, blob)
}

// A node whose port is taken exits non-zero at start with a FATAL naming
// the address, before any election: it never promotes (issue 8 defect 1:
// it used to log "listening", win the election alone and become a second
// primary, the bind error showing only at shutdown).
func TestTakenPortFatalBeforeElection(t *testing.T) {
	c := newCluster(t, 1)
	install(t, c, 0, configBlob(t, "taken-port", 1, 8))
	addr := "127.0.0.1:" + strconv.Itoa(c.Ports[0])
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("taking %s: %v", addr, err)
	}
	defer l.Close()
	line, log := startExpectFatal(t, c, 0, "cannot listen on")
	if !strings.Contains(line, addr) {
		t.Fatalf("want a FATAL naming %s:\n%s", addr, log)
	}
	if strings.Contains(log, "Promoted to primary") || strings.Contains(log, "election") {
		t.Fatalf("the node ran an election with its port taken:\n%s", log)
	}
}

// startExpectFatal starts node i, which must exit non-zero with a FATAL
// line containing needle; it returns that line and the node's log.
func startExpectFatal(t *testing.T, c *clitool.Cluster, i int, needle string) (line, log string) {
	t.Helper()
	start(t, c, i)
	if code := waitExit(t, c, i, 10*time.Second); code <= 0 {
		t.Fatalf("exit code %d, want non-zero", code)
	}
	log = logSince(c, i, 0)
	line = findLine(log, needle)
	if !strings.Contains(line, "\tFATAL\t") {
		t.Fatalf("want a FATAL line with %q:\n%s", needle, log)
	}
	return line, log
}
